from django.apps import AppConfig


class ReviewsConfig(AppConfig):
    name = "reviews"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # runs never imports reviews (docs/architecture.md, "Apps and dependencies"): the
        # run page's cards and the run exports offer hooks, and reviews registers here.
        from reviews import hooks

        hooks.register()

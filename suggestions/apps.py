from django.apps import AppConfig


class SuggestionsConfig(AppConfig):
    name = "suggestions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Runs never import suggestions: a finished run reaches the suggestion job through
        # the run-finished hook (runs/hooks.py says why a hook).
        from runs.hooks import register_run_finished
        from suggestions.services import suggestion_generation_on_run_finished

        register_run_finished(suggestion_generation_on_run_finished)

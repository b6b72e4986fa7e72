from django.apps import AppConfig


class SuggestionsConfig(AppConfig):
    name = "suggestions"
    default_auto_field = "django.db.models.BigAutoField"

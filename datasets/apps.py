from django.apps import AppConfig


class DatasetsConfig(AppConfig):
    name = "datasets"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # agents may not import datasets: deleting an agent reaches its datasets through a hook.
        from agents.hooks import register_before_agent_delete
        from datasets.services import dataset_on_agent_delete

        register_before_agent_delete(dataset_on_agent_delete)

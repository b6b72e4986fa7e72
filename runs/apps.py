from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # agents may not import runs: deleting an agent reaches its runs through a hook.
        from agents.hooks import register_before_agent_delete
        from runs.services import run_on_agent_delete

        register_before_agent_delete(run_on_agent_delete)
        from datasets.services import register_scoring_changed_hook
        from runs.judging.configs import dataset_scoring_changed

        # Each change of a dataset's scoring settings makes its new judge configuration.
        register_scoring_changed_hook(dataset_scoring_changed)

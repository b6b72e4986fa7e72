from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "monitoring"
    verbose_name = "Monitoring"

    def ready(self) -> None:
        from evalsite import workers
        from monitoring.online import reaper

        workers.workers_lost_forgetting.connect(reaper.workers_lost_forgetting_receive, dispatch_uid="online-scores")

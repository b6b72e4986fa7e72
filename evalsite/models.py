from django.db import models


class WorkerHeartbeat(models.Model):
    """One row per running Celery worker process, refreshed every EVALSITE_WORKER_HEARTBEAT_INTERVAL.

    In the database rather than Redis so that a restarted Redis does not make every live
    worker look dead (and its cases be taken up twice): the database is the source of truth.
    """

    name = models.CharField(max_length=200, unique=True)
    started_at = models.DateTimeField()
    last_seen = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return self.name

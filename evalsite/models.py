from django.db import models


class WorkerHeartbeat(models.Model):
    """One row per running Celery worker process, refreshed every EVALSITE_WORKER_HEARTBEAT_INTERVAL.

    In the database rather than Redis so that a restarted Redis does not make every live
    worker look dead (and its cases be taken up twice): the database is the source of truth.
    """

    name = models.CharField(max_length=200, unique=True)
    started_at = models.DateTimeField()
    last_seen = models.DateTimeField(db_index=True)
    # When the worker last lost its broker connection (a Redis restart): Celery then ends the
    # cases it was running, and the reaper takes back every claim it made before this at once.
    broker_lost_at = models.DateTimeField(null=True, blank=True)
    # When a supervisor saw the worker process die and killed what it left behind (runstack):
    # nothing of it runs, so the reaper takes its claims back at once, not a TTL later.
    ended_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.name


class IdempotencyKey(models.Model):
    """An API creation's Idempotency-Key (evalsite/idempotency.py): the same user sending the same
    key to the same operation gets what the first request created back, not a second object."""

    user = models.ForeignKey("auth.User", on_delete=models.CASCADE, related_name="+")
    # The operation's URL name with the ids of its path, e.g. "playground_send:12".
    operation = models.CharField(max_length=200)
    key = models.CharField(max_length=255)
    # SHA-256 of the request body: the same key with another body is refused, not replayed.
    fingerprint = models.CharField(max_length=64)
    object_id = models.PositiveBigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "operation", "key"], name="unique_idempotency_key"),
        ]

    def __str__(self) -> str:
        return f"{self.operation} {self.key}"

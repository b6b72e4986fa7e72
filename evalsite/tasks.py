from celery import Task, shared_task
from celery.utils.time import get_exponential_backoff_interval
from django.conf import settings
from django.db import InterfaceError, OperationalError

HEALTH_KEY_PREFIX = "evalsite:health:"
# The message priority of what must not wait its turn (the reapers, and the cases the runs'
# reaper takes back from a lost worker); every other task is sent at
# CELERY_TASK_DEFAULT_PRIORITY (6). Redis serves the lower number first (settings.py).
URGENT = 0

# The options of a task that retries database errors (a restarting database, a dropped
# connection) with backoff: `@shared_task(**DATABASE_RETRY)`. Only for idempotent tasks.
DATABASE_ERRORS = (OperationalError, InterfaceError)
DATABASE_MAX_RETRIES = 10
DATABASE_RETRY = {
    "autoretry_for": DATABASE_ERRORS,
    "retry_backoff": 2,
    "retry_backoff_max": 60,
    "retry_jitter": True,
    "max_retries": DATABASE_MAX_RETRIES,
}


def database_retry_countdown(failures: int) -> float:
    """Seconds before the next try after `failures` database errors in a row, as DATABASE_RETRY
    waits: up to 2, 4, 8... s (a random share of it, so retries do not arrive together), at most
    60; (0, 10]: failures past DATABASE_RETRY's max_retries are not retried."""
    return float(get_exponential_backoff_interval(factor=2, retries=failures - 1, maximum=60, full_jitter=True))


@shared_task(bind=True)
def health_check(self: Task, token: str) -> None:
    """Prove a worker is consuming: store the name of the worker under the token in
    Redis for a minute. Only a worker that took the message from the broker can
    write it, which is what the smoke test and the worker test wait for."""
    import redis

    client = redis.Redis.from_url(settings.REDIS_CLIENT_URL)
    try:
        client.set(f"{HEALTH_KEY_PREFIX}{token}", self.request.hostname or "", ex=60)
    finally:
        client.close()


@shared_task(ignore_result=True)
def model_test() -> None:
    """Settings -> Model -> Test connection, off the web request (evalsite/llm/probe.py)."""
    from evalsite.llm.probe import model_test_run

    model_test_run()

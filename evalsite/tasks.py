from celery import Task, shared_task
from django.conf import settings

HEALTH_KEY_PREFIX = "evalsite:health:"


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

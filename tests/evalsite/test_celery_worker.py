"""One Celery task executed by a real worker process through Redis (not eager mode)."""

import time
import uuid

import pytest
import redis
from django.conf import settings

from evalsite.tasks import HEALTH_KEY_PREFIX, health_check

pytestmark = pytest.mark.worker


def _wait_for_key(key: str, timeout: float = 30) -> bytes | None:
    client = redis.Redis.from_url(settings.REDIS_CLIENT_URL)
    try:
        deadline = time.monotonic() + timeout
        while (value := client.get(key)) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        return value
    finally:
        client.close()


def test_a_worker_process_runs_a_task_sent_through_redis(celery_worker):
    celery_worker(concurrency=1)
    token = uuid.uuid4().hex

    health_check.delay(token)

    # The value is the hostname of the worker that ran the task: the process the fixture started.
    value = _wait_for_key(f"{HEALTH_KEY_PREFIX}{token}")
    assert value is not None, "no worker ran the task"
    assert value.decode().startswith("test-")


def test_a_task_sent_before_any_worker_runs_waits_in_redis_until_one_starts(celery_worker):
    token = uuid.uuid4().hex
    health_check.delay(token)
    assert _wait_for_key(f"{HEALTH_KEY_PREFIX}{token}", timeout=1) is None

    celery_worker(concurrency=1)

    assert _wait_for_key(f"{HEALTH_KEY_PREFIX}{token}") is not None

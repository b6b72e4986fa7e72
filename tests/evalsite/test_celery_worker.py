"""One Celery task executed by a real worker process through Redis (not eager mode)."""

import base64
import json
import uuid
from collections.abc import Iterator

import pytest
import redis
from django.conf import settings

from evalsite.tasks import HEALTH_KEY_PREFIX, health_check
from tests.broker import queue_keys
from tests.waiting import wait_for

pytestmark = pytest.mark.worker


@pytest.fixture
def redis_client() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(settings.REDIS_CLIENT_URL)
    yield client
    client.close()


def _wait_for_key(client: redis.Redis, key: str) -> bytes:
    return wait_for(lambda: client.get(key), timeout=30, interval=0.1, what=f"a worker to write {key}")


def _queued_args(client: redis.Redis) -> list[list[object]]:
    """The positional arguments of the task messages waiting in the suite's queue
    (kombu's Redis transport: a JSON envelope around a base64 JSON [args, kwargs, embed]),
    at every priority (tests/broker.py)."""
    messages = [raw for key in queue_keys() for raw in client.lrange(key, 0, -1)]
    return [json.loads(base64.b64decode(json.loads(raw)["body"]))[0] for raw in messages]


def test_a_worker_process_runs_a_task_sent_through_redis(celery_worker, redis_client):
    celery_worker(concurrency=1)
    token = uuid.uuid4().hex

    health_check.delay(token)

    # The value is the hostname of the worker that ran the task: the process the fixture started.
    value = _wait_for_key(redis_client, f"{HEALTH_KEY_PREFIX}{token}")
    assert value.decode().startswith("test-")


def test_a_task_sent_before_any_worker_runs_waits_in_redis_until_one_starts(celery_worker, redis_client):
    token = uuid.uuid4().hex
    health_check.delay(token)
    # Waiting, not run: the message sits in the queue (read there, not guessed from a pause).
    assert [token] in _queued_args(redis_client)
    assert redis_client.get(f"{HEALTH_KEY_PREFIX}{token}") is None

    celery_worker(concurrency=1)

    _wait_for_key(redis_client, f"{HEALTH_KEY_PREFIX}{token}")
    assert [token] not in _queued_args(redis_client)

"""A worker's heartbeat sends the reaper as soon as another worker has died or lost its broker
(issue 48: a killed worker's cases waited for beat's next reaper pass on top of the TTL), and
notes a missed beat, after which the reaper judges nobody by heartbeats for a TTL."""

import json
import time
from datetime import timedelta

import pytest
import redis
from django.utils import timezone

from evalsite import workers
from evalsite.models import WorkerHeartbeat
from tests.broker import queue_keys
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)  # the send is a thread of its own


@pytest.fixture
def in_a_worker(monkeypatch, settings):
    """This process as a worker's main process: an identity and a fresh lease, both restored after."""
    monkeypatch.setattr(workers, "WORKER_ID", "here:1:live")
    saved = bytes(workers._lease)
    workers._lease[:] = bytes(len(workers._lease))
    workers._LEASE.pack_into(workers._lease, 0, time.time(), 0.0)
    workers._reaped.clear()
    WorkerHeartbeat.objects.create(name=workers.WORKER_ID, started_at=timezone.now(), last_seen=timezone.now())
    client = redis.Redis.from_url(settings.REDIS_CLIENT_URL)
    client.delete(*queue_keys())
    yield client
    client.delete(*queue_keys())
    client.close()
    workers._lease[:] = saved
    workers._reaped.clear()


def _beat(name: str, seconds_ago: float, **fields) -> None:
    seen = timezone.now() - timedelta(seconds=seconds_ago)
    WorkerHeartbeat.objects.create(name=name, started_at=seen, last_seen=seen, **fields)


def _reapers_sent(client) -> list[str]:
    """The tasks waiting at the most urgent priority (the reapers' and lost cases')."""
    return [json.loads(raw)["headers"]["task"] for raw in client.lrange(queue_keys()[0], 0, -1)]


def _look(client, expected: int) -> list[str]:
    workers._reap_for_the_lost()
    wait_for(lambda: not workers._sending.locked(), timeout=30, interval=0.05, what="the send to end")
    return wait_for(lambda: len(_reapers_sent(client)) == expected and _reapers_sent(client), what="the reaper sent")


def test_a_worker_whose_heartbeat_is_older_than_the_ttl_has_the_reaper_sent_once(in_a_worker, settings):
    client = in_a_worker
    workers._reap_for_the_lost()  # nobody is dead: nothing is sent
    assert not workers._sending.locked() and _reapers_sent(client) == []

    _beat("killed:1:a", settings.EVALSITE_WORKER_HEARTBEAT_TTL + 1)
    assert _look(client, 1) == ["runs.tasks.run_reap"]
    workers._reap_for_the_lost()  # the same death again: not sent again
    assert not workers._sending.locked() and len(_reapers_sent(client)) == 1

    _beat("killed:2:b", 1, ended_at=timezone.now())  # its supervisor saw it die: no TTL to wait for
    assert _look(client, 2) == ["runs.tasks.run_reap"] * 2


def test_a_lost_broker_connection_has_the_reaper_sent_each_time(in_a_worker):
    client = in_a_worker
    lost_at = timezone.now()
    WorkerHeartbeat.objects.filter(name=workers.WORKER_ID).update(broker_lost_at=lost_at)
    assert _look(client, 1) == ["runs.tasks.run_reap"]
    # The reaper forgot that loss; a second one is news.
    WorkerHeartbeat.objects.filter(name=workers.WORKER_ID).update(broker_lost_at=None)
    workers._reap_for_the_lost()
    WorkerHeartbeat.objects.filter(name=workers.WORKER_ID).update(broker_lost_at=lost_at + timedelta(seconds=9))
    assert len(_look(client, 2)) == 2


def test_a_beat_after_a_missed_one_makes_the_heartbeat_rough_for_a_ttl(in_a_worker, settings):
    workers.beat_once()
    assert not workers.heartbeat_rough()
    last_ok = time.time() - 2.5 * settings.EVALSITE_WORKER_HEARTBEAT_INTERVAL  # a beat went missing
    workers._LEASE.pack_into(workers._lease, 0, last_ok, 0.0)
    workers.beat_once()
    assert workers.heartbeat_rough()
    rough_at = time.time() - settings.EVALSITE_WORKER_HEARTBEAT_TTL - 0.1
    workers._ROUGH.pack_into(workers._lease, workers._ROUGH_AT, rough_at)
    assert not workers.heartbeat_rough()

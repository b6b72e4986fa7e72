"""Redis dies and comes back empty mid-run: the reaper re-queues the lost cases from the database."""

import socket
import subprocess
from collections import Counter
from collections.abc import Iterator

import pytest
import redis

from agents.models import Agent
from runs import services
from runs.models import Result, Run
from tests.runs.conftest import wait_settled
from tests.waiting import wait_for

pytestmark = [pytest.mark.chaos, pytest.mark.worker]


class RedisServer:
    """A throwaway redis-server on a free TCP port, with no persistence: a restart loses everything."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> "RedisServer":
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis.from_url(self.url)
        wait_for(lambda: self._pings(client), timeout=30, interval=0.1, what="redis-server to accept connections")
        client.close()
        return self

    @staticmethod
    def _pings(client: redis.Redis) -> bool:
        try:
            return bool(client.ping())
        except redis.ConnectionError:
            return False

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


def _point_celery_at(app, url: str) -> None:
    from kombu import pools

    app.conf.broker_url = url
    # Celery's broker pools live in kombu's global registry: close and forget them all (as after a
    # fork), so the next send builds fresh ones for `url` and later tests never get a closed pool.
    pools.reset()
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def own_redis(settings) -> Iterator[RedisServer]:
    """This test's own Redis, for the worker (REDIS_URL) and for this process's Celery producer."""
    from evalsite.celery import app

    server = RedisServer().start()
    old_url = app.conf.broker_url
    settings.BROKER_URL = settings.CELERY_BROKER_URL = server.url
    settings.REDIS_CLIENT_URL = server.url
    # The Celery app read its broker at first use: point it at this server and drop pooled connections.
    _point_celery_at(app, server.url)
    yield server
    _point_celery_at(app, old_url)
    server.kill()


def test_a_restarted_redis_loses_no_case_and_scores_each_exactly_once(
    celery_worker, fake_llm, make_dataset, alice, settings, own_redis
):
    settings.EVALSITE_STALE_QUEUE_SECONDS = 4
    settings.EVALSITE_STALE_CLAIM_SECONDS = 8  # a case cut off by the lost connection is taken up again soon
    fake_llm.set_latency(0.3)
    dataset = make_dataset(10, kind=Agent.Kind.LLM)
    worker = celery_worker(
        concurrency=2, beat=True, env={"REDIS_URL": own_redis.url, "EVALSITE_STALE_QUEUE_SECONDS": "4"}
    )
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    wait_for(
        lambda: Result.objects.filter(run=run, status=Result.Status.PASS).count() >= 3,
        timeout=120,
        what="3 finished cases",
    )
    client = redis.Redis.from_url(own_redis.url)
    # Two processes for a window of three: a case message waits in Redis, and the restart loses it.
    wait_for(lambda: client.llen(settings.CELERY_TASK_DEFAULT_QUEUE) >= 1, what="a case message waiting in Redis")
    client.close()

    own_redis.kill()
    # Restart only once the worker has noticed the lost connection while Redis was down.
    wait_for(lambda: "Connection to broker lost" in worker.read_log(), timeout=60, what="the worker to lose Redis")
    own_redis.start()  # same port, empty: every queued message is gone
    run = wait_settled(run, timeout=150, worker=worker)

    assert run.status == Run.Status.COMPLETED
    results = list(Result.objects.filter(run=run))
    assert len(results) == 10
    assert set(Counter((r.case_id, r.repeat, r.variant) for r in results).values()) == {1}
    assert {r.status for r in results} == {Result.Status.PASS}
    assert (run.completed, run.passed) == (10, 10)
    assert f"stale case(s) of run {run.pk}" in worker.read_log()  # the reaper, not luck, brought them back

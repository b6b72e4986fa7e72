"""Redis dies and comes back empty mid-run: the reaper re-queues the lost cases from the database."""

import time
from collections import Counter

import pytest
import redis

from agents.models import Agent
from runs import services
from runs.models import Result, Run
from tests.broker import waiting
from tests.runs.conftest import wait_settled
from tests.waiting import wait_for

pytestmark = [pytest.mark.chaos, pytest.mark.worker]


@pytest.mark.parametrize("window", ["shipped", "wider than the pool"])
def test_a_restarted_redis_loses_no_case_and_scores_each_exactly_once(
    celery_worker, fake_llm, make_dataset, alice, settings, own_redis, window
):
    settings.EVALSITE_STALE_QUEUE_SECONDS = 4
    settings.EVALSITE_STALE_CLAIM_SECONDS = 8  # a case cut off by the lost connection is taken up again soon
    # The worker as shipped (WORKER_CONCURRENCY, which `make run` uses). At 4 processes and the
    # shipped window of 3, every message is held unacknowledged by the worker when Redis dies,
    # and Celery 5.7 died restoring them (evalsite/worker_consumer.py). A window wider than the
    # pool also leaves messages waiting in Redis, which the restart loses.
    processes = settings.WORKER_CONCURRENCY
    if window != "shipped":
        settings.EVALSITE_RUN_CONCURRENCY = processes + 2
    fake_llm.set_latency(0.3)
    dataset = make_dataset(16, kind=Agent.Kind.LLM)
    worker = celery_worker(
        concurrency=processes, beat=True, env={"REDIS_URL": own_redis.url, "EVALSITE_STALE_QUEUE_SECONDS": "4"}
    )
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    wait_for(
        lambda: Result.objects.filter(run=run, status=Result.Status.PASS).count() >= 3,
        timeout=120,
        what="3 finished cases",
    )
    if window != "shipped":
        client = redis.Redis.from_url(own_redis.url)
        wait_for(lambda: waiting(client) >= 1, what="a case message waiting in Redis")
        client.close()
    passed_before = Result.objects.filter(run=run, status=Result.Status.PASS).count()

    own_redis.kill()
    # Restart only once the worker has noticed the lost connection while Redis was down.
    wait_for(lambda: "Connection to broker lost" in worker.read_log(), timeout=60, what="the worker to lose Redis")
    own_redis.start()  # same port, empty: every queued message is gone
    restarted = time.monotonic()
    wait_for(
        lambda: (
            Result.objects.filter(run=run, status=Result.Status.PASS).count() > passed_before
            or worker.process.poll() is not None
        ),
        timeout=150,
        what="a case finished after the restart",
    )
    assert worker.process.poll() is None, f"the worker died on the Redis restart:\n{worker.read_log()[-6000:]}"
    first_after = time.monotonic() - restarted
    run = wait_settled(run, timeout=150, worker=worker)
    print(
        f"\nRedis restart at concurrency {processes}, window {run.concurrency}: "
        f"first case finished {first_after:.1f} s after Redis was back, "
        f"run completed {time.monotonic() - restarted:.1f} s after"
    )

    assert worker.process.poll() is None, "the worker must survive the restart"
    assert "Unrecoverable error" not in worker.read_log()
    assert run.status == Run.Status.COMPLETED
    results = list(Result.objects.filter(run=run))
    assert len(results) == 16
    assert set(Counter((r.case_id, r.repeat, r.variant) for r in results).values()) == {1}
    assert {r.status for r in results} == {Result.Status.PASS}
    assert (run.completed, run.passed) == (16, 16)
    assert f"stale case(s) of run {run.pk}" in worker.read_log()  # the reaper, not luck, brought them back

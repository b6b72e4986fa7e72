"""SIGTERM (a deploy, `docker stop`) mid-run: Celery's warm shutdown, then a fresh worker."""

from collections import Counter

import pytest

from agents.models import Agent
from runs import services
from runs.models import Result, Run
from tests.runs.conftest import wait_settled
from tests.waiting import wait_for

pytestmark = [pytest.mark.chaos, pytest.mark.worker]


def test_a_sigtermed_worker_finishes_its_cases_and_a_new_worker_completes_the_run(
    celery_worker, fake_llm, make_dataset, alice, settings, own_redis
):
    fake_llm.set_latency(0.5)
    dataset = make_dataset(8, kind=Agent.Kind.LLM, dataset={"number_of_requests": 2})
    first = celery_worker(concurrency=settings.WORKER_CONCURRENCY, env={"REDIS_URL": own_redis.url})
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    wait_for(
        lambda: Result.objects.filter(run=run, status=Result.Status.PASS).count() >= 4,
        timeout=120,
        what="4 finished cases",
    )
    in_flight_before = {r.trace["case"] for r in fake_llm.requests if r.task == "agent" and r.seq_out is None}
    asked_before = fake_llm.count(task="agent")

    first.terminate(timeout=90)
    assert first.process.returncode is not None
    assert "Warm shutdown" in first.read_log()
    # It finished the cases in hand and started no new one: its lanes handed the run's next
    # cases on (one may have been starting as the signal came) instead of running on for
    # their lane time, which would have run all 16 here before the worker let go.
    assert fake_llm.count(task="agent") - asked_before <= 1
    assert Result.objects.filter(run=run, status=Result.Status.QUEUED).exists()
    # A warm shutdown lets the cases it was running finish: none is left half-claimed.
    for case_key in in_flight_before:
        result = Result.objects.get(pk=int(case_key))
        assert result.status in (Result.Status.PASS, Result.Status.QUEUED), (result.pk, result.status)
    assert not Result.objects.filter(run=run, status=Result.Status.RUNNING).exists()

    second = celery_worker(concurrency=settings.WORKER_CONCURRENCY, env={"REDIS_URL": own_redis.url})
    run = wait_settled(run, timeout=120, worker=second)

    assert run.status == Run.Status.COMPLETED
    results = list(Result.objects.filter(run=run))
    keys = Counter((r.case_id, r.repeat, r.variant) for r in results)
    assert len(results) == 16 and set(keys.values()) == {1}
    assert {r.status for r in results} == {Result.Status.PASS}
    assert (run.completed, run.passed) == (16, 16)
    for result in results:
        answered = [
            r for r in fake_llm.requests
            if r.task == "judge" and r.trace.get("case") == str(result.pk) and r.status == 200
        ]  # fmt: skip
        assert len(answered) == 1, result.pk

"""A run with a budget cap whose worker is killed (kill -9) mid-run: a second worker takes the
killed cases up, the run stops at its cap, and no case is lost, doubled or started after the cap."""

from collections import Counter
from decimal import Decimal

import pytest

from agents.models import Agent
from runs import services
from runs.engine.budget import NOT_RUN
from runs.models import Result, Run
from tests.runs.conftest import wait_settled
from tests.waiting import wait_for

pytestmark = [pytest.mark.chaos, pytest.mark.worker]

# A model litellm has a price for, served by the fake: each call costs real money on paper.
PRICED = "openai/gpt-4o-mini"
LOST_AFTER_THE_END = "Not finished: its worker was lost after the run ended."


def test_a_capped_run_whose_worker_is_killed_stops_at_its_cap_losing_and_doubling_nothing(
    celery_worker, fake_llm, make_dataset, alice, settings, own_redis
):
    settings.EVALSITE_LLM_MODEL = settings.EVALSITE_JUDGE_MODEL = PRICED
    # At the shipped settings: the killed worker's heartbeat stops, so the reaper takes its
    # claims back after EVALSITE_WORKER_HEARTBEAT_TTL (5 s), sent by the second worker's
    # heartbeat as soon as it sees that, not after the stale-claim timeout.
    fake_llm.set_latency(0.4)
    env = {"REDIS_URL": own_redis.url}
    first = celery_worker(concurrency=settings.WORKER_CONCURRENCY, beat=True, env=env)

    # What one case (agent + judge) costs with these prompts: a one-case run without a cap.
    probe_set = make_dataset(1, kind=Agent.Kind.LLM)
    probe = wait_settled(services.run_start(agent=probe_set.agent, dataset=probe_set, user=alice, budget_cap=None))
    case_cost = Result.objects.get(run=probe).agent_cost + Result.objects.get(run=probe).judge_cost
    assert case_cost > 0

    dataset = make_dataset(14, kind=Agent.Kind.LLM)
    cap = case_cost * Decimal("4.5")  # reached by the fifth case to finish
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice, budget_cap=cap)
    wait_for(
        lambda: Result.objects.filter(run=run, status=Result.Status.PASS).count() >= 2,
        timeout=120,
        what="2 finished cases",
    )
    wait_for(lambda: Result.objects.filter(run=run, status=Result.Status.RUNNING).exists(), what="a case in flight")

    first.kill()  # the worker and its pool children, as an OOM killer would
    running = Result.objects.filter(run=run, status=Result.Status.RUNNING)
    in_flight = {str(pk) for pk in running.values_list("pk", flat=True)}
    assert in_flight  # killed mid-case: the second worker has claims of a dead one to take up
    asked_before = Counter(r.trace.get("case") for r in fake_llm.requests if r.task == "agent")
    second = celery_worker(concurrency=settings.WORKER_CONCURRENCY, beat=True, env=env)
    run = wait_settled(run, timeout=150, worker=second)

    results_by_status = Counter(Result.objects.filter(run=run).values_list("status", flat=True))
    print(f"\nbudget cap with kill -9: {len(in_flight)} case(s) in flight killed; results {dict(results_by_status)}")
    assert (run.status, run.stop_reason) == (Run.Status.STOPPED, Run.BUDGET_REACHED)
    results = list(Result.objects.filter(run=run))
    assert len(results) == 14 and set(Counter((r.case_id, r.repeat, r.variant) for r in results).values()) == {1}
    by_status = Counter(r.status for r in results)
    assert set(by_status) <= {Result.Status.PASS, Result.Status.SKIPPED}, [(r.pk, r.status, r.error) for r in results]
    passed = [r for r in results if r.status == Result.Status.PASS]
    # The counters add each saved case once: a case saved twice would count twice here.
    assert (run.completed, run.passed) == (len(passed), len(passed))
    assert run.agent_cost == sum(r.agent_cost for r in passed)
    assert run.judge_cost == sum(r.judge_cost for r in passed)
    assert run.agent_cost + run.judge_cost >= cap
    # Five cases reach the cap; at most the window's other cases were already calling then.
    assert 5 <= len(passed) <= 5 + settings.EVALSITE_RUN_CONCURRENCY - 1, len(passed)
    skipped = [r for r in results if r.status == Result.Status.SKIPPED]
    assert {r.error for r in skipped} <= {NOT_RUN, LOST_AFTER_THE_END}, {r.error for r in skipped}
    asked = Counter(r.trace.get("case") for r in fake_llm.requests if r.task == "agent")
    for result in results:
        key = str(result.pk)
        if key in in_flight:
            # A case the dead worker was running is asked again at most once.
            assert asked[key] <= 2, (result.pk, asked[key])
        elif result.status == Result.Status.PASS:
            assert asked[key] == 1 and result.attempts == 1, (result.pk, asked[key], result.attempts)
        else:
            # Skipped at the cap: never started, so its agent was never asked.
            assert asked[key] == asked_before[key] == 0, (result.pk, result.error)
    assert fake_llm.count("summary", run=run.pk) == 0  # the cap is hard: no summary call either

"""The hard cost cap of a run (runs/engine/budget.py): Stopped with "budget reached", results
kept, and no call started once the cap is reached, counted at the fake LLM server."""

from decimal import Decimal

import pytest

from agents.models import Agent
from runs import services
from runs.engine import case as engine
from runs.engine import claims, execution, saving
from runs.models import Result, Run
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db

# A model litellm has a price for, served by the fake: each call costs real money on paper.
PRICED = "openai/gpt-4o-mini"


@pytest.fixture
def priced(fake_llm, settings):
    settings.EVALSITE_LLM_MODEL = PRICED
    settings.EVALSITE_JUDGE_MODEL = PRICED
    return fake_llm


def _case_cost(make_dataset, alice) -> Decimal:
    """What one case (agent + judge) costs with these prompts, from a run without a cap."""
    probe = drive(services.run_start(agent=(ds := make_dataset(1, kind=Agent.Kind.LLM)).agent, dataset=ds, user=alice))
    result = Result.objects.get(run=probe)
    assert result.agent_cost > 0 and result.judge_cost > 0
    return result.agent_cost + result.judge_cost


def test_a_run_stops_at_its_cap_keeping_its_results_and_starting_nothing_after(make_dataset, alice, priced):
    cap = _case_cost(make_dataset, alice) * Decimal("1.5")  # reached by the second case
    priced.reset()
    dataset = make_dataset(6, kind=Agent.Kind.LLM)
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice, budget_cap=cap)
    assert run.budget_cap == cap

    run = drive(run)

    assert run.status == Run.Status.STOPPED
    assert run.stop_reason == Run.BUDGET_REACHED
    assert run.agent_cost + run.judge_cost >= run.budget_cap
    # The first case's lane ran the fourth case after it (the second and third were queued for
    # the window's other lanes) and the fourth reached the cap: whatever had not started is skipped.
    statuses = list(Result.objects.filter(run=run).order_by("id").values_list("status", flat=True))
    assert statuses == ["pass", "skipped", "skipped", "pass", "skipped", "skipped"]
    assert (run.completed, run.passed) == (2, 2)
    skipped = Result.objects.filter(run=run, status=Result.Status.SKIPPED)
    assert {r.error for r in skipped} == {"Not run: the run reached its budget cap."}
    # The fake server saw the agent and the judge of the two cases that ran, nothing more
    # (no summary either: the cap is hard).
    assert priced.count("agent", run=run.pk) == 2
    assert priced.count("judge", run=run.pk) == 2
    assert priced.count("summary", run=run.pk) == 0
    assert run.summary_note.startswith("No summary: the run reached its budget cap.")


def test_a_case_already_calling_when_the_cap_is_reached_finishes_and_is_counted(make_dataset, alice, priced):
    cap = _case_cost(make_dataset, alice) * Decimal("0.5")  # the first case to finish reaches it
    priced.reset()
    dataset = make_dataset(5, kind=Agent.Kind.LLM)
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice, budget_cap=cap)
    first, second, third = Result.objects.filter(run=run, status=Result.Status.QUEUED).order_by("id")
    # The second case is claimed and has made its calls (a worker of the window of 3) ...
    in_flight, _ = claims.result_claim(second.pk, second.token)
    outcome = engine.execute(in_flight, in_flight.run, execution._version(run.agent_version_id))
    # ... when the first case finishes and reaches the cap.
    services.run_execute_case(result_id=first.pk, token=first.token)
    run.refresh_from_db()
    assert (run.status, run.stop_reason) == (Run.Status.STOPPED, Run.BUDGET_REACHED)

    saving.result_save(in_flight, second.token, outcome)
    # The third case's message arrives after the stop: its case is skipped, no call is made.
    services.run_execute_case(result_id=third.pk, token=third.token)
    run = drive(run)

    assert list(Result.objects.filter(run=run).order_by("id").values_list("status", flat=True)) == [
        "pass",
        "pass",
        "skipped",
        "skipped",
        "skipped",
    ]
    assert run.completed == 2
    saved = Result.objects.filter(run=run, status=Result.Status.PASS)
    assert run.agent_cost == sum(r.agent_cost for r in saved)  # the in-flight case's cost counts
    assert priced.count("agent", run=run.pk) == 2


def test_a_case_claimed_just_before_the_stop_makes_no_call(make_dataset, alice, priced):
    cap = _case_cost(make_dataset, alice) * Decimal("0.5")
    priced.reset()
    dataset = make_dataset(4, kind=Agent.Kind.LLM)
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice, budget_cap=cap)
    first, second, _ = Result.objects.filter(run=run, status=Result.Status.QUEUED).order_by("id")
    # The second case's worker claimed it (queued -> running) just before the first case's
    # save stopped the run, and reads the stopped run with its claim.
    Result.objects.filter(pk=second.pk).update(status=Result.Status.RUNNING)
    services.run_execute_case(result_id=first.pk, token=first.token)
    calls = priced.count("agent", run=run.pk)

    services.run_execute_case(result_id=second.pk, token=second.token, retry=True)

    second.refresh_from_db()
    assert second.status == Result.Status.SKIPPED
    assert priced.count("agent", run=run.pk) == calls == 1


def test_a_run_takes_its_teams_default_cap_unless_given_one(make_dataset, alice, no_llm, team):
    team.run_budget = Decimal("2.5")
    team.save()
    dataset = make_dataset(1)
    assert services.run_start(agent=dataset.agent, dataset=dataset, user=alice).budget_cap == Decimal("2.5")
    dataset = make_dataset(1)
    assert services.run_start(agent=dataset.agent, dataset=dataset, user=alice, budget_cap=None).budget_cap is None


def test_a_run_without_a_cap_runs_to_the_end(make_dataset, alice, priced):
    dataset = make_dataset(3, kind=Agent.Kind.LLM)
    run = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice, budget_cap=None))
    assert (run.status, run.stop_reason, run.completed) == (Run.Status.COMPLETED, "", 3)

import pytest

from agents.models import Agent
from runs import services
from runs.models import Result, Run
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db


def test_it_waits_while_cases_are_left(make_dataset, alice, no_llm):
    run = services.run_start(agent=(dataset := make_dataset(2)).agent, dataset=dataset, user=alice)
    services.run_finish(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.PENDING


def test_figures_exclude_smoke_variants_from_the_average(make_dataset, alice, fake_llm):
    fake_llm.add_rule(task="paraphrase", reply="Reworded question")
    fake_llm.add_rule(task="judge", contains="Reworded question", json={"score": 2, "reasoning": "Wrong."})
    fake_llm.add_rule(task="judge", contains="Question 02", json={"score": 4, "reasoning": "Half."})
    dataset = make_dataset(2, kind=Agent.Kind.LLM, smoke_count=2)

    run = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))

    assert run.status == Run.Status.COMPLETED
    assert (run.total, run.completed) == (6, 6)
    assert (run.passed, run.failed, run.errored) == (1, 1, 0)
    assert run.average_score == 6  # (8 + 4) / 2: the four variants scored 2 and are left out
    assert run.robustness == 0.0
    assert run.consistency is None  # one repeat per case


def test_robustness_is_the_pass_rate_of_variants(make_dataset, alice, fake_llm):
    fake_llm.add_rule(task="paraphrase", reply="Reworded question")
    fake_llm.add_rule(task="judge", contains="Reworded question", json={"score": 2, "reasoning": "Wrong."}, times=1)
    dataset = make_dataset(1, kind=Agent.Kind.LLM, smoke_count=4)

    run = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))

    assert run.robustness == 0.75


def test_it_writes_an_llm_summary_of_the_failures(make_dataset, alice, fake_llm):
    fake_llm.add_rule(task="judge", json={"score": 3, "reasoning": "Missed the 30 days."})
    fake_llm.add_rule(task="summary", reply="The agent misses the refund window.")
    dataset = make_dataset(2, kind=Agent.Kind.LLM)

    run = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))

    assert run.summary == "The agent misses the refund window."
    assert run.summary_note == ""
    summary_request = [r for r in fake_llm.requests if r.task == "summary"][0]
    assert "Missed the 30 days." in summary_request.text
    assert "failed 2" in summary_request.text


def test_with_summaries_switched_off_no_model_call_is_made_for_one(make_dataset, alice, fake_llm, settings):
    settings.EVALSITE_RUN_SUMMARY = False
    dataset = make_dataset(2, kind=Agent.Kind.LLM)

    run = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))

    assert run.status == Run.Status.COMPLETED
    assert run.summary == ""
    assert run.summary_note == "No summary: run summaries are switched off (EVALSITE_RUN_SUMMARY=false)."
    assert not run.summary_pending
    assert fake_llm.count(task="summary") == 0
    assert fake_llm.count(task="judge") == 2


def test_a_summary_cut_at_its_token_limit_is_bounded_and_marked(make_dataset, alice, fake_llm, settings):
    settings.EVALSITE_LLM_MAX_TOKENS = {**settings.EVALSITE_LLM_MAX_TOKENS, "summary": 20}
    fake_llm.add_rule(task="judge", json={"score": 3, "reasoning": "Missed the 30 days."})
    fake_llm.add_rule(task="summary", reply="The agent keeps missing the refund window. " * 40)
    dataset = make_dataset(1, kind=Agent.Kind.LLM)

    run = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))

    summary_request = [r for r in fake_llm.requests if r.task == "summary"][0]
    assert summary_request.body["max_tokens"] == 20
    assert run.summary.endswith(" …") and len(run.summary) <= 20 * 4 + 2
    assert run.summary_note == (
        "The summary was cut at its length limit of 20 tokens: "
        "raise EVALSITE_LLM_MAX_TOKENS_SUMMARY for a complete one."
    )
    assert not run.summary_pending
    assert fake_llm.count(task="summary") == 1


def test_without_a_model_the_summary_is_a_note(make_dataset, alice, no_llm):
    run = drive(services.run_start(agent=(dataset := make_dataset(1)).agent, dataset=dataset, user=alice))
    assert run.summary == ""
    assert run.summary_note == "No summary: no model is configured. The figures above are complete."
    assert not run.summary_pending


def test_a_second_finish_never_writes_a_second_summary(make_dataset, alice, fake_llm):
    run = drive(
        services.run_start(agent=(dataset := make_dataset(1, kind=Agent.Kind.LLM)).agent, dataset=dataset, user=alice)
    )
    services.run_finish(run_id=run.pk)
    assert fake_llm.count(task="summary") == 1


def test_counters_are_recounted_from_the_results(make_dataset, alice, no_llm):
    run = drive(services.run_start(agent=(dataset := make_dataset(3)).agent, dataset=dataset, user=alice))
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, completed=99, passed=0, summary_note="")
    services.run_finish(run_id=run.pk)
    run.refresh_from_db()
    assert (run.completed, run.passed) == (3, 3)
    assert Result.objects.filter(run=run, status=Result.Status.PASS).count() == 3

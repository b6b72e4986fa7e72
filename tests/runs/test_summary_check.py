"""A model-written run summary checked against the run's own figures (runs/judging/summary_check.py)."""

import pytest
from django.urls import reverse

from agents.models import Agent
from runs import services
from runs.judging.summary_check import RunFigures, disagreements
from runs.reports import exporters
from tests.runs.conftest import drive

FIGURES = RunFigures(total=10, passed=4, failed=5, errored=1, average=5.2, case_numbers=frozenset(range(1, 11)))

AGREES = [
    "4 of 10 cases passed and 5 failed, with one error; the average score was 5.2/10.",
    "The agent passed 4 cases. Five cases failed, mostly on the refund window (case 3 and case 7).",
    "A 40% pass rate. The agent keeps missing figures.",
    "Four passed, 5 failed and 1 errored.",
    "The agent struggles with refunds; it should quote the policy's numbers.",
    "Average 5.2. Fix the refund answers first.",
]
DISAGREES = [
    ("10 of 10 cases passed; average 9.9; no failures.", 3),
    ("All cases passed.", 1),
    ("6 passed and 4 failed.", 2),
    ("The average score was 7.5/10.", 1),
    ("90% of cases passed.", 1),
    ("Case 14 shows the problem best.", 1),
    ("There were no failures.", 1),
    ("Two errors stopped the run.", 1),
]


@pytest.mark.parametrize("summary", AGREES)
def test_a_summary_whose_figures_are_the_runs_has_no_disagreement(summary):
    assert disagreements(summary, FIGURES) == []


@pytest.mark.parametrize(("summary", "count"), DISAGREES)
def test_each_figure_the_run_contradicts_is_named(summary, count):
    assert len(disagreements(summary, FIGURES)) == count


def test_the_difference_is_said_in_plain_words():
    assert disagreements("10 of 10 cases passed; average 9.9; no failures.", FIGURES) == [
        "The summary says 10 of 10 passed; the run has 4 of 10 passed.",
        "The summary says there were no failures; the run has 5 failed.",
        "The summary says an average of 9.9; the run has an average of 5.2.",
    ]


WRONG = "10 of 10 cases passed with an average of 9.9; no failures."


@pytest.mark.django_db
def test_a_summary_that_disagrees_is_written_again_once_then_flagged_on_the_page_and_exports(
    make_dataset, alice, fake_llm, client_alice
):
    fake_llm.add_rule(task="judge", json={"score": 3, "reasoning": "Missed the 30 days."})
    fake_llm.add_rule(task="summary", reply=WRONG)
    dataset = make_dataset(2, kind=Agent.Kind.LLM)

    run = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))

    assert fake_llm.count(task="summary") == 2  # the summary, and one rewrite with the corrections
    retry = [r for r in fake_llm.requests if r.task == "summary"][1]
    assert "The summary says 10 of 10 passed; the run has 0 of 2 passed." in retry.text
    assert run.summary == WRONG
    assert run.summary_model
    assert run.summary_disagreements[0] == "The summary says 10 of 10 passed; the run has 0 of 2 passed."
    page = client_alice.get(reverse("runs:detail", args=[dataset.agent.pk, run.pk])).content.decode()
    assert "This summary disagrees with the run's own figures." in page
    assert "Written by a model (" in page
    rows = dict(exporters.summary_rows(run))
    assert rows["Summary disagrees with the run"].startswith("The summary says 10 of 10 passed")
    assert rows["Summary written by"].startswith("a model (")
    assert exporters.run_export_data(run)["run"]["summary_disagreements"] == run.summary_disagreements


@pytest.mark.django_db
def test_a_rewrite_that_agrees_replaces_the_summary(make_dataset, alice, fake_llm, client_alice):
    fake_llm.add_rule(task="judge", json={"score": 3, "reasoning": "Missed the 30 days."})
    fake_llm.add_rule(
        task="summary", contains="disagrees with the run", reply="Both cases failed on the refund window."
    )
    fake_llm.add_rule(task="summary", reply=WRONG)
    dataset = make_dataset(2, kind=Agent.Kind.LLM)

    run = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))

    assert run.summary == "Both cases failed on the refund window."
    assert run.summary_disagreements == []
    page = client_alice.get(reverse("runs:detail", args=[dataset.agent.pk, run.pk])).content.decode()
    assert "every figure it states was checked against the run" in page

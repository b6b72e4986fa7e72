"""Comparing two runs case by case (runs.comparing.comparison)."""

import pytest

from agents.models import AgentVersion
from runs.comparing.comparison import CHANGE_FIX, CHANGE_REGRESSION, run_compare
from runs.models import Run
from tests.factories import DatasetFactory
from tests.runs.review_helpers import CaseSpec, build_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def dataset(agent):
    return DatasetFactory(agent=agent)


def _cases(*outcomes, **extra):
    return [
        CaseSpec(question=f"Question {n}", repeats=[outcome], source_case_id=None, **extra)
        for n, outcome in enumerate(outcomes)
    ]


def test_regressions_and_fixes_come_first_with_score_deltas(agent, dataset):
    v2 = AgentVersion.objects.create(agent=agent, number=2)
    a = build_run(
        agent=agent, dataset=dataset, cases=_cases(("pass", 9.0), ("fail", 3.0), ("pass", 8.0), ("fail", 2.0))
    )
    b = build_run(
        agent=agent,
        dataset=dataset,
        version=v2,
        cases=_cases(("pass", 9.0), ("pass", 8.0), ("fail", 4.0), ("fail", 5.0)),
    )

    comparison = run_compare(a=a, b=b)

    assert [row.change for row in comparison.rows[:2]] == [CHANGE_REGRESSION, CHANGE_FIX]
    assert [row.question for row in comparison.regressions] == ["Question 2"]
    assert [row.question for row in comparison.fixes] == ["Question 1"]
    assert comparison.regressions[0].delta == -4.0
    assert comparison.fixes[0].delta == 5.0
    assert [row.question for row in comparison.rows[2:]] == ["Question 3", "Question 0"]  # worse/better before same
    assert comparison.rows[2].delta == 3.0
    assert comparison.comparable
    assert "same agent version" not in " ".join(comparison.notes)


def test_totals_delta(agent, dataset):
    a = build_run(agent=agent, dataset=dataset, cases=_cases(("pass", 9.0), ("fail", 3.0), ("error", None)))
    b = build_run(agent=agent, dataset=dataset, cases=_cases(("pass", 9.0), ("pass", 7.0), ("fail", 1.0)))
    deltas = {delta.label: delta for delta in run_compare(a=a, b=b).deltas}
    assert (deltas["Passed"].a, deltas["Passed"].b, deltas["Passed"].delta, deltas["Passed"].tone) == (
        "1",
        "2",
        "+1",
        "good",
    )
    assert (deltas["Errors"].delta, deltas["Errors"].tone) == ("-1", "good")
    assert (
        deltas["Pass rate"].a == "33%" and deltas["Pass rate"].b == "67%" and deltas["Pass rate"].delta == "+33.3 pts"
    )
    assert deltas["Average score"].a == "6.0" and deltas["Average score"].b == "5.7"
    assert deltas["Average score"].tone == "bad"


def test_cases_match_on_their_snapshot_not_their_position(agent, dataset):
    a = build_run(
        agent=agent,
        dataset=dataset,
        cases=[
            CaseSpec(question="First", case_id="C-1", repeats=[("pass", 9.0)]),
            CaseSpec(question="Second", case_id="C-2", repeats=[("fail", 2.0)]),
        ],
    )
    b = build_run(
        agent=agent,
        dataset=dataset,
        cases=[
            CaseSpec(question="Second", case_id="C-2", repeats=[("pass", 9.0)]),
            CaseSpec(question="First", case_id="C-1", repeats=[("pass", 9.0)]),
        ],
    )
    comparison = run_compare(a=a, b=b)
    assert [row.question for row in comparison.fixes] == ["Second"]
    assert comparison.fixes[0].a.position == 1 and comparison.fixes[0].b.position == 0
    assert not comparison.regressions


def test_a_changed_snapshot_is_not_directly_comparable(agent, dataset):
    a = build_run(agent=agent, dataset=dataset, cases=[CaseSpec(case_id="C-1", expected="30 days.")])
    b = build_run(agent=agent, dataset=dataset, cases=[CaseSpec(case_id="C-1", expected="14 days.")])
    comparison = run_compare(a=a, b=b)
    assert not comparison.comparable
    assert any("Dataset snapshot: 1 of the 1 shared case changed" in text for text in comparison.differences)
    assert comparison.rows[0].changed_fields == ["expected answer"]


def test_changed_documents_count_as_a_changed_snapshot(agent, dataset):
    a = build_run(agent=agent, dataset=dataset, cases=[CaseSpec(data={"documents": [{"id": 1, "name": "a.pdf"}]})])
    b = build_run(agent=agent, dataset=dataset, cases=[CaseSpec(data={"documents": [{"id": 2, "name": "b.pdf"}]})])
    assert run_compare(a=a, b=b).rows[0].changed_fields == ["documents"]


def test_a_different_judge_model_or_prompt_is_not_directly_comparable(agent, dataset):
    a = build_run(agent=agent, dataset=dataset, scorer=Run.Scorer.LLM, judge_model="openai/gpt-4o", cases=[CaseSpec()])
    b = build_run(
        agent=agent,
        dataset=dataset,
        scorer=Run.Scorer.LLM,
        judge_model="openai/gpt-4o-mini",
        scoring={"judge_prompt": "Be lenient.", "pass_threshold": 6},
        cases=[CaseSpec()],
    )
    differences = run_compare(a=a, b=b).differences
    assert f"Judge: LLM judge openai/gpt-4o in run #{a.pk}, LLM judge openai/gpt-4o-mini in run #{b.pk}." in differences
    assert "Judge prompt: changed between the runs." in differences
    assert f"Pass threshold: 7/10 in run #{a.pk}, 6/10 in run #{b.pk}." in differences


def test_the_offline_scorer_against_a_judge_is_not_directly_comparable(agent, dataset):
    a = build_run(agent=agent, dataset=dataset, cases=[CaseSpec()])
    b = build_run(agent=agent, dataset=dataset, scorer=Run.Scorer.LLM, judge_model="openai/gpt-4o", cases=[CaseSpec()])
    assert any(text.startswith("Judge: the offline reference scorer") for text in run_compare(a=a, b=b).differences)


def test_different_case_lists_are_not_directly_comparable(agent, dataset):
    a = build_run(agent=agent, dataset=dataset, cases=_cases(("pass", 9.0), ("pass", 9.0)))
    b = build_run(agent=agent, dataset=dataset, cases=_cases(("pass", 9.0)))
    comparison = run_compare(a=a, b=b)
    assert f"Dataset snapshot: the case lists differ (1 only in run #{a.pk})." in comparison.differences
    assert comparison.rows[-1].change == "only_a"


def test_a_rerun_of_part_of_a_run_is_comparable_on_the_shared_cases(agent, dataset):
    a = build_run(agent=agent, dataset=dataset, cases=_cases(("pass", 9.0), ("fail", 2.0), ("fail", 1.0)))
    b = build_run(
        agent=agent,
        dataset=dataset,
        parent=a,
        cases=[
            CaseSpec(question="Question 1", repeats=[("pass", 8.0)]),
            CaseSpec(question="Question 2", repeats=[("fail", 3.0)]),
        ],
    )
    comparison = run_compare(a=a, b=b)
    assert comparison.comparable
    assert comparison.compared == 2
    assert [row.question for row in comparison.fixes] == ["Question 1"]
    assert "Totals below cover the 2 shared cases" in comparison.notes[0]
    # Wall-clock time is the whole run's, which covers other cases: the label says so.
    assert "Duration (whole run)" in [delta.label for delta in comparison.deltas]
    assert comparison.totals_a.scored == 2 and comparison.totals_a.passed == 0


def test_unfinished_cases_are_not_counted_as_changes(agent, dataset):
    a = build_run(agent=agent, dataset=dataset, cases=_cases(("pass", 9.0)))
    b = build_run(agent=agent, dataset=dataset, status=Run.Status.RUNNING, cases=_cases(("running", None)))
    comparison = run_compare(a=a, b=b)
    assert comparison.rows[0].change == "unscored"
    assert not comparison.regressions


def test_a_stopped_run_is_compared_over_the_cases_scored_in_both(agent, dataset):
    """Totals, deltas and lists all cover the same cases; the banner says a run was stopped."""
    a = build_run(
        agent=agent, dataset=dataset, cases=_cases(("pass", 9.0), ("pass", 9.0), ("fail", 2.0), ("pass", 8.0))
    )
    b = build_run(
        agent=agent,
        dataset=dataset,
        status=Run.Status.STOPPED,
        cases=_cases(("pass", 9.0), ("fail", 3.0), ("skipped", None), ("skipped", None)),
    )
    comparison = run_compare(a=a, b=b)
    assert comparison.compared == 2
    assert (comparison.totals_a.passed, comparison.totals_a.failed, comparison.totals_a.scored) == (2, 0, 2)
    assert (comparison.totals_b.passed, comparison.totals_b.failed, comparison.totals_b.scored) == (1, 1, 2)
    assert [row.question for row in comparison.regressions] == ["Question 1"]
    deltas = {delta.label: delta for delta in comparison.deltas}
    assert (deltas["Passed"].a, deltas["Passed"].b) == ("2", "1")
    assert (deltas["Pass rate"].a, deltas["Pass rate"].b) == ("100%", "50%")
    assert (deltas["Average score"].a, deltas["Average score"].b) == ("9.0", "6.0")
    # Cost over the same two cases (each result costs $0.0015 in build_run), not the whole of A.
    assert (deltas["Cost"].a, deltas["Cost"].b) == ("$0.0030", "$0.0030")
    assert comparison.stopped == [
        f"Run #{b.pk} was stopped: 2 of its 4 cases were not run. "
        "Totals, changes and the case list cover the 2 cases scored in both runs."
    ]


def test_the_compare_page_says_a_run_was_stopped(agent, dataset, client_alice):
    from django.urls import reverse

    a = build_run(agent=agent, dataset=dataset, cases=_cases(("pass", 9.0), ("pass", 9.0)))
    b = build_run(
        agent=agent, dataset=dataset, status=Run.Status.STOPPED, cases=_cases(("pass", 9.0), ("skipped", None))
    )
    html = client_alice.get(reverse("runs:compare", args=[agent.pk]), {"a": a.pk, "b": b.pk}).content.decode()
    assert f"Run #{b.pk} was stopped: 1 of its 2 cases were not run." in html
    assert "over the 1 case scored in both" in html


def test_the_paired_test_of_a_stopped_run_covers_the_shared_cases_only(agent, dataset):
    a = build_run(agent=agent, dataset=dataset, cases=_cases(*[("pass", 9.0)] * 8))
    b = build_run(
        agent=agent,
        dataset=dataset,
        status=Run.Status.STOPPED,
        cases=_cases(("fail", 3.0), ("fail", 3.0), ("pass", 9.0), *[("skipped", None)] * 5),
    )
    test = run_compare(a=a, b=b).test
    assert test is not None
    assert (test.cases, test.fixes, test.breaks) == (3, 0, 2)  # not 8 cases, not 7 breaks
    assert test.p_value == 0.5  # 2 * C(2,0) / 2^2
    # Differences -6, -6, 0: a resample mean is -2k, k ~ Binomial(3, 2/3); P(k = 3) = 0.30 and
    # P(k = 0) = 0.037 are both over 2.5%, so the interval runs from -6 to 0.
    assert test.mean_difference == -4.0 and test.interval == (-6.0, 0.0)

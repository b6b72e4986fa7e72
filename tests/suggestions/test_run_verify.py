"""run_verify_start (a child run of the same snapshot on a new version) and the comparison the panel shows."""

import pytest
from django.core.exceptions import ValidationError

from runs.models import Result, Run
from runs.services import run_verify_start
from suggestions.selectors import verify_comparison_get
from suggestions.services import suggestion_apply
from tests.factories import AgentFactory
from tests.suggestions.conftest import REFUND, suggestion


@pytest.fixture
def version_two(alice, failing_run):
    item = suggestion(failing_run, 0)
    return suggestion_apply(run=failing_run, user=alice, suggestions=[item], fields={"knowledge": "Phone: 555 0100."})


def _finish(run, statuses, scores):
    """Play the engine: give the verify run's results these outcomes, then complete it."""
    for result, status, score in zip(
        Result.objects.filter(run=run).order_by("case__position"), statuses, scores, strict=True
    ):
        result.status, result.score = status, score
        result.save()
    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED)
    run.refresh_from_db()


@pytest.mark.django_db
def test_verify_copies_every_case_and_links_to_the_parent(alice, failing_run, version_two):
    child = run_verify_start(parent=failing_run, user=alice, version=version_two)

    assert child.parent == failing_run and child.purpose == Run.Purpose.VERIFY
    assert child.agent_version == version_two
    assert child.cases.count() == failing_run.cases.count() == child.total


@pytest.mark.django_db
def test_the_cheap_verify_with_no_sample_takes_only_the_failing_cases_and_compares_them(
    alice, failing_run, version_two
):
    child = run_verify_start(parent=failing_run, user=alice, version=version_two, sample_passing=0)

    assert list(child.cases.values_list("question", flat=True)) == ["Question 1?", "Question 3?"]
    _finish(child, ["pass", "fail"], [9, 3])
    comparison = verify_comparison_get(parent=failing_run, run=child)

    assert not comparison.full and comparison.total == 2 and comparison.failing_before == 2
    assert [(c.parent_position, c.position) for c in comparison.fixes] == [(1, 0)]
    assert comparison.regressions == []
    assert (comparison.passed_before, comparison.passed_after) == (0, 1)
    assert comparison.average_before == pytest.approx(1.5) and comparison.average_after == pytest.approx(6.0)
    assert comparison.score_delta == pytest.approx(4.5)


@pytest.mark.django_db
def test_a_regression_is_a_case_that_passed_before_and_fails_now(alice, failing_run, version_two):
    child = run_verify_start(parent=failing_run, user=alice, version=version_two)
    _finish(child, ["fail", "pass", "pass", "pass"], [2, 9, 9, 8])

    comparison = verify_comparison_get(parent=failing_run, run=child)

    assert [c.parent_position for c in comparison.fixes] == [1, 3]
    assert [c.parent_position for c in comparison.regressions] == [0]
    assert (comparison.passed_before, comparison.passed_after, comparison.pass_delta) == (2, 3, 1)


@pytest.mark.django_db
def test_identical_cases_pair_up_in_order(alice, make_run, agent):
    parent = make_run([("pass", REFUND, REFUND, 9), ("fail", REFUND, "No.", 1), ("fail", REFUND, "No.", 2)], average=4)
    parent.cases.update(question="Same?")  # three indistinguishable snapshots
    child = run_verify_start(parent=parent, user=alice, version=agent.current_version)

    _finish(child, ["pass", "pass", "fail"], [9, 9, 2])

    comparison = verify_comparison_get(parent=parent, run=child)
    assert [(c.parent_position, c.position) for c in comparison.fixes] == [(1, 1)]
    assert comparison.regressions == []


@pytest.mark.django_db
def test_cases_are_matched_by_their_source_case_first(alice, make_run, agent):
    from tests.factories import DatasetFactory, TestCaseFactory

    parent = make_run([("pass", REFUND, REFUND, 9), ("fail", REFUND, "No.", 1)], average=5)
    dataset = DatasetFactory(agent=agent)
    for case in parent.cases.all():  # same text, but two different dataset cases
        case.question, case.source_case = "Same?", TestCaseFactory(dataset=dataset)
        case.save()
    child = run_verify_start(parent=parent, user=alice, version=agent.current_version, sample_passing=0)

    _finish(child, ["pass"], [9])

    comparison = verify_comparison_get(parent=parent, run=child)
    assert [(c.parent_position, c.position) for c in comparison.fixes] == [(1, 0)]


@pytest.mark.django_db
def test_a_running_verify_compares_only_what_has_finished(alice, failing_run, version_two):
    child = run_verify_start(parent=failing_run, user=alice, version=version_two)
    first = Result.objects.filter(run=child).order_by("case__position").first()
    Result.objects.filter(pk=first.pk).update(status=Result.Status.PASS, score=9)

    comparison = verify_comparison_get(parent=failing_run, run=child)

    assert comparison.compared == 1 and comparison.fixes == [] and comparison.regressions == []


@pytest.mark.django_db
def test_nothing_to_verify_is_refused(alice, make_run, agent):
    clean = make_run([("pass", REFUND, REFUND, 9)], average=9)

    with pytest.raises(ValidationError, match="no cases to verify"):
        run_verify_start(parent=clean, user=alice, version=agent.current_version, sample_passing=0)


@pytest.mark.django_db
def test_a_version_of_another_agent_is_refused(alice, team, failing_run):
    other = AgentFactory(team=team)

    with pytest.raises(ValidationError, match="another agent"):
        run_verify_start(parent=failing_run, user=alice, version=other.current_version)


@pytest.mark.django_db
def test_a_negative_sample_is_refused(alice, failing_run, version_two):
    with pytest.raises(ValidationError, match="negative"):
        run_verify_start(parent=failing_run, user=alice, version=version_two, sample_passing=-1)


@pytest.mark.django_db
def test_the_verify_box_has_no_fix_or_regression_tiles_when_the_judges_differ(alice, failing_run, version_two):
    """Issue 34, item 6: the banner says no fix or regression can be claimed; the tiles did."""
    from django.template.loader import render_to_string

    from runs.models import JudgeConfig

    child = run_verify_start(parent=failing_run, user=alice, version=version_two)
    _finish(child, ["fail", "pass", "pass", "pass"], [2, 9, 9, 8])
    Run.objects.filter(pk=failing_run.pk).update(judge_config=child.judge_config)
    failing_run.refresh_from_db()
    same = render_to_string(
        "suggestions/partials/comparison.html",
        {"comparison": verify_comparison_get(parent=failing_run, run=child), "agent": failing_run.agent},
    )
    other = JudgeConfig.objects.create(dataset=failing_run.dataset, number=99, fingerprint="f" * 64, judge_model="x/y")
    Run.objects.filter(pk=child.pk).update(judge_config=other)
    child.refresh_from_db()
    comparison = verify_comparison_get(parent=failing_run, run=child)

    html = render_to_string("suggestions/partials/comparison.html", {"comparison": comparison, "agent": child.agent})

    assert comparison.judges and ">Fixes<" in same and ">Regressions<" in same
    assert ">Fixes<" not in html and ">Regressions<" not in html
    assert "Pass now (another judge)" in html and "Different judges" in html

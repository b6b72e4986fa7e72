"""Reviews change the reviewed figures, never the judge's; a case corrected from a card
changes the dataset, never the run's snapshot."""

import pytest
from django.core.exceptions import ValidationError

from datasets.models import TestCase
from reviews import services
from reviews.models import CaseEdit, Review
from reviews.selectors import run_review_figures
from runs.models import Result, Run, RunCase
from tests.reviews.conftest import results_of


def _judge_state(run: Run) -> list[tuple]:
    run.refresh_from_db()
    rows = list(Result.objects.filter(run=run).order_by("pk").values_list("status", "score", "verdict", "reasoning"))
    return [run.passed, run.failed, run.average_score, *rows]


def test_agreeing_and_overriding_change_the_reviewed_figures_but_never_the_judges(ten_run, alice, bob):
    before = _judge_state(ten_run)
    results = results_of(ten_run)
    assert run_review_figures(run=ten_run).reviewed == 0

    services.review_save(result=results[0], reviewer=alice, agrees=True)
    services.review_save(result=results[1], reviewer=alice, agrees=False, passed=False, score=4, note="Misses the fee")
    services.review_save(result=results[2], reviewer=alice, agrees=False, passed=False)
    services.review_save(result=results[7], reviewer=alice, agrees=False, passed=True, score=8)

    figures = run_review_figures(run=ten_run)
    # Judge 7/10; reviewed: two passes overturned, one fail passed: 6/10, 4 reviewed.
    assert (figures.judge_passed, figures.requests) == (7, 10)
    assert (figures.reviewed_passed, figures.reviewed, figures.overridden) == (6, 4, 3)
    assert _judge_state(ten_run) == before


def test_reviewing_again_replaces_your_review_and_others_add_theirs(ten_run, alice, bob):
    result = results_of(ten_run)[0]
    services.review_save(result=result, reviewer=alice, agrees=False, passed=False)
    services.review_save(result=result, reviewer=alice, agrees=True)
    services.review_save(result=result, reviewer=bob, agrees=False, passed=False, score=3)

    reviews = list(Review.objects.filter(result=result).order_by("reviewer__username"))
    assert [(r.reviewer.username, r.agrees, r.passed, r.score) for r in reviews] == [
        ("alice", True, True, None),
        ("bob", False, False, 3),
    ]
    figures = run_review_figures(run=ten_run)
    assert (figures.reviewers.results, figures.reviewers.pairs, figures.reviewers.agreed) == (1, 1, 0)
    # The latest review counts for the reviewed pass rate: bob's fail.
    assert figures.reviewed_passed == 6


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"agrees": False}, "passes or fails"),
        ({"agrees": False, "passed": True, "score": 11}, "between 0 and 10"),
        ({"agrees": False, "passed": True, "note": "x" * 2001}, "at most 2000"),
    ],
)
def test_bad_reviews_are_refused_with_a_message(ten_run, alice, fields, message):
    with pytest.raises(ValidationError, match=message):
        services.review_save(result=results_of(ten_run)[0], reviewer=alice, **fields)
    assert not Review.objects.exists()


def test_an_error_cannot_be_agreed_with_but_can_be_judged(ten_run, alice):
    result = results_of(ten_run)[0]
    Result.objects.filter(pk=result.pk).update(status=Result.Status.ERROR, score=None)
    result.refresh_from_db()
    with pytest.raises(ValidationError, match="no verdict"):
        services.review_save(result=result, reviewer=alice, agrees=True)
    review = services.review_save(result=result, reviewer=alice, agrees=False, passed=True)
    assert review.passed is True


def test_pending_results_cannot_be_reviewed(ten_run, alice):
    result = results_of(ten_run)[0]
    Result.objects.filter(pk=result.pk).update(status=Result.Status.PENDING)
    result.refresh_from_db()
    with pytest.raises(ValidationError, match="finished"):
        services.review_save(result=result, reviewer=alice, agrees=True)


def test_correcting_the_case_changes_the_dataset_and_leaves_the_run_snapshot(ten_run, alice):
    result = results_of(ten_run)[0]
    snapshot = RunCase.objects.filter(pk=result.case_id).values().get()
    source = TestCase.objects.get(pk=result.case.source_case_id)
    old_expected = source.expected_answer

    services.case_correct(
        result=result, user=alice, expected_answer="Refunds within 14 days.", judge_guideline="Accept 2 weeks."
    )

    source.refresh_from_db()
    assert (source.expected_answer, source.judge_guideline) == ("Refunds within 14 days.", "Accept 2 weeks.")
    assert RunCase.objects.filter(pk=result.case_id).values().get() == snapshot
    edits = list(CaseEdit.objects.filter(case=source).order_by("revision"))
    assert [(e.field, e.old_value, e.new_value, e.revision) for e in edits] == [
        ("expected_answer", old_expected, "Refunds within 14 days.", 1),
        ("judge_guideline", "", "Accept 2 weeks.", 2),
    ]
    assert all(e.edited_by == alice and e.result_id == result.pk for e in edits)


def test_correcting_with_the_same_text_or_a_deleted_case_is_refused(ten_run, alice):
    result = results_of(ten_run)[0]
    same = result.case.expected_answer
    with pytest.raises(ValidationError, match="Nothing changed"):
        services.case_correct(result=result, user=alice, expected_answer=same)
    TestCase.objects.filter(pk=result.case.source_case_id).delete()
    result = results_of(ten_run)[0]
    with pytest.raises(ValidationError, match="deleted"):
        services.case_correct(result=result, user=alice, expected_answer="New")
    assert not CaseEdit.objects.exists()

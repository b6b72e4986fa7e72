"""The review queue: each doubt reason before the confident results, then a fixed sample of those."""

import pytest

from reviews import queue, services
from runs.models import Result
from tests.runs.review_helpers import CaseSpec, build_run

LOW_TEXT = [
    {"name": "rouge_l", "label": "ROUGE-L", "score": 0.02, "passed": None, "detail": ""},
    {"name": "jaccard", "label": "Jaccard", "score": 0.03, "passed": None, "detail": ""},
]
FAILED_TRAJECTORY = [{"name": "trajectory", "label": "Tool trajectory", "score": None, "passed": False, "detail": ""}]


@pytest.fixture
def doubtful_run(agent):
    cases = [
        CaseSpec(question="judge error", repeats=[("error", None)]),  # 0
        CaseSpec(question="contradiction text", repeats=[("pass", 9.5)]),  # 1
        CaseSpec(question="contradiction tools", repeats=[("fail", 9.0)]),  # 2
        CaseSpec(question="repeats", repeats=[("pass", 9.0), ("fail", 3.0)]),  # 3
        CaseSpec(question="smoke", repeats=[("pass", 9.0)], variants=[("fail", 2.0)]),  # 4
        CaseSpec(question="near above", repeats=[("pass", 7.5)], tags=["billing"]),  # 5
        CaseSpec(question="near below", repeats=[("fail", 6.0)]),  # 6
        CaseSpec(question="agent error", repeats=[("error", None)]),  # 7: the agent never answered
    ]
    cases += [
        CaseSpec(question=f"confident {n}", repeats=[("pass", 10.0) if n % 2 else ("fail", 1.0)], tags=["billing"])
        for n in range(10)
    ]
    run = build_run(agent=agent, cases=cases)
    rows = Result.objects.filter(run=run)
    rows.filter(case__position=0).update(actual_answer="An answer", error="The judge's answer was not valid JSON.")
    rows.filter(case__position=1).update(scorers=LOW_TEXT)
    rows.filter(case__position=2).update(scorers=FAILED_TRAJECTORY)
    return run


def _positions(items):
    return [(item.result.case.position, item.result.repeat, item.result.variant, item.reason) for item in items]


def test_every_doubt_reason_comes_before_the_confident_sample(doubtful_run, alice):
    items = queue.review_queue(runs=[doubtful_run], reviewer=alice, seed=doubtful_run.pk)

    flagged = [item for item in items if item.reason != "sample"]
    # Within a reason, the score nearest the pass line (7) first.
    assert _positions(flagged) == [
        (0, 0, 0, "judge_error"),
        (2, 0, 0, "contradiction"),  # 9/10 beside a failed tool check
        (1, 0, 0, "contradiction"),  # 9.5/10 while the text scorers are near 0
        (3, 0, 0, "repeats_disagree"),
        (3, 1, 0, "repeats_disagree"),
        (4, 0, 1, "smoke_disagree"),
        (5, 0, 0, "near_threshold"),
        (6, 0, 0, "near_threshold"),
    ]
    reasons = [item.reason for item in items]
    order = list(queue.REASONS)
    assert reasons == sorted(reasons, key=order.index), "a reason came after a less doubtful one"
    assert {"judge_error", "contradiction", "repeats_disagree", "smoke_disagree", "near_threshold", "sample"} == set(
        reasons
    )
    samples = [item for item in items if item.reason == "sample"]
    assert len(samples) == queue.SAMPLE_MIN  # 10% of 11 confident results is 1: at least 3
    # Drawn from the results no reason flagged (the ten confident ones and the smoke case's original).
    assert all(item.reasons == ["sample"] and item.details[0].startswith("Confident") for item in samples)
    # The agent error has no answer to judge: not in the queue.
    assert 7 not in [item.result.case.position for item in items]


def test_reasons_are_ordered_by_doubt_and_explained(doubtful_run, alice):
    items = queue.review_queue(runs=[doubtful_run], reviewer=alice, seed=doubtful_run.pk)
    by_question = {
        item.result.case.question: item for item in items if item.result.variant == 0 and item.result.repeat == 0
    }

    assert by_question["judge error"].reasons == ["judge_error"]
    assert by_question["contradiction text"].details == ["Judge 9.5/10 while ROUGE-L and Jaccard are near 0"]
    assert by_question["contradiction tools"].reasons[0] == "contradiction"
    assert "Tool trajectory check failed" in by_question["contradiction tools"].details[0]
    assert by_question["repeats"].reasons[0] == "repeats_disagree"
    assert by_question["near above"].reasons == ["near_threshold"]
    assert by_question["near below"].details == ["6/10, pass at 7"]
    variant = next(item for item in items if item.result.variant == 1)
    assert variant.reasons[0] == "smoke_disagree"


def test_the_sample_is_fixed_and_survives_reviews(doubtful_run, alice):
    first = queue.review_queue(runs=[doubtful_run], reviewer=alice, seed=doubtful_run.pk)
    again = queue.review_queue(runs=[doubtful_run], reviewer=alice, seed=doubtful_run.pk)
    sample = [item.result.pk for item in first if item.reason == "sample"]
    assert sample == [item.result.pk for item in again if item.reason == "sample"]

    reviewed = Result.objects.get(pk=sample[0])
    services.review_save(result=reviewed, reviewer=alice, agrees=True)

    after = queue.review_queue(runs=[doubtful_run], reviewer=alice, seed=doubtful_run.pk)
    assert [item.result.pk for item in after if item.reason == "sample"] == sample[1:]


def test_your_reviews_take_results_out_but_a_teammates_do_not(doubtful_run, alice, bob):
    first = queue.review_queue(runs=[doubtful_run], reviewer=alice, seed=1)[0].result
    services.review_save(result=first, reviewer=bob, agrees=False, passed=True)
    assert queue.review_queue(runs=[doubtful_run], reviewer=alice, seed=1)[0].result == first
    services.review_save(result=first, reviewer=alice, agrees=False, passed=True)
    assert first not in [item.result for item in queue.review_queue(runs=[doubtful_run], reviewer=alice, seed=1)]


def test_the_queue_filters_by_reason_and_tag(doubtful_run, alice):
    near = queue.review_queue(runs=[doubtful_run], reviewer=alice, seed=1, reason="near_threshold")
    assert [item.result.case.question for item in near] == ["near above", "near below"]
    billing = queue.review_queue(runs=[doubtful_run], reviewer=alice, seed=1, tag="billing")
    assert billing and all("billing" in item.tags for item in billing)
    assert billing[0].result.case.question == "near above"


def test_unstable_verdicts_come_first_then_the_nearest_to_the_line(agent, alice):
    """Issue 34: a run judged with re-asks near the line (pass at 7)."""
    samples = {0: (7.0, [7, 7, 8], True), 1: (8.0, [], None), 2: (6.0, [6, 6, 8], False), 3: (6.0, [6, 8, 6], False)}
    cases = [
        CaseSpec(question=f"case {n}", repeats=[("pass" if score >= 7 else "fail", score)])
        for n, (score, _, _) in samples.items()
    ]
    cases += [CaseSpec(question=f"sure {n}", repeats=[("pass", 8.0)]) for n in range(4)]
    run = build_run(agent=agent, cases=cases)
    for position, (_, judged, stable) in samples.items():
        Result.objects.filter(run=run, case__position=position).update(judge_samples=judged, judge_stable=stable)

    items = queue.review_queue(runs=[run], reviewer=alice, seed=run.pk)

    flagged = [(item.result.case.position, item.reason) for item in items if item.reason != "sample"]
    assert flagged == [(2, "unstable"), (3, "unstable"), (0, "near_threshold")]
    assert items[0].details[0] == "Asked 3 times: 6, 6, 8 (pass at 7)"
    within = [item.result.score for item in items if "near_threshold" in item.reasons]
    assert 8.0 not in within  # an 8 is a pass a point lower too: not "within 1 point"
    assert all(item.reasons == ["sample"] for item in items[3:])

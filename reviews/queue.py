"""The review queue: unreviewed results, the ones where the judge is most likely wrong first.

Each result gets every reason that applies; its place comes from the most doubtful one
(REASONS is in that order), then from how close its score is to the pass line. A verdict the
judge itself did not hold when asked again near the line (its samples on both sides of it) is
the most doubtful of all; "near the line" means what runs.judging.stability means by it: a point up or
down would change the verdict (a 6 or a 7.5 at a line of 7, not an 8). A seeded
sample of the confident rest follows, so agreement is not measured on hard cases only:
the same run (or agent) always shows the same sample.

The judge reports no confidence (runs/judging/scoring.py asks for a score, a verdict and
reasoning), so there is no "low confidence" reason: judge errors stand for it.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field

from django.contrib.auth.models import User

from reviews.models import Review
from reviews.selectors import reviews_prefetch
from runs.judging import stability
from runs.judging.scoring import GATING_SCORERS
from runs.models import Result, Run

REASONS = {
    "unstable": "The judge changed its verdict when asked again",
    "judge_error": "The judge failed on an answer",
    "contradiction": "The judge contradicts the deterministic scorers",
    "repeats_disagree": "Repeats of the case disagree",
    "smoke_disagree": "A smoke variant disagrees with the original",
    "near_threshold": "Within 1 point of the pass line: a point either way changes the verdict",
    "sample": "Random sample of confident results",
}
HIGH, LOW = 9.0, 2.0  # a judge score this high (low) while the text scorers say the opposite
SIMILAR_NEAR_ZERO, SIMILAR_HIGH = 0.1, 0.8
SAMPLE_SHARE, SAMPLE_MIN = 0.1, 3
TEXT_SCORERS = ("rouge_l", "jaccard")


@dataclass
class QueueItem:
    result: Result
    run: Run
    reasons: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)

    @property
    def reason(self) -> str:
        return self.reasons[0]

    @property
    def reason_labels(self) -> list[str]:
        return [REASONS[name] for name in self.reasons]

    @property
    def tags(self) -> list[str]:
        return [str(tag) for tag in self.result.case.data.get("tags") or []]

    def sort_key(self, threshold: float) -> tuple[int, float, int, int, int]:
        distance = abs(self.result.score - threshold) if self.result.score is not None else 0.0
        case = self.result.case
        return (list(REASONS).index(self.reason), distance, self.run.pk, case.position, self.result.pk)


def _threshold(run: Run) -> float:
    return float(run.scoring.get("pass_threshold", 7) or 7)


def _scorer(result: Result, name: str) -> dict | None:
    return next((row for row in result.scorers or [] if row.get("name") == name), None)


def _contradiction(result: Result, threshold: float) -> str:
    if result.score is None:
        return ""
    similar = [row.get("score") for name in TEXT_SCORERS if (row := _scorer(result, name))]
    scores = [value for value in similar if value is not None]
    if len(scores) == len(TEXT_SCORERS):
        if result.score >= HIGH and max(scores) < SIMILAR_NEAR_ZERO:
            return f"Judge {result.score:g}/10 while ROUGE-L and Jaccard are near 0"
        if result.score <= LOW and min(scores) > SIMILAR_HIGH:
            return f"Judge {result.score:g}/10 while ROUGE-L and Jaccard are high"
    for name in GATING_SCORERS:
        row = _scorer(result, name)
        if row and row.get("passed") is False and result.score >= threshold:
            return f"{row.get('label') or name} check failed beside a score of {result.score:g}/10"
    return ""


def _flag(results: list[Result], run: Run) -> dict[int, QueueItem]:
    """Every reviewable result of one run, with the doubt reasons that apply (no sample yet)."""
    threshold = _threshold(run)
    items = {r.pk: QueueItem(r, run) for r in results if _reviewable(r)}
    by_case: dict[int, list[Result]] = defaultdict(list)
    for result in results:
        by_case[result.case_id].append(result)
    for item in items.values():
        result = item.result
        if result.status == Result.Status.ERROR:
            item.reasons.append("judge_error")
            item.details.append(result.error)
            continue
        if result.judge_stable is False:
            item.reasons.append("unstable")
            samples = ", ".join(f"{sample:g}" for sample in result.judge_samples)
            item.details.append(f"Asked {len(result.judge_samples)} times: {samples} (pass at {threshold:g})")
        if detail := _contradiction(result, threshold):
            item.reasons.append("contradiction")
            item.details.append(detail)
        siblings = by_case[result.case_id]
        if result.variant == 0 and len({r.status for r in siblings if r.variant == 0 and r.is_finished}) > 1:
            item.reasons.append("repeats_disagree")
        original = next((r for r in siblings if r.variant == 0 and r.repeat == 0), None)
        if result.variant and original is not None and original.is_finished and original.status != result.status:
            item.reasons.append("smoke_disagree")
            item.details.append(f"The original question: {original.get_status_display().lower()}")
        if result.score is not None and stability.near_threshold(result.score, threshold):
            item.reasons.append("near_threshold")
            item.details.append(f"{result.score:g}/10, pass at {threshold:g}")
    return items


def _reviewable(result: Result) -> bool:
    # A result the agent never answered (an agent error) has no verdict for a person to judge.
    if result.status == Result.Status.ERROR:
        return bool(result.actual_answer)
    return result.status in (Result.Status.PASS, Result.Status.FAIL)


def review_queue(*, runs: list[Run], reviewer: User, seed: int, reason: str = "", tag: str = "") -> list[QueueItem]:
    """The queue over these runs for this reviewer: the results they have not reviewed yet.
    Others' reviews do not take a result out: a second opinion is what the agreement
    between reviewers is made of. The sample is drawn before reviewed results are taken
    out, so reviewing does not reshuffle it."""
    by_run = {run.pk: run for run in runs}
    results_by_run: dict[int, list[Result]] = defaultdict(list)
    # The queue's items render their review control: the case's dataset row and the reviews come along.
    rows = (
        Result.objects.filter(run__in=runs)
        .select_related("case__source_case")
        .prefetch_related(reviews_prefetch())
        .order_by("run_id", "case__position")
    )
    for result in rows:
        results_by_run[result.run_id].append(result)
    flagged: list[QueueItem] = []
    confident: list[QueueItem] = []
    for run_id, results in results_by_run.items():
        for item in _flag(results, by_run[run_id]).values():
            (flagged if item.reasons else confident).append(item)
    flagged.sort(key=lambda item: item.sort_key(_threshold(item.run)))
    confident.sort(key=lambda item: item.result.pk)
    size = min(len(confident), max(SAMPLE_MIN, round(SAMPLE_SHARE * len(confident))))
    sample = random.Random(seed).sample(confident, size)
    for item in sample:
        item.reasons.append("sample")
        item.details.append("Confident " + ("pass" if item.result.status == Result.Status.PASS else "fail"))
    sample.sort(key=lambda item: (item.run.pk, item.result.case.position, item.result.pk))
    done = set(Review.objects.filter(result__run__in=runs, reviewer=reviewer).values_list("result_id", flat=True))
    queue = [item for item in flagged + sample if item.result.pk not in done]
    if reason:
        queue = [item for item in queue if reason in item.reasons]
    if tag:
        queue = [item for item in queue if tag in item.tags]
    return queue


def queue_tags(items: list[QueueItem]) -> list[str]:
    return sorted({tag for item in items for tag in item.tags}, key=str.lower)

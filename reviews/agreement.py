"""Agreement between the judge and the reviewers: pure functions over pairs.

A pair is one review of one judged result: the judge's verdict and score, the reviewer's
verdict and score (an "agree" review takes the judge's score; an override without a
score has none and is left out of the score difference). Results the judge could not
score (errors) have no judge verdict and make no pair.

Cohen's kappa: po = (pp + ff) / n, pe = (jp*rp + jf*rf) / n**2 (each side's marginal
pass and fail counts), kappa = (po - pe) / (1 - pe). When pe is 1 (judge and reviewers
each gave one verdict only, the same one) kappa is 0/0: undefined, reported as None,
and pages say why instead of showing a number.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations


@dataclass(frozen=True)
class Pair:
    judge_pass: bool
    judge_score: float | None
    reviewer_pass: bool
    reviewer_score: float | None


@dataclass(frozen=True)
class Confusion:
    """Judge verdict x reviewer verdict."""

    pass_pass: int = 0  # judge pass, reviewer pass
    pass_fail: int = 0  # judge pass, reviewer fail
    fail_pass: int = 0  # judge fail, reviewer pass
    fail_fail: int = 0  # judge fail, reviewer fail

    @property
    def total(self) -> int:
        return self.pass_pass + self.pass_fail + self.fail_pass + self.fail_fail

    @property
    def agreed(self) -> int:
        return self.pass_pass + self.fail_fail

    def as_dict(self) -> dict[str, int]:
        return {
            "judge_pass_reviewer_pass": self.pass_pass,
            "judge_pass_reviewer_fail": self.pass_fail,
            "judge_fail_reviewer_pass": self.fail_pass,
            "judge_fail_reviewer_fail": self.fail_fail,
        }


@dataclass(frozen=True)
class Agreement:
    reviewed: int
    agreed: int
    rate: float | None
    kappa: float | None
    confusion: Confusion
    mae: float | None  # mean absolute score difference, over the pairs with both scores
    scored_pairs: int

    def as_dict(self) -> dict[str, object]:
        return {
            "reviewed": self.reviewed,
            "agreed": self.agreed,
            "agreement_rate": None if self.rate is None else round(self.rate, 4),
            "kappa": None if self.kappa is None else round(self.kappa, 4),
            "confusion": self.confusion.as_dict(),
            "mean_absolute_score_difference": None if self.mae is None else round(self.mae, 3),
            "scored_pairs": self.scored_pairs,
        }


def confusion_matrix(pairs: list[Pair]) -> Confusion:
    cells = {(True, True): 0, (True, False): 0, (False, True): 0, (False, False): 0}
    for pair in pairs:
        cells[(pair.judge_pass, pair.reviewer_pass)] += 1
    return Confusion(cells[(True, True)], cells[(True, False)], cells[(False, True)], cells[(False, False)])


def cohen_kappa(confusion: Confusion) -> float | None:
    n = confusion.total
    if not n:
        return None
    observed = confusion.agreed / n
    judge_pass = confusion.pass_pass + confusion.pass_fail
    reviewer_pass = confusion.pass_pass + confusion.fail_pass
    expected = (judge_pass * reviewer_pass + (n - judge_pass) * (n - reviewer_pass)) / (n * n)
    if expected == 1:
        return None  # one verdict on both sides: chance agreement is total, kappa undefined
    return (observed - expected) / (1 - expected)


def mean_absolute_difference(pairs: list[Pair]) -> tuple[float | None, int]:
    diffs = [
        abs(pair.judge_score - pair.reviewer_score)
        for pair in pairs
        if pair.judge_score is not None and pair.reviewer_score is not None
    ]
    return (sum(diffs) / len(diffs) if diffs else None), len(diffs)


def agreement(pairs: list[Pair]) -> Agreement:
    confusion = confusion_matrix(pairs)
    mae, scored = mean_absolute_difference(pairs)
    n = confusion.total
    return Agreement(
        reviewed=n,
        agreed=confusion.agreed,
        rate=confusion.agreed / n if n else None,
        kappa=cohen_kappa(confusion),
        confusion=confusion,
        mae=mae,
        scored_pairs=scored,
    )


@dataclass(frozen=True)
class ReviewerAgreement:
    """Between reviewers: over the results two or more people reviewed, how many pairs of
    reviewers gave the same verdict."""

    results: int
    pairs: int
    agreed: int

    @property
    def rate(self) -> float | None:
        return self.agreed / self.pairs if self.pairs else None


def reviewer_agreement(verdicts_per_result: list[list[bool]]) -> ReviewerAgreement:
    results = pairs = agreed = 0
    for verdicts in verdicts_per_result:
        if len(verdicts) < 2:
            continue
        results += 1
        for a, b in combinations(verdicts, 2):
            pairs += 1
            agreed += a == b
    return ReviewerAgreement(results, pairs, agreed)

"""The paired tests behind every comparison of two runs (pure: no Django, no database).

Two runs of one dataset are paired by case, so the tests are paired too:

- **Exact McNemar** on pass/fail. Only the discordant cases carry information: `fixes`
  (failed in A, pass in B) and `breaks` (passed in A, fail in B). Under "no difference"
  each discordant case is a fair coin, so the two-sided p-value is the binomial
  probability of a split at least as uneven as the one seen:
  p = min(1, 2 * sum_{i <= min(fixes, breaks)} C(n, i) / 2^n), n = fixes + breaks.
- **Paired bootstrap** of the mean score difference (B - A): resample cases with
  replacement, and with repeats also each case's repeats, so the interval carries the
  noise of the repeats. The generator is seeded, so a page shows the same interval on
  every load.

`paired_test` turns both into figures and a sentence in plain words.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from math import comb

DEFAULT_ALPHA = 0.05
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 19  # fixed: the same runs always show the same interval


def mcnemar_exact(fixes: int, breaks: int) -> float:
    """Two-sided exact McNemar p-value on the discordant pairs (1.0 when there are none)."""
    n = fixes + breaks
    if n == 0:
        return 1.0
    tail = sum(comb(n, i) for i in range(min(fixes, breaks) + 1))
    return min(1.0, 2 * tail / 2**n)


def bootstrap_interval(
    pairs: list[tuple[list[float], list[float]]],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    level: float = 0.95,
) -> tuple[float, float] | None:
    """Percentile interval of the mean of (mean of B's scores - mean of A's scores) per case.

    Each pair holds one case's scores in A and in B (one per repeat). Cases are resampled
    with replacement, and within a case with several repeats the repeats too. None when
    no case has a score in both runs.
    """
    usable = [(a, b) for a, b in pairs if a and b]
    if not usable:
        return None
    rng = random.Random(seed)
    n = len(usable)
    means = []
    for _ in range(resamples):
        total = 0.0
        for _ in range(n):
            a, b = usable[rng.randrange(n)]
            total += _resampled_mean(b, rng) - _resampled_mean(a, rng)
        means.append(total / n)
    means.sort()
    tail = (1 - level) / 2
    low = means[int(tail * resamples)]
    high = means[min(resamples - 1, int((1 - tail) * resamples))]
    return round(low, 2), round(high, 2)


def _resampled_mean(scores: list[float], rng: random.Random) -> float:
    if len(scores) == 1:
        return scores[0]
    return sum(scores[rng.randrange(len(scores))] for _ in scores) / len(scores)


@dataclass(frozen=True)
class PairedTest:
    """Both tests over the cases scored in both runs, and what they say."""

    cases: int  # cases scored in both runs
    fixes: int
    breaks: int
    p_value: float
    mean_difference: float | None  # mean over cases of (B's mean score - A's)
    interval: tuple[float, float] | None
    alpha: float
    label_a: str
    label_b: str

    @property
    def significant(self) -> bool:
        return self.fixes + self.breaks > 0 and self.p_value < self.alpha

    @property
    def significantly_worse(self) -> bool:
        return self.significant and self.breaks > self.fixes

    @property
    def significantly_better(self) -> bool:
        return self.significant and self.fixes > self.breaks

    @property
    def sentence(self) -> str:
        """The verdict in plain words, first thing a reader sees."""
        if not self.cases:
            return "No case was scored in both runs: there is nothing to compare."
        with_cases = f"{self.cases} case{'s' if self.cases != 1 else ''}"
        if not self.fixes and not self.breaks:
            return f"{self.label_b} passes and fails the same cases as {self.label_a}: no difference over {with_cases}."
        moves = (
            f"{self.label_b} fixes {self.fixes} and breaks {self.breaks} "
            f"case{'s' if self.breaks != 1 else ''} of {self.cases}"
        )
        if self.significant:
            return f"{moves}; this is unlikely to be chance ({self.p_text})."
        return f"{moves}; not distinguishable from noise with {with_cases} ({self.p_text})."

    @property
    def p_text(self) -> str:
        # Two significant digits ("0.12", "0.021"), as a reader would quote it.
        return "p < 0.001" if self.p_value < 0.001 else f"p = {self.p_value:.2g}"

    @property
    def interval_sentence(self) -> str:
        if self.mean_difference is None or self.interval is None:
            return "No score in both runs: no interval for the score change."
        low, high = self.interval
        return (
            f"Mean score change {_signed(self.mean_difference)} "
            f"(95% interval {_signed(low)} to {_signed(high)}, paired bootstrap over the cases)."
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "cases": self.cases,
            "fixes": self.fixes,
            "breaks": self.breaks,
            "test": "exact McNemar, two-sided",
            "p_value": round(self.p_value, 6),
            "alpha": self.alpha,
            "significant": self.significant,
            "significantly_worse": self.significantly_worse,
            "significantly_better": self.significantly_better,
            "mean_score_difference": self.mean_difference,
            "interval_95": list(self.interval) if self.interval else None,
            "sentence": self.sentence,
            "interval_sentence": self.interval_sentence,
        }


def paired_test(
    outcomes: list[tuple[bool, bool, list[float], list[float]]],
    *,
    alpha: float = DEFAULT_ALPHA,
    label_a: str = "A",
    label_b: str = "B",
) -> PairedTest:
    """`outcomes`: one (passed in A, passed in B, A's scores, B's scores) per case scored in both."""
    fixes = sum(1 for passed_a, passed_b, _, _ in outcomes if passed_b and not passed_a)
    breaks = sum(1 for passed_a, passed_b, _, _ in outcomes if passed_a and not passed_b)
    scored = [(a, b) for _, _, a, b in outcomes if a and b]
    mean = None
    if scored:
        mean = round(sum(sum(b) / len(b) - sum(a) / len(a) for a, b in scored) / len(scored), 2)
    return PairedTest(
        cases=len(outcomes),
        fixes=fixes,
        breaks=breaks,
        p_value=mcnemar_exact(fixes, breaks),
        mean_difference=mean,
        interval=bootstrap_interval(scored),
        alpha=alpha,
        label_a=label_a,
        label_b=label_b,
    )


def _signed(value: float) -> str:
    if value == 0:
        return "0.0"
    return ("+" if value > 0 else "−") + f"{abs(value):.1f}"


def verdict_flips(verdicts: list[bool]) -> tuple[int, int]:
    """(flips, chances) of a sequence of pass/not-pass verdicts of one unchanged case:
    a flip is a verdict different from the one before it; every verdict after the first
    is a chance to flip."""
    flips = sum(1 for before, after in zip(verdicts, verdicts[1:], strict=False) if before != after)
    return flips, max(0, len(verdicts) - 1)

"""Server-side charts for a run: the score histogram (0-10) and the pass rate per tag.

This module only computes geometry; templates/runs/partials/charts.html draws the SVG,
so every label (tags come from datasets: untrusted) goes through template escaping.
Each chart also carries its rows for the table shown to screen readers and without SVG.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runs.selectors import CASE_ERROR, CASE_FAIL, CASE_PASS, CaseOutcome

MAX_TAGS = 12
UNTAGGED = "(no tag)"


@dataclass
class Bar:
    label: str
    value: float  # the count (histogram) or pass rate 0-1 (tags)
    x: float
    y: float
    width: float
    height: float
    tone: str  # "pass" | "fail" | "mixed": the colour
    caption: str  # shown at the end of the bar
    detail: str  # the table row and the bar's tooltip

    @property
    def cx(self) -> float:
        return round(self.x + self.width / 2, 1)

    @property
    def label_x(self) -> float:
        return self.x - 8


@dataclass
class Chart:
    title: str
    description: str
    width: int
    height: int
    bars: list[Bar] = field(default_factory=list)
    ticks: list[tuple[float, str]] = field(default_factory=list)  # (position, label) on the value axis
    headers: tuple[str, ...] = ()
    rows: list[tuple[str, ...]] = field(default_factory=list)
    total: int = 0  # how many values the chart counts
    track_width: float = 0  # horizontal bars: the full (100%) length
    baseline: float = 0  # vertical bars: the y of the zero line

    @property
    def empty(self) -> bool:
        return not self.bars


def score_histogram(scores: list[float], *, threshold: float) -> Chart:
    """How many results scored 0, 1, ... 10 (a score of 6.7 counts in 6); bins at or above
    the pass threshold are green."""
    counts = [0] * 11
    for score in scores:
        counts[min(10, max(0, int(score)))] += 1
    return score_histogram_of_bins(counts, threshold=threshold)


def score_histogram_of_bins(counts: list[int], *, threshold: float) -> Chart:
    """`score_histogram` from the count per bin 0-10 (runs.selectors.run_score_bins)."""
    total = sum(counts)
    width, height, top, bottom, left = 440, 190, 14, 26, 30
    plot_w, plot_h = width - left - 6, height - top - bottom
    peak = max(counts) or 1
    slot = plot_w / 11
    chart = Chart(
        title="Score distribution",
        description=(
            f"Histogram of {total} scores from 0 to 10. "
            + ", ".join(f"{count} scored {score}" for score, count in enumerate(counts) if count)
            + f". Scores of {threshold:g} and above pass."
        ),
        width=width,
        height=height,
        headers=("Score", "Results"),
        baseline=top + plot_h,
        total=total,
    )
    if not total:
        return chart
    for score, count in enumerate(counts):
        bar_h = plot_h * count / peak
        chart.bars.append(
            Bar(
                label=str(score),
                value=count,
                x=round(left + score * slot + slot * 0.14, 1),
                y=round(top + plot_h - bar_h, 1),
                width=round(slot * 0.72, 1),
                height=round(bar_h, 1),
                tone="pass" if score >= threshold else "fail",
                caption=str(count) if count else "",
                detail=f"Score {score}: {count} result{'s' if count != 1 else ''}",
            )
        )
        chart.rows.append((str(score), str(count)))
    chart.ticks = [(round(top + plot_h - plot_h * value / peak, 1), str(value)) for value in _ticks(peak)]
    return chart


def _ticks(peak: int) -> list[int]:
    step = max(1, -(-peak // 4))
    return list(range(0, peak + 1, step))


def tag_pass_rates(outcomes: list[CaseOutcome]) -> Chart:
    """Pass rate of the scored cases per tag, the most used tags first."""
    return tag_pass_rates_of_counts([(outcome.tags, outcome.status, 1) for outcome in outcomes])


def tag_pass_rates_of_counts(groups: list[tuple[list[str], str, int]]) -> Chart:
    """`tag_pass_rates` from (tags, case status, cases) groups (runs.selectors.tag_outcome_counts)."""
    totals: dict[str, list[int]] = {}
    for tags, status, cases in groups:
        if status not in (CASE_PASS, CASE_FAIL, CASE_ERROR):
            continue
        for tag in tags or [UNTAGGED]:
            passed_total = totals.setdefault(tag, [0, 0])
            passed_total[0] += cases if status == CASE_PASS else 0
            passed_total[1] += cases
    tagged = [tag for tag in totals if tag != UNTAGGED]
    chosen = sorted(tagged, key=lambda tag: (-totals[tag][1], tag.lower()))[:MAX_TAGS]
    if UNTAGGED in totals and tagged:
        chosen.append(UNTAGGED)
    row_h, label_w, width = 26, 150, 440
    chart = Chart(
        title="Pass rate by tag",
        description="Share of scored cases that passed, per tag. "
        + "; ".join(f"{tag}: {totals[tag][0]} of {totals[tag][1]}" for tag in chosen),
        width=width,
        height=max(1, len(chosen)) * row_h + 8,
        headers=("Tag", "Passed", "Cases", "Pass rate"),
        track_width=width - label_w - 52,
    )
    if not tagged:
        return chart  # one "(no tag)" bar says nothing the summary doesn't
    bar_space = chart.track_width
    for index, tag in enumerate(chosen):
        passed, total = totals[tag]
        rate = passed / total
        chart.bars.append(
            Bar(
                label=tag if len(tag) <= 22 else tag[:21] + "…",
                value=rate,
                x=label_w,
                y=index * row_h + 6,
                width=round(max(2.0, bar_space * rate), 1),
                height=row_h - 10,
                tone="pass" if rate >= 0.8 else "mixed" if rate >= 0.5 else "fail",
                caption=f"{rate:.0%}",
                detail=f"{tag}: {passed} of {total} passed ({rate:.0%})",
            )
        )
        chart.rows.append((tag, str(passed), str(total), f"{rate:.0%}"))
    return chart

"""Geometry of the monitoring page's charts, drawn as inline SVG by
templates/monitoring/partials/chart.html (no script: CSP is script-src 'self'). One line per judge
configuration for the pass rate (two judges are never pooled), bars for the volume, a line for
the p95 latency. Labels go through template escaping; each chart carries the rows of a table
for screen readers."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from monitoring.online.series import OnlineSeries
from monitoring.selectors import Traffic

WIDTH, HEIGHT, TOP, BOTTOM, LEFT, RIGHT = 600, 170, 12, 22, 64, 8
PLOT_W, PLOT_H = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
# Colours of the judge lines, in order (the legend shows the same).
TONES = ("#4f46e5", "#0891b2", "#d97706", "#db2777", "#16a34a", "#6b7280")


@dataclass
class Point:
    x: float
    y: float
    detail: str


@dataclass
class Line:
    label: str
    tone: str
    points: list[Point]

    @property
    def path(self) -> str:
        return " ".join(f"{point.x},{point.y}" for point in self.points)


@dataclass
class Bar:
    x: float
    y: float
    width: float
    height: float
    detail: str
    tone: str = ""  # "error": the part of a bar that ended in an error


@dataclass
class Chart:
    title: str
    description: str
    unit: str
    lines: list[Line] = field(default_factory=list)
    bars: list[Bar] = field(default_factory=list)
    ticks: list[tuple[float, str]] = field(default_factory=list)  # (y, label) on the left axis
    x_labels: list[tuple[float, str]] = field(default_factory=list)
    width: int = WIDTH
    height: int = HEIGHT
    baseline: float = TOP + PLOT_H
    left: int = LEFT

    @property
    def empty(self) -> bool:
        return not self.bars and not any(line.points for line in self.lines)


def _x(index: int, count: int) -> float:
    slot = PLOT_W / max(1, count)
    return round(LEFT + slot * index + slot / 2, 1)


def _y(value: float, top: float) -> float:
    return round(TOP + PLOT_H - PLOT_H * (value / top if top else 0), 1)


def _nice(value: float) -> int:
    """The axis top above `value`: 1, 2 or 5 times a power of ten (1840 ms -> 2000)."""
    step = 1
    while True:
        for factor in (1, 2, 5):
            if value <= factor * step:
                return factor * step
        step *= 10


def _ticks(top: int) -> list[int]:
    return sorted({0, top // 2, top}) if top % 2 == 0 else [0, top]


def _duration(ms: int) -> str:
    """A tick's duration, short enough for the axis: 850 ms, 1.3 s."""
    return f"{ms} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


def _stamp(start: datetime, bucket: str) -> str:
    return start.strftime("%H:%M") if bucket == "hour" else start.strftime("%b %d")


def _x_labels(starts: list[datetime], bucket: str) -> list[tuple[float, str]]:
    if not starts:
        return []
    every = max(1, len(starts) // 6)
    return [(_x(index, len(starts)), _stamp(start, bucket)) for index, start in enumerate(starts) if index % every == 0]


def pass_rate_chart(series: OnlineSeries) -> Chart:
    """One line per (evaluator, judge configuration): its pass rate in each bucket that scored any."""
    starts = series.bucket_starts
    chart = Chart(
        title="Pass rate per judge configuration",
        description="Share of counted online scores that passed, per bucket, one line per judge configuration.",
        unit="%",
        ticks=[(_y(value, 1), f"{value:.0%}") for value in (0, 0.5, 1)],
        x_labels=_x_labels(starts, series.bucket),
    )
    for index, score_line in enumerate(series.lines):
        points = [
            Point(
                _x(position, len(starts)),
                _y(bucket.pass_rate, 1),
                f"{_stamp(bucket.start, series.bucket)}: {bucket.passed} of {bucket.scored} passed",
            )
            for position, bucket in enumerate(score_line.buckets)
            if bucket.pass_rate is not None
        ]
        chart.lines.append(Line(score_line.label, TONES[index % len(TONES)], points))
    return chart


def mean_score_chart(series: OnlineSeries) -> Chart:
    """One line per (evaluator, judge configuration): its mean counted score (0-10) in each bucket."""
    starts = series.bucket_starts
    chart = Chart(
        title="Mean score per judge configuration",
        description="Mean of the counted online scores (0-10), per bucket, one line per judge configuration.",
        unit="/10",
        ticks=[(_y(value, 10), str(value)) for value in (0, 5, 10)],
        x_labels=_x_labels(starts, series.bucket),
    )
    for index, score_line in enumerate(series.lines):
        points = [
            Point(
                _x(position, len(starts)),
                _y(bucket.mean_score, 10),
                f"{_stamp(bucket.start, series.bucket)}: mean {bucket.mean_score:.1f}/10 of {bucket.scored}",
            )
            for position, bucket in enumerate(score_line.buckets)
            if bucket.scored and bucket.mean_score is not None
        ]
        chart.lines.append(Line(score_line.label, TONES[index % len(TONES)], points))
    return chart


def volume_chart(traffic: Traffic, bucket: str) -> Chart:
    starts = [item.start for item in traffic.buckets]
    top = _nice(max([item.count for item in traffic.buckets] + [1]))
    chart = Chart(
        title="Traces and errors",
        description="Traces received per bucket; the red part of a bar is the traces that ended in an error.",
        unit="traces",
        ticks=[(_y(value, top), str(value)) for value in _ticks(top)],
        x_labels=_x_labels(starts, bucket),
    )
    slot = PLOT_W / max(1, len(starts))
    width = round(max(1.0, slot * 0.7), 1)
    for index, item in enumerate(traffic.buckets):
        if not item.count:
            continue
        y = _y(item.count, top)
        errors = f", {item.errors} failed" if item.errors else ""
        detail = f"{_stamp(item.start, bucket)}: {item.count} traces{errors}"
        x = round(_x(index, len(starts)) - width / 2, 1)
        chart.bars.append(Bar(x, y, width, round(TOP + PLOT_H - y, 1), detail))
        if item.errors:
            error_y = _y(item.errors, top)
            chart.bars.append(Bar(x, error_y, width, round(TOP + PLOT_H - error_y, 1), detail, tone="error"))
    return chart


def latency_chart(traffic: Traffic, bucket: str) -> Chart:
    starts = [item.start for item in traffic.buckets]
    top = _nice(max([item.p95 or 0 for item in traffic.buckets] + [1]))
    chart = Chart(
        title="Latency p50 and p95",
        description="Median and 95th percentile of the traces' durations per bucket, in milliseconds.",
        unit="ms",
        ticks=[(_y(value, top), _duration(value)) for value in _ticks(top)],
        x_labels=_x_labels(starts, bucket),
    )
    for label, tone, attr in (("p50", TONES[1], "p50"), ("p95", TONES[2], "p95")):
        points = [
            Point(
                _x(index, len(starts)),
                _y(getattr(item, attr), top),
                f"{_stamp(item.start, bucket)}: {label} {getattr(item, attr)} ms",
            )
            for index, item in enumerate(traffic.buckets)
            if item.count
        ]
        chart.lines.append(Line(label, tone, points))
    return chart

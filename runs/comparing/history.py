"""History across versions (the agent's Evals area): per dataset, one series per judge
configuration, each with the pass rate and mean score of every agent version it scored, in the
order versions were first run, and the runs behind each point.

Two judges never meet in one point or one line (a figure is computed over one judge), and a run
that stopped before its last case (by hand or at its budget) is left out of the figures and
listed beside them: its cases are a part of the dataset, not the dataset.

One query for all datasets (the latest HISTORY_MAX_RUNS evaluation runs of the agent);
geometry only here, templates/runs/partials/history.html draws the SVG.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agents.models import Agent
from runs.models import Run

HISTORY_MAX_RUNS = 500
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 560, 200, 40, 16, 16, 34
SERIES_STYLES = 4  # distinct colours in the stylesheet (history-series-0..3), then they repeat


def judge_key(run: Run) -> str:
    """What makes two runs' scores comparable: the judge configuration they were scored with
    (runs.judging.configs: one row per fingerprint, so its id says it); a run from before judges were
    recorded, its judge model, scorer and scoring settings."""
    if run.judge_config_id is not None:
        return f"config:{run.judge_config_id}"
    return json.dumps([run.judge_model, run.scorer, run.scoring], sort_keys=True, default=str)


def judge_label(run: Run) -> str:
    if run.judge_config is not None:
        return run.judge_config.label
    if run.scorer == Run.Scorer.OFFLINE or not run.judge_model:
        return "offline reference scorer (before judges were numbered)"
    return f"{run.judge_model.rsplit('/', 1)[-1]} (before judges were numbered)"


@dataclass
class Point:
    version: int
    runs: list[Run] = field(default_factory=list)
    passed: int = 0
    scored: int = 0  # passed + failed: only they count in a pass rate
    score_sum: float = 0.0
    score_count: int = 0
    x: float = 0
    y_pass: float | None = None
    y_score: float | None = None

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.scored if self.scored else None

    @property
    def mean_score(self) -> float | None:
        return self.score_sum / self.score_count if self.score_count else None


@dataclass
class Series:
    """One judge configuration's points."""

    key: str
    label: str
    fingerprint: str
    style: int
    points: list[Point] = field(default_factory=list)

    @property
    def pass_path(self) -> str:
        return _path([(p.x, p.y_pass) for p in self.points])

    @property
    def score_path(self) -> str:
        return _path([(p.x, p.y_score) for p in self.points])


@dataclass
class DatasetHistory:
    dataset_id: int
    name: str
    versions: list[int] = field(default_factory=list)  # the x axis, in the order first run
    series: list[Series] = field(default_factory=list)
    left_out: list[Run] = field(default_factory=list)  # stopped runs: not in any figure
    width: int = WIDTH
    height: int = HEIGHT

    @property
    def ticks(self) -> list[tuple[float, str]]:
        return [(_y(share), f"{round(share * 100)}%") for share in (0, 0.5, 1)]

    @property
    def version_ticks(self) -> list[tuple[float, int]]:
        return [(_x(index, len(self.versions)), version) for index, version in enumerate(self.versions)]

    @property
    def top(self) -> int:
        return TOP

    @property
    def baseline(self) -> float:
        return _y(0)


def agent_history(*, agent: Agent) -> list[DatasetHistory]:
    runs = list(
        Run.objects.filter(agent=agent, purpose=Run.Purpose.RUN, dataset__isnull=False)
        .exclude(status__in=(*Run.ACTIVE_STATUSES, Run.Status.FAILED))
        .select_related("agent_version", "judge_config")
        .order_by("-created_at", "-id")[:HISTORY_MAX_RUNS]
    )
    histories: dict[int, DatasetHistory] = {}
    for run in reversed(runs):  # oldest first: versions in the order they were first run
        assert run.dataset_id is not None
        history = histories.setdefault(run.dataset_id, DatasetHistory(run.dataset_id, run.dataset_name))
        history.name = run.dataset_name  # the latest name
        if run.status == Run.Status.STOPPED:
            history.left_out.append(run)
        else:
            _add(history, run)
    for history in histories.values():
        _layout(history)
    return sorted(histories.values(), key=lambda h: h.name.lower())


def _add(history: DatasetHistory, run: Run) -> None:
    version = run.agent_version.number
    if version not in history.versions:
        history.versions.append(version)
    key = judge_key(run)
    series = next((s for s in history.series if s.key == key), None)
    if series is None:
        fingerprint = run.judge_config.short_fingerprint if run.judge_config else ""
        series = Series(key, judge_label(run), fingerprint, style=len(history.series) % SERIES_STYLES)
        history.series.append(series)
    point = next((p for p in series.points if p.version == version), None)
    if point is None:
        point = Point(version=version)
        series.points.append(point)
    point.runs.append(run)
    point.passed += run.passed
    point.scored += run.passed + run.failed
    if run.average_score is not None:
        scored = run.passed + run.failed
        point.score_sum += run.average_score * scored
        point.score_count += scored


def _layout(history: DatasetHistory) -> None:
    count = len(history.versions)
    for series in history.series:
        for point in series.points:
            point.x = _x(history.versions.index(point.version), count)
            point.y_pass = None if point.pass_rate is None else _y(point.pass_rate)
            point.y_score = None if point.mean_score is None else _y(point.mean_score / 10)


def _x(index: int, count: int) -> float:
    return round(LEFT + ((WIDTH - LEFT - RIGHT) * (index + 0.5) / max(1, count)), 1)


def _y(share: float) -> float:
    return round(TOP + (HEIGHT - TOP - BOTTOM) * (1 - share), 1)


def _path(points: list[tuple[float, float | None]]) -> str:
    drawn = [(x, y) for x, y in points if y is not None]
    return " ".join(f"{'M' if i == 0 else 'L'}{x},{y}" for i, (x, y) in enumerate(drawn))


def history_context(agent: Agent) -> dict[str, Any]:
    return {"agent": agent, "histories": agent_history(agent=agent)}

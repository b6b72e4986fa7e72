"""History across versions (the agent's Evals area): per dataset, the pass rate and mean
score of each agent version, in the order versions were first run, with the judge
configuration marked where it changed, and the runs behind each point.

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


def judge_key(run: Run) -> str:
    """What makes two runs' scores comparable: the judge configuration they were scored with
    (runs.judging: one row per fingerprint, so its id says it); a run from before judges were
    recorded, its judge model, scorer and scoring settings."""
    if run.judge_config_id is not None:
        return f"config:{run.judge_config_id}"
    return json.dumps([run.judge_model, run.scorer, run.scoring], sort_keys=True, default=str)


@dataclass
class Point:
    version: int
    runs: list[Run] = field(default_factory=list)
    passed: int = 0
    scored: int = 0
    score_sum: float = 0.0
    score_count: int = 0
    judge_changed: bool = False  # scored with another judge configuration than the point before
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
class DatasetHistory:
    dataset_id: int
    name: str
    points: list[Point] = field(default_factory=list)
    width: int = WIDTH
    height: int = HEIGHT

    @property
    def pass_path(self) -> str:
        return _path([(p.x, p.y_pass) for p in self.points])

    @property
    def score_path(self) -> str:
        return _path([(p.x, p.y_score) for p in self.points])

    @property
    def ticks(self) -> list[tuple[float, str]]:
        return [(_y(share), f"{round(share * 100)}%") for share in (0, 0.5, 1)]

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
        .select_related("agent_version")
        .order_by("-created_at", "-id")[:HISTORY_MAX_RUNS]
    )
    histories: dict[int, DatasetHistory] = {}
    for run in reversed(runs):  # oldest first: versions in the order they were first run
        assert run.dataset_id is not None
        history = histories.setdefault(run.dataset_id, DatasetHistory(run.dataset_id, run.dataset_name))
        history.name = run.dataset_name  # the latest name
        _add(history, run)
    for history in histories.values():
        _mark_judge_changes(history)
        _layout(history)
    return sorted(histories.values(), key=lambda h: h.name.lower())


def _add(history: DatasetHistory, run: Run) -> None:
    version = run.agent_version.number
    point = next((p for p in history.points if p.version == version), None)
    if point is None:
        point = Point(version=version)
        history.points.append(point)
    point.runs.append(run)
    point.passed += run.passed
    point.scored += run.passed + run.failed + run.errored
    if run.average_score is not None:
        scored = run.passed + run.failed
        point.score_sum += run.average_score * scored
        point.score_count += scored


def _mark_judge_changes(history: DatasetHistory) -> None:
    previous: set[str] = set()
    for point in history.points:
        keys = {judge_key(run) for run in point.runs}
        point.judge_changed = bool(previous) and (keys != previous or len(keys) > 1)
        previous = keys


def _layout(history: DatasetHistory) -> None:
    count = len(history.points)
    span = WIDTH - LEFT - RIGHT
    for index, point in enumerate(history.points):
        point.x = round(LEFT + (span * (index + 0.5) / count), 1)
        point.y_pass = None if point.pass_rate is None else _y(point.pass_rate)
        point.y_score = None if point.mean_score is None else _y(point.mean_score / 10)


def _y(share: float) -> float:
    return round(TOP + (HEIGHT - TOP - BOTTOM) * (1 - share), 1)


def _path(points: list[tuple[float, float | None]]) -> str:
    drawn = [(x, y) for x, y in points if y is not None]
    return " ".join(f"{'M' if i == 0 else 'L'}{x},{y}" for i, (x, y) in enumerate(drawn))


def history_context(agent: Agent) -> dict[str, Any]:
    return {"agent": agent, "histories": agent_history(agent=agent)}

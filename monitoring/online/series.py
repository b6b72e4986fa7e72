"""Online scores over time, per judge configuration (never pooled): what the monitoring page charts.

    online_score_series(*, agent, since, bucket="hour" | "day", evaluator=None) -> OnlineSeries

`OnlineSeries.lines` holds one `ScoreLine` per (evaluator, judge configuration) that scored
anything since `since` (a change of the evaluator's judge starts a new line; two judges are never
averaged together), ordered by evaluator name then configuration. Each line has `buckets`: every
hour or day from `since` to now, oldest first, empty ones included (scored 0, rates None), so a
chart's x axis is the same for every line; and its totals over the whole span. `scored` counts
only SCORED rows: an unusable judge answer, an abstention, a skip or an error is never a pass or
a fail. Those are counted beside, by status: per line (`not_counted`) and for the agent as a whole
(`OnlineSeries.not_counted`, which also holds the ones without a judge configuration, such as
scores skipped before a judge was chosen) and `pending` (claimed, not finished yet).

Time is when a score was finished (`scored_at`; for pending ones, when they were claimed), so
the series keeps its history after retention deletes the traces (the scores stay: see
monitoring/online/retention.py). Three queries whatever the span.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Literal

from django.db.models import Avg, Count, Q, Sum
from django.db.models.functions import TruncDay, TruncHour
from django.utils import timezone

from agents.models import Agent
from monitoring.models import OnlineEvaluator, OnlineScore
from runs.models import JudgeConfig

Bucketing = Literal["hour", "day"]
NOT_COUNTED = (
    OnlineScore.Status.UNUSABLE,
    OnlineScore.Status.ABSTAINED,
    OnlineScore.Status.SKIPPED,
    OnlineScore.Status.ERROR,
)
_STEPS = {"hour": timedelta(hours=1), "day": timedelta(days=1)}
_TRUNC = {"hour": TruncHour, "day": TruncDay}


@dataclass
class Bucket:
    start: datetime
    scored: int = 0
    passed: int = 0
    mean_score: float | None = None
    cost: Decimal = Decimal(0)

    @property
    def pass_rate(self) -> float | None:
        """0-1, None when nothing was scored in the bucket."""
        return self.passed / self.scored if self.scored else None


@dataclass
class ScoreLine:
    evaluator: OnlineEvaluator
    judge_config: JudgeConfig
    buckets: list[Bucket]
    scored: int = 0
    passed: int = 0
    mean_score: float | None = None
    cost: Decimal = Decimal(0)
    not_counted: dict[str, int] = field(default_factory=dict)  # status -> count, e.g. {"unusable": 2}

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.scored if self.scored else None

    @property
    def label(self) -> str:
        """ "Helpfulness · judge v3: gpt-4o-mini, custom criteria" """
        return f"{self.evaluator.name} · {self.judge_config.label}"


@dataclass
class OnlineSeries:
    since: datetime
    bucket: Bucketing
    lines: list[ScoreLine]
    not_counted: dict[str, int]  # for the agent as a whole, status -> count
    pending: int = 0

    @property
    def bucket_starts(self) -> list[datetime]:
        return [bucket.start for bucket in self.lines[0].buckets] if self.lines else _starts(self.since, self.bucket)


def online_score_series(
    *, agent: Agent, since: datetime, bucket: Bucketing = "hour", evaluator: OnlineEvaluator | None = None
) -> OnlineSeries:
    if bucket not in _STEPS:
        raise ValueError(f"bucket must be 'hour' or 'day', not {bucket!r}")
    scores = OnlineScore.objects.filter(evaluator__agent=agent)
    if evaluator is not None:
        scores = scores.filter(evaluator=evaluator)
    finished = scores.filter(scored_at__gte=since)
    rows = (
        finished.filter(status=OnlineScore.Status.SCORED, judge_config__isnull=False)
        .annotate(start=_TRUNC[bucket]("scored_at"))
        .values("evaluator_id", "judge_config_id", "start")
        .annotate(
            scored=Count("id"),
            passed=Count("id", filter=Q(passed=True)),
            mean=Avg("score"),
            cost=Sum("cost"),
        )
    )
    others = (
        finished.filter(status__in=NOT_COUNTED)
        .values("evaluator_id", "judge_config_id", "status")
        .annotate(count=Count("id"))
    )
    lines = _lines(list(rows), list(others), since, bucket)
    not_counted: dict[str, int] = {}
    for row in others:
        not_counted[row["status"]] = not_counted.get(row["status"], 0) + row["count"]
    pending = scores.filter(status=OnlineScore.Status.PENDING, created_at__gte=since).count()
    return OnlineSeries(since=since, bucket=bucket, lines=lines, not_counted=not_counted, pending=pending)


def _lines(
    rows: Sequence[Mapping[str, Any]], others: Sequence[Mapping[str, Any]], since: datetime, bucket: Bucketing
) -> list[ScoreLine]:
    keys = {(row["evaluator_id"], row["judge_config_id"]) for row in rows}
    keys |= {(row["evaluator_id"], row["judge_config_id"]) for row in others if row["judge_config_id"]}
    if not keys:
        return []
    evaluators = OnlineEvaluator.objects.in_bulk({key[0] for key in keys})
    configs = JudgeConfig.objects.in_bulk({key[1] for key in keys})
    starts = _starts(since, bucket)
    positions = {start: index for index, start in enumerate(starts)}
    lines = {key: ScoreLine(evaluators[key[0]], configs[key[1]], [Bucket(start) for start in starts]) for key in keys}
    for row in rows:
        line = lines[(row["evaluator_id"], row["judge_config_id"])]
        index = positions.get(row["start"])
        if index is not None:
            line.buckets[index] = Bucket(row["start"], row["scored"], row["passed"], row["mean"], row["cost"])
    for row in others:
        if row["judge_config_id"]:
            line = lines[(row["evaluator_id"], row["judge_config_id"])]
            line.not_counted[row["status"]] = line.not_counted.get(row["status"], 0) + row["count"]
    for line in lines.values():
        _total(line)
    return sorted(
        lines.values(), key=lambda line: (line.evaluator.name, line.judge_config.number, line.judge_config.pk)
    )


def _total(line: ScoreLine) -> None:
    filled = [bucket for bucket in line.buckets if bucket.scored]
    line.scored = sum(bucket.scored for bucket in filled)
    line.passed = sum(bucket.passed for bucket in filled)
    line.cost = sum((bucket.cost for bucket in filled), Decimal(0))
    if line.scored:
        line.mean_score = sum((bucket.mean_score or 0) * bucket.scored for bucket in filled) / line.scored


def _starts(since: datetime, bucket: Bucketing) -> list[datetime]:
    step = _STEPS[bucket]
    local = timezone.localtime(since)
    start = local.replace(minute=0, second=0, microsecond=0)
    if bucket == "day":
        start = start.replace(hour=0)
    now = timezone.now()
    starts = []
    while start <= now:
        starts.append(start)
        start = start + step
    return starts

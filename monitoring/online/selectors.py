"""Reads of online evaluators for their pages and the API: each one's judge configuration and its
preflight state, today's spend against the cap, its counts by status, latest scores and alerts."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Count, QuerySet

from agents.models import Agent
from monitoring.models import Alert, OnlineEvaluator, OnlineScore
from monitoring.online.filters import filters_text
from monitoring.online.scoring import evaluator_judge_config, spent_today
from runs.models import JudgeConfig
from runs.services.preflight import judge_preflight_state

RECENT = 20


@dataclass
class EvaluatorRow:
    evaluator: OnlineEvaluator
    judge: JudgeConfig
    preflight_state: str  # "offline", "running", "passed", "failed" or "unchecked"
    spent_today: Decimal
    counts: dict[str, int]
    open_alerts: int

    @property
    def rule_text(self) -> str:
        """ "10% of service support-bot, errors only" (and the conversation rule when it has one)."""
        return evaluator_rule_text(self.evaluator)

    @property
    def cap_reached(self) -> bool:
        cap = self.evaluator.daily_cost_cap
        return cap is not None and self.spent_today >= cap


def evaluator_rule_text(evaluator: OnlineEvaluator) -> str:
    text = f"{evaluator.sampling_rate * 100:g}% of {filters_text(evaluator.filters or {})}"
    if evaluator.scope == OnlineEvaluator.Scope.CONVERSATION:
        text += f", each whole conversation once idle for {evaluator.idle_minutes} min"
    return text


def evaluator_row(evaluator: OnlineEvaluator) -> EvaluatorRow:
    judge = evaluator_judge_config(evaluator)
    counts = dict(
        OnlineScore.objects.filter(evaluator=evaluator).values_list("status").annotate(n=Count("id")).order_by()
    )
    return EvaluatorRow(
        evaluator=evaluator,
        judge=judge,
        preflight_state=judge_preflight_state(config=judge),
        spent_today=spent_today(evaluator),
        counts=counts,
        open_alerts=evaluator.alerts.filter(resolved_at__isnull=True).count(),
    )


def evaluator_rows(*, agent: Agent) -> list[EvaluatorRow]:
    return [evaluator_row(evaluator) for evaluator in agent.online_evaluators.order_by("name")]


def online_score_list(
    *, agent: Agent, evaluator: OnlineEvaluator | None = None, status: str = ""
) -> QuerySet[OnlineScore]:
    """An agent's online scores, newest first, with evaluator, judge configuration and trace."""
    scores = OnlineScore.objects.filter(evaluator__agent=agent).select_related("evaluator", "judge_config", "trace")
    if evaluator is not None:
        scores = scores.filter(evaluator=evaluator)
    if status:
        scores = scores.filter(status=status)
    return scores.order_by("-created_at", "-id")


def alert_list(*, agent: Agent, open_only: bool = False) -> QuerySet[Alert]:
    alerts = Alert.objects.filter(evaluator__agent=agent).select_related("evaluator", "judge_config")
    if open_only:
        alerts = alerts.filter(resolved_at__isnull=True)
    return alerts.order_by("-triggered_at", "-id")


def evaluator_overview(evaluator: OnlineEvaluator) -> dict[str, Any]:
    return {
        "row": evaluator_row(evaluator),
        "recent_scores": list(online_score_list(agent=evaluator.agent, evaluator=evaluator)[:RECENT]),
        "alerts": list(alert_list(agent=evaluator.agent).filter(evaluator=evaluator)[:10]),
    }

"""Online evaluators in the JSON API: what the evaluator pages do (monitoring/evaluator_views.py),
through the same services and checks (monitoring/online/services.py), plus the scores each made
(with the judge configuration that made it) and the alerts.

Settings are sent as the model holds them: `sampling_rate` 0-1, `filters` and `scoring` objects
(monitoring/online/filters.py and services.SCORING_KEYS name their keys), `alert_below` 0-1.
Another team's agent is a 404; bad input a 422 naming the field.
"""

from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404
from ninja import Field, Router, Schema, Status
from ninja.pagination import paginate

from agents.models import Agent
from agents.selectors import agent_get_for_user
from evalsite.api_errors import DetailOut, ValidationErrorOut, service_invalid
from evalsite.http import ApiRequest
from evalsite.paging import BoundedLimitOffsetPagination
from evalsite.schemas import StrictSchema
from monitoring.models import OnlineEvaluator, OnlineScore
from monitoring.online import selectors, services

router = Router(tags=["monitoring"])

AGENT = "/agents/{agent_id}"
EVALUATOR = AGENT + "/evaluators/{evaluator_id}"
ScoreStatus = Literal["", "pending", "scored", "unusable", "abstained", "error", "skipped"]


class EvaluatorIn(StrictSchema):
    """Every field optional on PATCH (left out: unchanged); `name` needed on create."""

    name: str | None = Field(None, max_length=120)
    enabled: bool | None = None
    scope: Literal["trace", "conversation"] | None = None
    idle_minutes: int | None = Field(None, description="Conversation scope: scored once idle this long")
    filters: dict[str, Any] | None = Field(
        None,
        description="service, attributes [{key, op: equals | contains, value}], tags, feedback, "
        "latency_over_ms, errors_only",
    )
    sampling_rate: float | None = Field(None, description="0-1: the share of matching traces scored")
    daily_cost_cap: Decimal | None = Field(None, description="USD per day; null: no cap")
    scoring: dict[str, Any] | None = Field(
        None,
        description="The judge: acceptance_criteria, rejection_criteria, evaluation_criteria, judge_model, "
        "judge_prompt, pass_threshold, judge_resamples",
    )
    alert_window: int | None = None
    alert_below: float | None = Field(
        None, description="0-1: alert when the pass rate of the last alert_window is below"
    )
    alert_webhook: str | None = None
    alert_email: str | None = None


class EnableIn(StrictSchema):
    enabled: bool


class JudgeOut(Schema):
    id: int
    label: str
    fingerprint: str
    judge_model: str
    preflight_status: str = Field(description='"passed", "failed" or "" (not preflighted yet)')


class EvaluatorOut(Schema):
    id: int
    agent: int = Field(alias="agent_id")
    name: str
    enabled: bool
    scope: str
    idle_minutes: int
    filters: dict[str, Any]
    sampling_rate: float
    daily_cost_cap: Decimal | None
    scoring: dict[str, Any]
    alert_window: int
    alert_below: float | None
    alert_webhook: str
    alert_email: str
    created_at: datetime
    judge: JudgeOut = Field(description="The judge configuration its settings make now")
    preflight_state: str = Field(description='"passed", "failed", "running", "unchecked" or "offline" (no judge model)')
    spent_today: Decimal
    counts: dict[str, int] = Field(description="Its scores by status")


class ScoreOut(Schema):
    id: int
    evaluator: int = Field(alias="evaluator_id")
    trace: int | None = Field(alias="trace_id")
    otel_trace_id: str | None
    conversation: int | None = Field(alias="conversation_id")
    status: str
    score: float | None
    passed: bool | None
    verdict: str
    reasoning: str
    error: str = Field(description="Why it was not scored: unusable judge answer, cap reached, preflight...")
    judge_config: JudgeOut | None
    tokens: int
    cost: Decimal
    created_at: datetime
    scored_at: datetime | None

    @staticmethod
    def resolve_otel_trace_id(score: OnlineScore) -> str | None:
        return score.trace.otel_trace_id if score.trace else None


class AlertOut(Schema):
    id: int
    evaluator: int = Field(alias="evaluator_id")
    judge_config: JudgeOut
    pass_rate: float
    window: int
    threshold: float
    triggered_at: datetime
    resolved_at: datetime | None
    delivery: dict[str, str]


def _agent(request: ApiRequest, agent_id: int) -> Agent:
    return agent_get_for_user(user=request.user, agent_id=agent_id)


def _evaluator(request: ApiRequest, agent_id: int, evaluator_id: int) -> OnlineEvaluator:
    return get_object_or_404(OnlineEvaluator, pk=evaluator_id, agent=_agent(request, agent_id))


def _out(evaluator: OnlineEvaluator) -> dict[str, Any]:
    row = selectors.evaluator_row(evaluator)
    fields = {name: getattr(evaluator, name) for name in EvaluatorOut.model_fields if hasattr(evaluator, name)}
    return {
        **fields,
        "agent_id": evaluator.agent_id,
        "judge": row.judge,
        "preflight_state": row.preflight_state,
        "spent_today": row.spent_today,
        "counts": row.counts,
    }


@router.get(
    AGENT + "/evaluators",
    response=list[EvaluatorOut],
    url_name="monitoring_evaluators",
    summary="An agent's online evaluators",
)
def evaluator_list(request: ApiRequest, agent_id: int) -> list[dict[str, Any]]:
    return [_out(evaluator) for evaluator in _agent(request, agent_id).online_evaluators.order_by("name")]


@router.post(
    AGENT + "/evaluators",
    response={201: EvaluatorOut, 404: DetailOut, 422: ValidationErrorOut},
    url_name="monitoring_evaluator_create",
    summary="Create an online evaluator",
)
def evaluator_create(request: ApiRequest, agent_id: int, payload: EvaluatorIn) -> Status[Any]:
    agent = _agent(request, agent_id)
    try:
        evaluator = services.online_evaluator_create(
            agent=agent, user=request.user, settings=payload.model_dump(exclude_unset=True)
        )
    except ValidationError as error:
        raise service_invalid(error) from None
    return Status(201, _out(evaluator))


@router.get(
    EVALUATOR,
    response={200: EvaluatorOut, 404: DetailOut},
    url_name="monitoring_evaluator",
    summary="An online evaluator",
)
def evaluator_detail(request: ApiRequest, agent_id: int, evaluator_id: int) -> dict[str, Any]:
    return _out(_evaluator(request, agent_id, evaluator_id))


@router.patch(
    EVALUATOR,
    response={200: EvaluatorOut, 404: DetailOut, 422: ValidationErrorOut},
    url_name="monitoring_evaluator_update",
    summary="Change an online evaluator's settings",
)
def evaluator_update(request: ApiRequest, agent_id: int, evaluator_id: int, payload: EvaluatorIn) -> dict[str, Any]:
    evaluator = _evaluator(request, agent_id, evaluator_id)
    try:
        evaluator = services.online_evaluator_update(
            evaluator=evaluator, user=request.user, settings=payload.model_dump(exclude_unset=True)
        )
    except ValidationError as error:
        raise service_invalid(error) from None
    return _out(evaluator)


@router.post(
    EVALUATOR + "/enable",
    response={200: EvaluatorOut, 404: DetailOut, 422: ValidationErrorOut},
    url_name="monitoring_evaluator_enable",
    summary="Enable or disable an online evaluator",
)
def evaluator_enable(request: ApiRequest, agent_id: int, evaluator_id: int, payload: EnableIn) -> dict[str, Any]:
    evaluator = _evaluator(request, agent_id, evaluator_id)
    evaluator = services.online_evaluator_update(
        evaluator=evaluator, user=request.user, settings={"enabled": payload.enabled}
    )
    return _out(evaluator)


@router.delete(
    EVALUATOR,
    response={204: None, 404: DetailOut},
    url_name="monitoring_evaluator_delete",
    summary="Delete an online evaluator with its scores and alerts",
)
def evaluator_delete(request: ApiRequest, agent_id: int, evaluator_id: int) -> Status[None]:
    services.online_evaluator_delete(evaluator=_evaluator(request, agent_id, evaluator_id), user=request.user)
    return Status(204, None)


@router.get(
    EVALUATOR + "/scores",
    response=list[ScoreOut],
    url_name="monitoring_evaluator_scores",
    summary="An evaluator's scores, newest first",
)
@paginate(BoundedLimitOffsetPagination)
def evaluator_scores(request: ApiRequest, agent_id: int, evaluator_id: int, status: ScoreStatus = "") -> Any:
    evaluator = _evaluator(request, agent_id, evaluator_id)
    return selectors.online_score_list(agent=evaluator.agent, evaluator=evaluator, status=status)


@router.get(
    AGENT + "/online-scores",
    response=list[ScoreOut],
    url_name="monitoring_online_scores",
    summary="An agent's online scores, newest first",
)
@paginate(BoundedLimitOffsetPagination)
def agent_scores(request: ApiRequest, agent_id: int, status: ScoreStatus = "") -> Any:
    return selectors.online_score_list(agent=_agent(request, agent_id), status=status)


@router.get(
    AGENT + "/alerts", response=list[AlertOut], url_name="monitoring_alerts", summary="An agent's alerts, newest first"
)
@paginate(BoundedLimitOffsetPagination)
def alert_list(request: ApiRequest, agent_id: int, open: bool = False) -> Any:
    alerts: Any = selectors.alert_list(agent=_agent(request, agent_id), open_only=open)
    return alerts

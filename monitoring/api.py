"""Production traces, their online scores and feedback, the monitoring figures and learning cases in
the JSON API: what the monitoring pages show and do (issue 47).

Every object is reached through the token owner's teams and the agent in the path: another team's
trace or learning case is a 404, as on the pages. Traces are named by their console id (`id`, as in
the pages' URLs); each carries its OpenTelemetry `otel_trace_id` too.
"""

from datetime import date, datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404
from ninja import Field, Query, Router, Schema, Status
from ninja.pagination import paginate

from agents.selectors import agent_get_for_user
from datasets.models import Dataset
from evalsite.api_errors import refusal
from evalsite.http import ApiRequest
from evalsite.paging import BoundedLimitOffsetPagination
from evalsite.schemas import StrictSchema
from monitoring import learning, selectors
from monitoring.learning import REJECT_REASON_MAX
from monitoring.models import Alert, LearningCase, Trace
from monitoring.online.series import online_score_series
from runs.api_schemas import ErrorOut

router = Router(tags=["monitoring"])


class TraceFilterIn(Schema):
    service: str = Field("", description="Only this service.name")
    status: str = Field("", description="ok | error")
    negative_feedback: bool = Field(False, description="Only traces with a thumbs-down or a score below 5")
    failed: bool = Field(False, description="Only traces an online judge failed")
    score_below: float | None = Field(None, ge=0, le=10, description="Only traces with an online score below this")
    model: str = ""
    date_from: date | None = None
    date_to: date | None = None
    q: str = Field("", max_length=200, description="Text of the question or the answer, or a trace id")

    def filters(self) -> selectors.TraceFilters:
        return selectors.TraceFilters(**{**self.dict(), "q": self.q.strip()})


class TraceOut(Schema):
    id: int
    otel_trace_id: str
    service_name: str
    name: str
    started_at: datetime
    duration_ms: int
    status: str
    error: str
    model: str
    question: str
    answer: str
    input_tokens: int
    output_tokens: int
    cost: float
    negative_feedback: bool = Field(description="A thumbs-down or a 0-10 score below 5 from an end user")
    failed_score: bool = Field(description="An online judge failed the answer")
    lowest_score: float | None = Field(description="The lowest counted online score, 0-10")


class SpanOut(Schema):
    span_id: str
    parent_span_id: str
    name: str
    kind: str
    start_time_unix_nano: int
    end_time_unix_nano: int
    duration_ms: float
    status_code: str
    status_message: str
    attributes: dict[str, Any]
    events: list[Any]
    scope: str


class TraceScoreOut(Schema):
    evaluator: str
    judge_config: str | None = Field(description="The judge configuration that made the score (its label)")
    judge_fingerprint: str | None
    status: str = Field(description="scored | pending | unusable | abstained | error | skipped: only scored counts")
    score: float | None
    passed: bool | None
    verdict: str
    reasoning: str
    error: str
    scored_at: datetime | None

    @staticmethod
    def resolve_evaluator(score: Any) -> str:
        return score.evaluator.name

    @staticmethod
    def resolve_judge_config(score: Any) -> str | None:
        return score.judge_config.label if score.judge_config else None

    @staticmethod
    def resolve_judge_fingerprint(score: Any) -> str | None:
        return score.judge_config.fingerprint if score.judge_config else None


class TraceFeedbackOut(Schema):
    kind: str = Field(description="thumbs (value 1 up, 0 down) | score (0-10)")
    value: float
    negative: bool
    comment: str
    user_id: str
    created_at: datetime


class TraceDetailOut(TraceOut):
    messages: list[Any]
    tool_calls: list[Any]
    retrieval_documents: list[Any]
    attributes: dict[str, Any]
    masked: dict[str, int] = Field(description="What personal-data masking replaced, per kind: {'email': 2}")
    tags: list[Any]
    user_id: str
    session_id: str | None
    spans: list[SpanOut]
    scores: list[TraceScoreOut]
    conversation_scores: list[TraceScoreOut] = Field(description="Scores of the whole conversation (its session)")
    feedback: list[TraceFeedbackOut]


class LearningCaseOut(Schema):
    id: int
    trace_id: int | None = Field(description="The console id of the trace (null once retention deleted it)")
    otel_trace_id: str
    trace_time: datetime
    service_name: str
    reason: str = Field(description="low_score | thumbs_down | picked")
    doubt: float = Field(description="0-2.5, higher first in the queue")
    question: str
    conversation: list[Any]
    actual_answer: str
    expected_answer: str
    status: str = Field(description="candidate | approved | rejected")
    reject_reason: str
    dataset_id: int | None
    test_case_id: int | None
    created_at: datetime
    reviewed_at: datetime | None


class LearningCreateIn(StrictSchema):
    reason: LearningCase.Reason = LearningCase.Reason.PICKED


class LearningApproveIn(StrictSchema):
    dataset_id: int = Field(description="A dataset of the same agent")
    expected_answer: str = Field(min_length=1, description="The answer the agent should have given")


class LearningRejectIn(StrictSchema):
    reason: str = Field(min_length=1, max_length=REJECT_REASON_MAX)


def _trace_out(trace: Trace) -> dict[str, Any]:
    detail = {
        field: getattr(trace, field)
        for field in (*TraceOut.model_fields, "messages", "tool_calls", "retrieval_documents", "attributes")
        if field not in ("negative_feedback", "failed_score", "lowest_score")
    }
    scores = list(trace.scores.all())
    feedback = list(trace.feedback.all())
    counted = [s.score for s in scores if s.status == "scored" and s.score is not None]
    return {
        **detail,
        "masked": trace.masked,
        "tags": trace.tags,
        "user_id": trace.user_id,
        "session_id": trace.conversation.session_id if trace.conversation else None,
        "negative_feedback": any(item.negative for item in feedback),
        "failed_score": any(s.status == "scored" and s.passed is False for s in scores),
        "lowest_score": min(counted) if counted else None,
        "spans": list(trace.spans.all()),
        "scores": scores,
        "conversation_scores": list(trace.conversation.scores.all()) if trace.conversation else [],
        "feedback": feedback,
    }


@router.get(
    "/agents/{agent_id}/monitoring",
    summary="An agent's production figures: online scores per judge configuration, traffic, open alerts",
    url_name="monitoring_page",
)
def monitoring_summary(
    request: ApiRequest, agent_id: int, period: str = Query("24h", description="24h | 7d | 30d")
) -> dict[str, Any]:
    agent = agent_get_for_user(user=request.user, agent_id=agent_id)
    period = period if period in selectors.PERIODS else selectors.DEFAULT_PERIOD
    since, bucket = selectors.period_start(period)
    series = online_score_series(agent=agent, since=since, bucket=bucket)
    total = selectors.traffic_series(agent=agent, starts=series.bucket_starts, bucket=bucket).total
    alerts = Alert.objects.filter(evaluator__agent=agent, resolved_at__isnull=True).select_related("evaluator")
    return {
        "period": period,
        "since": since,
        "traces": total.count,
        "errors": total.errors,
        "error_rate": total.error_rate,
        "cost": float(total.cost),
        "latency_p50_ms": total.p50,
        "latency_p95_ms": total.p95,
        "judge_configurations": [
            {
                "evaluator": line.evaluator.name,
                "judge_config": line.judge_config.label,
                "judge_fingerprint": line.judge_config.fingerprint,
                "scored": line.scored,
                "passed": line.passed,
                "pass_rate": line.pass_rate,
                "mean_score": line.mean_score,
                "not_counted": line.not_counted,
                "buckets": [
                    {"start": b.start, "scored": b.scored, "passed": b.passed, "pass_rate": b.pass_rate}
                    for b in line.buckets
                    if b.scored
                ],
            }
            for line in series.lines
        ],
        "not_counted": series.not_counted,
        "alerts": [
            {"evaluator": a.evaluator.name, "pass_rate": a.pass_rate, "window": a.window, "threshold": a.threshold}
            for a in alerts
        ],
    }


@router.get(
    "/agents/{agent_id}/traces",
    response=list[TraceOut],
    summary="An agent's production traces, newest first, with filters and search",
    url_name="monitoring_traces",
)
@paginate(BoundedLimitOffsetPagination)
def trace_list(request: ApiRequest, agent_id: int, filters: Query[TraceFilterIn]) -> Any:
    agent = agent_get_for_user(user=request.user, agent_id=agent_id)
    return selectors.trace_list(agent=agent, filters=filters.filters())


@router.get(
    "/agents/{agent_id}/traces/{trace_id}",
    response=TraceDetailOut,
    summary="A trace with its spans, online scores (with their judge configuration) and end-user feedback",
    url_name="monitoring_trace",
)
def trace_detail(request: ApiRequest, agent_id: int, trace_id: int) -> dict[str, Any]:
    agent = agent_get_for_user(user=request.user, agent_id=agent_id)
    return _trace_out(selectors.trace_get(agent=agent, trace_pk=trace_id))


@router.get(
    "/agents/{agent_id}/learning-cases",
    response=list[LearningCaseOut],
    summary="An agent's learning cases; candidates most doubtful first",
    url_name="monitoring_learning",
)
@paginate(BoundedLimitOffsetPagination)
def learning_case_list(
    request: ApiRequest, agent_id: int, status: str = Query("candidate", description="candidate | approved | rejected")
) -> Any:
    agent = agent_get_for_user(user=request.user, agent_id=agent_id)
    status = status if status in LearningCase.Status.values else LearningCase.Status.CANDIDATE
    return learning.learning_case_list(agent=agent, status=status)


def _case(request: ApiRequest, agent_id: int, learning_case_id: int) -> LearningCase:
    agent = agent_get_for_user(user=request.user, agent_id=agent_id)
    return get_object_or_404(LearningCase.objects.select_related("agent"), pk=learning_case_id, agent=agent)


@router.get(
    "/agents/{agent_id}/learning-cases/{learning_case_id}",
    response=LearningCaseOut,
    summary="A learning case",
    url_name="monitoring_learning_case",
)
def learning_case_detail(request: ApiRequest, agent_id: int, learning_case_id: int) -> LearningCase:
    return _case(request, agent_id, learning_case_id)


@router.post(
    "/agents/{agent_id}/traces/{trace_id}/learning-case",
    response={200: LearningCaseOut, 201: LearningCaseOut, 400: ErrorOut},
    summary="Make a candidate learning case of a trace (200 with the trace's open candidate if it has one)",
    url_name="monitoring_learning_case_create",
)
def learning_case_create(request: ApiRequest, agent_id: int, trace_id: int, payload: LearningCreateIn) -> Status[Any]:
    agent = agent_get_for_user(user=request.user, agent_id=agent_id)
    trace = selectors.trace_get(agent=agent, trace_pk=trace_id)
    had = any(case.status == LearningCase.Status.CANDIDATE for case in trace.learning_cases.all())
    try:
        case = learning.learning_case_create(trace=trace, reason=payload.reason, user=request.user)
    except ValidationError as error:
        return refusal(400, error)
    return Status(200 if had else 201, case)


@router.post(
    "/agents/{agent_id}/learning-cases/{learning_case_id}/approve",
    response={200: LearningCaseOut, 400: ErrorOut, 404: ErrorOut},
    summary="Approve a candidate: it becomes a test case of the dataset, with provenance back to the trace",
    url_name="monitoring_learning_case_approve",
)
def learning_case_approve(
    request: ApiRequest, agent_id: int, learning_case_id: int, payload: LearningApproveIn
) -> Status[Any]:
    case = _case(request, agent_id, learning_case_id)
    dataset = Dataset.objects.filter(pk=payload.dataset_id, agent_id=case.agent_id).first()
    if dataset is None:
        return refusal(404, "No such dataset of this agent.")
    try:
        learning.learning_case_approve(
            case=case, dataset=dataset, expected_answer=payload.expected_answer, user=request.user
        )
    except ValidationError as error:
        return refusal(400, error)
    return Status(200, case)


@router.post(
    "/agents/{agent_id}/learning-cases/{learning_case_id}/reject",
    response={200: LearningCaseOut, 400: ErrorOut},
    summary="Reject a candidate, keeping the reason",
    url_name="monitoring_learning_case_reject",
)
def learning_case_reject(
    request: ApiRequest, agent_id: int, learning_case_id: int, payload: LearningRejectIn
) -> Status[Any]:
    case = _case(request, agent_id, learning_case_id)
    try:
        case = learning.learning_case_reject(case=case, reason=payload.reason, user=request.user)
    except ValidationError as error:
        return refusal(400, error)
    return Status(200, case)

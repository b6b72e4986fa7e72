"""JSON API for runs: start one, read its status, counters and results."""

from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404
from ninja import Header, Router, Schema, Status

from agents.selectors import agent_get_for_user
from datasets.models import Dataset
from evalsite.http import ApiRequest
from runs import selectors, services
from runs.models import Run

router = Router(tags=["runs"])


class RunStartIn(Schema):
    request_key: str = ""


class ErrorOut(Schema):
    detail: str


class RunOut(Schema):
    id: int
    agent_id: int
    dataset_id: int | None
    dataset_name: str
    agent_version: int
    status: str
    error: str
    scorer: str
    judge_model: str
    concurrency: int
    total: int
    completed: int
    passed: int
    failed: int
    errored: int
    average_score: float | None
    robustness: float | None
    consistency: float | None
    agent_tokens: int
    judge_tokens: int
    agent_cost: float
    judge_cost: float
    summary: str
    summary_note: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @staticmethod
    def resolve_agent_version(run: Run) -> int:
        return run.agent_version.number

    @staticmethod
    def resolve_average_score(run: Run) -> float | None:
        return run.current_average


class ResultOut(Schema):
    id: int
    case_position: int
    case_id: str
    repeat: int
    variant: int
    status: str
    question: str
    expected_answer: str
    actual_answer: str
    conversation: list[dict[str, Any]]
    tool_calls: list[dict[str, Any]]
    retrieval_context: list[str]
    trace_id: str
    score: float | None
    verdict: str
    reasoning: str
    error: str
    scorers: list[dict[str, Any]]
    duration_ms: int | None
    agent_tokens: int
    judge_tokens: int
    agent_cost: float
    judge_cost: float

    @staticmethod
    def resolve_case_position(result: Any) -> int:
        return result.case.position + 1

    @staticmethod
    def resolve_case_id(result: Any) -> str:
        return result.case.case_id

    @staticmethod
    def resolve_expected_answer(result: Any) -> str:
        return result.case.expected_answer


class RunDetailOut(RunOut):
    results: list[ResultOut]

    @staticmethod
    def resolve_results(run: Run) -> list[Any]:
        return list(selectors.result_list(run=run))


@router.post(
    "/agents/{agent_id}/eval/datasets/{dataset_id}/runs",
    response={201: RunOut, 400: ErrorOut, 422: ErrorOut},
    summary="Start an evaluation run",
)
def run_start(
    request: ApiRequest,
    agent_id: int,
    dataset_id: int,
    payload: RunStartIn | None = None,
    idempotency_key: str = Header("", alias="Idempotency-Key"),
) -> Status[Any]:
    """Snapshot the dataset and queue its cases.

    The same request_key (or Idempotency-Key header) returns the same run instead of a second one.
    """
    agent = agent_get_for_user(user=request.user, agent_id=agent_id)
    dataset = get_object_or_404(Dataset, pk=dataset_id, agent=agent)
    key = (payload.request_key if payload else "") or idempotency_key
    try:
        run = services.run_start(agent=agent, dataset=dataset, user=request.user, request_key=key)
    except ValidationError as error:
        # 422 when the agent cannot answer at all (e.g. an llm agent with no model).
        code = 422 if getattr(error, "code", None) == services.AGENT_NOT_RUNNABLE else 400
        return Status(code, {"detail": " ".join(error.messages)})
    return Status(201, selectors.run_get_for_user(user=request.user, run_id=run.pk))


@router.get("/runs/{run_id}", response=RunDetailOut, summary="A run's status, counters and results")
def run_detail(request: ApiRequest, run_id: int) -> Run:
    return selectors.run_get_for_user(user=request.user, run_id=run_id)

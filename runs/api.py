"""JSON API for runs: start, list, read (status, counters, a page of results), stop,
re-run failed cases, compare two runs, download exports.

Every run is reached through the token owner's teams: another team's run or agent is a
404, never a 403. Numbers are 1-based as the run page shows them: `case_position` is the
case's number, `repeat` counts from 1, `variant` 0 is the case as written and 1..n its
smoke-test paraphrases.
"""

from datetime import datetime
from typing import Any, Literal

from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from ninja import Field, Header, Query, Router, Schema, Status
from ninja.errors import ValidationError as NinjaValidationError
from ninja.pagination import LimitOffsetPagination, paginate

from agents.selectors import agent_get_for_user
from datasets.models import Dataset
from evalsite.http import ApiRequest
from evalsite.schemas import StrictSchema
from runs import comparison, exporters, selectors, services
from runs.forms import CompareForm
from runs.models import Run

router = Router(tags=["runs"])

RunStatus = Literal["pending", "running", "completed", "failed", "stopped"]
RESULTS_PER_PAGE = 100
RESULTS_MAX_PAGE = 500


class RunStartIn(StrictSchema):
    request_key: str = Field("", description="Same key, same run: a replay answers 200 with the first run")


class RerunIn(StrictSchema):
    request_key: str = ""
    version: int | None = Field(None, description="Agent version number; the run's own version when empty")


class ErrorOut(Schema):
    detail: str


class RunOut(Schema):
    id: int
    agent_id: int
    dataset_id: int | None
    dataset_name: str
    agent_version: int
    purpose: str = Field(description="run | rerun | verify")
    parent_id: int | None
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
    simulator_tokens: int = Field(description="The user simulator of scenario cases, apart from agent and judge")
    simulator_cost: float
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
    case_position: int = Field(description="The case's number in the run, from 1")
    case_id: str
    repeat: int = Field(description="From 1")
    variant: int = Field(description="0: the case as written; 1..n: its smoke-test paraphrases")
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
    simulator_tokens: int
    simulator_cost: float
    scenario: dict[str, Any] = Field(
        description="A scenario case's ending: ended_by (simulator | turn_limit), goal (reached | abandoned), "
        "reason, user_turns, max_turns, failing_turn; {} for scripted cases"
    )

    @staticmethod
    def resolve_case_position(result: Any) -> int:
        return result.case.position + 1

    @staticmethod
    def resolve_case_id(result: Any) -> str:
        return result.case.case_id

    @staticmethod
    def resolve_repeat(result: Any) -> int:
        return result.repeat + 1

    @staticmethod
    def resolve_expected_answer(result: Any) -> str:
        return result.case.expected_answer


class RunDetailOut(RunOut):
    results: list[ResultOut] = Field(description="One page of results, in case order")
    results_count: int
    results_next: str | None = Field(description="The next page of results, or null")

    # run_detail sets the page on the run (Run.results is the reverse relation, hence the names).
    @staticmethod
    def resolve_results(run: Run) -> list[Any]:
        return getattr(run, "page_results")  # noqa: B009 (not a Run attribute for mypy)

    @staticmethod
    def resolve_results_count(run: Run) -> int:
        return getattr(run, "page_count")  # noqa: B009 (not a Run attribute for mypy)

    @staticmethod
    def resolve_results_next(run: Run) -> str | None:
        return getattr(run, "page_next")  # noqa: B009 (not a Run attribute for mypy)


class RunStatusOut(Schema):
    """What a poller needs, from the run row alone."""

    id: int
    status: str
    finished: bool
    error: str
    total: int
    completed: int
    passed: int
    failed: int
    errored: int
    average_score: float | None

    @staticmethod
    def resolve_finished(run: Run) -> bool:
        return not run.is_active

    @staticmethod
    def resolve_average_score(run: Run) -> float | None:
        return run.current_average


class SideOut(Schema):
    number: int
    status: str
    score: float | None


class CaseRowOut(Schema):
    question: str
    case_id: str
    a: SideOut | None
    b: SideOut | None
    change: str = Field(description="regression | fix | better | worse | same | unscored | only_a | only_b")
    delta: float | None
    changed_fields: list[str]


class TotalsOut(Schema):
    passed: int
    failed: int
    errored: int
    scored: int
    pass_rate: float | None
    average: float | None
    cost: float
    duration: float | None


class ComparisonOut(Schema):
    a: RunOut
    b: RunOut
    comparable: bool = Field(description="False when something besides the agent changed (see differences)")
    differences: list[str]
    notes: list[str]
    compared: int = Field(description="Cases scored in both runs")
    totals_a: TotalsOut
    totals_b: TotalsOut
    regressions: list[CaseRowOut]
    fixes: list[CaseRowOut]
    rows: list[CaseRowOut]


# ---- helpers ---------------------------------------------------------------------------


def _run(request: ApiRequest, run_id: int) -> Run:
    return selectors.run_get_for_user(user=request.user, run_id=run_id)


def _fresh(request: ApiRequest, run: Run) -> Status[Any]:
    """The run as RunOut, 200 for a replayed request key, 201 for a new run."""
    return Status(200 if run.replayed else 201, _run(request, run.pk))


# (function, content type, extension) per export format.
EXPORTS: dict[str, tuple[Any, str]] = {
    "json": (exporters.run_export_json, "application/json"),
    # A byte-order mark, so spreadsheet programs read the file as UTF-8 (as the page's export).
    "csv": (lambda run: "\ufeff" + exporters.run_export_csv(run), "text/csv; charset=utf-8"),
    "xlsx": (exporters.run_export_xlsx, "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
    "html": (exporters.run_export_html, "text/html; charset=utf-8"),
}


# ---- start, list, read ---------------------------------------------------------------------


@router.post(
    "/agents/{agent_id}/eval/datasets/{dataset_id}/runs",
    response={200: RunOut, 201: RunOut, 400: ErrorOut, 422: ErrorOut},
    summary="Start an evaluation run",
)
def run_start(
    request: ApiRequest,
    agent_id: int,
    dataset_id: int,
    payload: RunStartIn | None = None,
    idempotency_key: str = Header("", alias="Idempotency-Key"),
) -> Status[Any]:
    """Snapshot the dataset and queue its cases (201).

    The same request_key (or Idempotency-Key header) answers 200 with the run it started
    the first time instead of starting a second one.
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
    return _fresh(request, run)


@router.get("/agents/{agent_id}/runs", response=list[RunOut], summary="List an agent's runs, newest first")
@paginate(LimitOffsetPagination)
def run_list(
    request: ApiRequest,
    agent_id: int,
    dataset: int | None = Query(None, description="Only runs of this dataset (id)"),
    status: RunStatus | None = None,
    version: int | None = Query(None, description="Only runs of this agent version (number)"),
) -> Any:
    agent = agent_get_for_user(user=request.user, agent_id=agent_id)
    runs = selectors.run_list(agent=agent).order_by("-created_at", "-id")
    if dataset is not None:
        runs = runs.filter(dataset_id=dataset)
    if status is not None:
        runs = runs.filter(status=status)
    if version is not None:
        runs = runs.filter(agent_version__number=version)
    return runs


@router.get(
    "/runs/{run_id}/compare/{baseline_id}",
    response={200: ComparisonOut, 400: ErrorOut},
    summary="Compare a run with a baseline run of the same dataset, case by case",
)
def run_compare(request: ApiRequest, run_id: int, baseline_id: int) -> Status[Any]:
    """The baseline is A (before), the run B (after), as on the compare page: totals and
    per-case changes over the cases scored in both; `differences` lists what besides
    the agent changed between them."""
    run, baseline = _run(request, run_id), _run(request, baseline_id)
    if run.agent_id != baseline.agent_id:
        return Status(400, {"detail": "Pick two runs of the same agent."})
    form = CompareForm({"a": baseline.pk, "b": run.pk}, agent=run.agent)
    if not form.is_valid():
        return Status(400, {"detail": " ".join(str(m) for messages in form.errors.values() for m in messages)})
    return Status(200, comparison.run_compare(a=form.cleaned_data["a"], b=form.cleaned_data["b"]))


@router.get("/runs/{run_id}", response=RunDetailOut, summary="A run's status, counters and a page of its results")
def run_detail(
    request: ApiRequest,
    run_id: int,
    limit: int = Query(RESULTS_PER_PAGE, ge=1, le=RESULTS_MAX_PAGE),
    offset: int = Query(0, ge=0),
) -> Run:
    """Pollers that need only the progress should use /runs/{run_id}/status."""
    run = _run(request, run_id)
    results = selectors.result_list(run=run)
    count = results.count()
    following = offset + limit
    next_url = None
    if following < count:
        path = reverse("api:run_results", kwargs={"run_id": run.pk})
        next_url = request.build_absolute_uri(f"{path}?offset={following}&limit={limit}")
    setattr(run, "page_results", list(results[offset:following]))  # noqa: B010
    setattr(run, "page_count", count)  # noqa: B010
    setattr(run, "page_next", next_url)  # noqa: B010
    return run


@router.get("/runs/{run_id}/status", response=RunStatusOut, summary="A run's progress (cheap: for polling)")
def run_status(request: ApiRequest, run_id: int) -> Run:
    return _run(request, run_id)


@router.get(
    "/runs/{run_id}/results", response=list[ResultOut], url_name="run_results", summary="A run's results, paged"
)
@paginate(LimitOffsetPagination)
def run_results(request: ApiRequest, run_id: int) -> Any:
    return selectors.result_list(run=_run(request, run_id))


# ---- stop, re-run ---------------------------------------------------------------------------


@router.post("/runs/{run_id}/stop", response={200: RunOut, 409: ErrorOut}, summary="Stop a run")
def run_stop(request: ApiRequest, run_id: int) -> Status[Any]:
    """No new case starts; cases in flight finish and are kept. 409 when it already ended."""
    run = _run(request, run_id)
    try:
        services.run_stop(run=run)
    except ValidationError as error:
        return Status(409, {"detail": " ".join(error.messages)})
    return Status(200, _run(request, run_id))


@router.post(
    "/runs/{run_id}/rerun",
    response={200: RunOut, 201: RunOut, 400: ErrorOut},
    summary="Re-run a finished run's failed and errored cases",
)
def run_rerun(
    request: ApiRequest,
    run_id: int,
    payload: RerunIn | None = None,
    idempotency_key: str = Header("", alias="Idempotency-Key"),
) -> Status[Any]:
    """A new run (201) of the cases that failed or errored, each keeping its case number.

    The same request_key (or Idempotency-Key header) answers 200 with the first re-run.
    """
    run = _run(request, run_id)
    payload = payload or RerunIn(request_key="", version=None)
    version = None
    if payload.version is not None:
        version = run.agent.versions.filter(number=payload.version).first()
        if version is None:
            message = f"This agent has no version {payload.version}."
            raise NinjaValidationError([{"type": "value_error", "loc": ["body", "payload", "version"], "msg": message}])
    key = payload.request_key or idempotency_key
    try:
        child = services.run_rerun(run=run, user=request.user, request_key=key, version=version)
    except ValidationError as error:
        return Status(400, {"detail": " ".join(error.messages)})
    return _fresh(request, child)


# ---- exports ---------------------------------------------------------------------------------


def _export_operation(fmt: str, make: Any, content_type: str) -> None:
    """GET /runs/{run_id}/export/<fmt>: the file the run page's Export menu downloads."""

    def run_export(request: ApiRequest, run_id: int) -> HttpResponse:
        run = _run(request, run_id)
        response = HttpResponse(make(run), content_type=content_type)
        response["Content-Disposition"] = f'attachment; filename="{exporters.export_filename(run, fmt)}"'
        return response

    router.add_api_operation(
        f"/runs/{{run_id}}/export/{fmt}",
        ["GET"],
        run_export,
        response={404: ErrorOut},
        operation_id=f"run_export_{fmt}",
        summary=f"Download a run as {fmt.upper()}",
        openapi_extra={
            "responses": {"200": {"description": "The file, as an attachment", "content": {content_type: {}}}}
        },
    )


for _fmt, (_make, _content_type) in EXPORTS.items():
    _export_operation(_fmt, _make, _content_type)

"""JSON API for runs: start, list, read (status, counters, a page of results), stop,
re-run failed cases, re-score a run's answers, compare two runs, download exports.

Every run is reached through the token owner's teams: another team's run or agent is a
404, never a 403. Numbers are 1-based as the run page shows them: `case_position` is the
case's number, `repeat` counts from 1, `variant` 0 is the case as written and 1..n its
smoke-test paraphrases.
"""

from typing import Annotated, Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from ninja import Header, Query, Router, Status
from ninja.pagination import paginate

from agents.models import Agent
from agents.selectors import agent_get_for_user
from datasets.models import Dataset
from evalsite.api_errors import field_invalid, form_refusal, refusal
from evalsite.http import ApiRequest
from evalsite.paging import BoundedLimitOffsetPagination, Number, Offset
from evalsite.schemas import Id
from runs import selectors, services
from runs.api_schemas import (
    ComparisonOut,
    ErrorOut,
    EstimateOut,
    JudgeConfigOut,
    PreflightRefusedOut,
    RerunIn,
    RescoreIn,
    ResultOut,
    RunDetailOut,
    RunOut,
    RunStartIn,
    RunStatus,
    RunStatusOut,
)
from runs.comparing import comparison
from runs.engine import estimate
from runs.export_views import EXPORTS, export_response
from runs.forms import CompareForm
from runs.judging import configs as judging
from runs.models import JudgeConfig, Run
from runs.services import preflight as judge_preflight

router = Router(tags=["runs"])

RESULTS_PER_PAGE = 100
RESULTS_MAX_PAGE = 500
# How long a client should wait before starting again while the judge's preflight runs.
PREFLIGHT_RETRY_SECONDS = 30


# ---- helpers ---------------------------------------------------------------------------


def _run(request: ApiRequest, run_id: int) -> Run:
    return selectors.run_get_for_user(user=request.user, run_id=run_id)


def _dataset(request: ApiRequest, agent_id: int, dataset_id: int) -> tuple[Agent, Dataset]:
    agent = agent_get_for_user(user=request.user, agent_id=agent_id)
    return agent, get_object_or_404(Dataset, pk=dataset_id, agent=agent)


def _fresh(request: ApiRequest, run: Run) -> Status[Any]:
    """The run as RunOut, 200 for a replayed request key, 201 for a new run."""
    return Status(200 if run.replayed else 201, _run(request, run.pk))


# ---- start, list, read ---------------------------------------------------------------------


@router.post(
    "/agents/{agent_id}/eval/datasets/{dataset_id}/runs",
    response={200: RunOut, 201: RunOut, 400: ErrorOut, 409: PreflightRefusedOut, 422: ErrorOut},
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

    A model judge is checked on a calibration set before its first run (its preflight).
    409 `judge_not_preflighted`: the preflight has started; start again after
    `retry_after` seconds. 409 `judge_failed_preflight`: the judge misjudged the calibration
    set (the items are in `preflight`); start with `allow_failed_preflight` to run it
    anyway, marked `judge_failed_preflight`.
    """
    agent, dataset = _dataset(request, agent_id, dataset_id)
    key = (payload.request_key if payload else "") or idempotency_key
    allow = payload.allow_failed_preflight if payload else False
    try:
        run = services.run_start(
            agent=agent,
            dataset=dataset,
            user=request.user,
            request_key=key,
            preflight=services.PREFLIGHT_REQUIRE,
            allow_failed_preflight=allow,
        )
    except ValidationError as error:
        if getattr(error, "code", None) in (services.JUDGE_NOT_PREFLIGHTED, services.JUDGE_FAILED_PREFLIGHT):
            return _preflight_refused(dataset, error)
        # 422 when the agent cannot answer at all (e.g. an llm agent with no model).
        code = 422 if getattr(error, "code", None) == services.AGENT_NOT_RUNNABLE else 400
        return refusal(code, error)
    return _fresh(request, run)


def _preflight_refused(dataset: Dataset, error: ValidationError) -> Status[Any]:
    config = judging.dataset_judge_config(dataset=dataset)
    waiting = error.code == services.JUDGE_NOT_PREFLIGHTED
    if waiting:
        judge_preflight.judge_preflight_start(config=config)
    body = {
        "detail": " ".join(error.messages),
        "code": error.code,
        "retry_after": PREFLIGHT_RETRY_SECONDS if waiting else None,
        "preflight": config.preflight,
    }
    return Status(409, body)


@router.get(
    "/agents/{agent_id}/eval/datasets/{dataset_id}/judges",
    response=list[JudgeConfigOut],
    summary="A dataset's judge configurations, newest first (each change of its scoring settings makes one)",
)
def judge_config_list(request: ApiRequest, agent_id: int, dataset_id: int) -> Any:
    agent, dataset = _dataset(request, agent_id, dataset_id)
    return JudgeConfig.objects.filter(dataset=dataset).order_by("-number")


@router.get(
    "/agents/{agent_id}/eval/datasets/{dataset_id}/estimate",
    response=EstimateOut,
    summary="What running a dataset now would probably cost and take, and what that is estimated from",
)
def run_estimate(request: ApiRequest, agent_id: int, dataset_id: int) -> Any:
    """The Run Evaluation dialog's estimate: per kind of call (agent, judge, re-asks near the line,
    user simulator, paraphrases) a range and its basis, from the earlier runs of this dataset and
    agent version and of the judge configuration the run would use, else from the prompts' size."""
    agent, dataset = _dataset(request, agent_id, dataset_id)
    return estimate.run_estimate(agent=agent, dataset=dataset, concurrency=settings.EVALSITE_RUN_CONCURRENCY)


@router.get("/agents/{agent_id}/runs", response=list[RunOut], summary="List an agent's runs, newest first")
@paginate(BoundedLimitOffsetPagination)
def run_list(
    request: ApiRequest,
    agent_id: int,
    dataset: Annotated[Id | None, Query(None, description="Only runs of this dataset (id)")] = None,
    status: RunStatus | None = None,
    version: Annotated[Number | None, Query(None, description="Only runs of this agent version (number)")] = None,
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
        return refusal(400, "Pick two runs of the same agent.")
    form = CompareForm({"a": baseline.pk, "b": run.pk}, agent=run.agent)
    if not form.is_valid():
        return form_refusal(400, form)
    return Status(200, comparison.run_compare(a=form.cleaned_data["a"], b=form.cleaned_data["b"]))


@router.get("/runs/{run_id}", response=RunDetailOut, summary="A run's status, counters and a page of its results")
def run_detail(
    request: ApiRequest,
    run_id: int,
    limit: int = Query(RESULTS_PER_PAGE, ge=1, le=RESULTS_MAX_PAGE),
    offset: Annotated[Offset, Query(0, description="Results to skip")] = 0,
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
@paginate(BoundedLimitOffsetPagination)
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
        return refusal(409, error)
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
            raise field_invalid("version", f"This agent has no version {payload.version}.")
    key = payload.request_key or idempotency_key
    try:
        child = services.run_rerun(run=run, user=request.user, request_key=key, version=version)
    except ValidationError as error:
        return refusal(400, error)
    return _fresh(request, child)


@router.post(
    "/runs/{run_id}/rescore",
    response={200: RunOut, 201: RunOut, 400: ErrorOut},
    summary="Judge a finished run's answers again, without asking the agent",
)
def run_rescore(
    request: ApiRequest,
    run_id: int,
    payload: RescoreIn | None = None,
    idempotency_key: str = Header("", alias="Idempotency-Key"),
) -> Status[Any]:
    """A new run (201, purpose "rescore", parent the run) whose results are the run's answers
    judged by the dataset's current judge configuration, or by the one numbered `judge_config`.

    Only the judge is called. The same request_key (or Idempotency-Key header) answers 200 with
    the first re-score.
    """
    run = _run(request, run_id)
    payload = payload or RescoreIn(request_key="", judge_config=None)
    config = None
    if payload.judge_config is not None:
        dataset_id = run.dataset_id
        config = (
            JudgeConfig.objects.filter(dataset_id=dataset_id, number=payload.judge_config).first()
            if dataset_id
            else None
        )
        if config is None:
            message = f"This run's dataset has no judge configuration v{payload.judge_config}."
            raise field_invalid("judge_config", message)
    key = payload.request_key or idempotency_key
    try:
        child = services.run_rescore(run=run, user=request.user, request_key=key, judge_config=config)
    except ValidationError as error:
        return refusal(400, error)
    return _fresh(request, child)


# ---- exports ---------------------------------------------------------------------------------


def _export_operation(fmt: str, content_type: str) -> None:
    """GET /runs/{run_id}/export/<fmt>: the file the run page's Export menu downloads (its links
    start with SITE_URL)."""

    def run_export(request: ApiRequest, run_id: int) -> HttpResponse:
        return export_response(_run(request, run_id), fmt, site=None)

    router.add_api_operation(
        f"/runs/{{run_id}}/export/{fmt}",
        ["GET"],
        run_export,
        response={404: ErrorOut},
        operation_id=f"run_export_{fmt}",
        url_name=f"runs_export_{fmt}",  # the page's runs:export_<fmt>
        summary=f"Download a run as {fmt.upper()}",
        openapi_extra={
            "responses": {"200": {"description": "The file, as an attachment", "content": {content_type: {}}}}
        },
    )


for _fmt, (_, _content_type) in EXPORTS.items():
    _export_operation(_fmt, _content_type)

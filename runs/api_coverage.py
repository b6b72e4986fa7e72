"""JSON API for rule coverage (the coverage page of a dataset and its actions: the model's map
of cases to rules, adopting a proposed map, generating cases for uncovered rules) and for the
judge's preflight (the Settings panel of the console's judge; a dataset judge's state, which the
start dialog polls). The same services and messages as runs/coverage_views.py,
runs/preflight_views.py and runs/views.py.

Agents and datasets are reached through the token owner's teams: another team's is a 404.
Versions are named by their number, as on the pages.
"""

from datetime import datetime
from typing import Annotated, Any

from django.core.exceptions import ValidationError
from django.http import Http404
from django.shortcuts import get_object_or_404
from ninja import Field, Query, Router, Schema, Status

from agents.models import Agent, AgentVersion
from datasets.coverage import latest_rule_map, rule_map_adopt, rule_map_start
from datasets.generation.services import dataset_generate_more
from datasets.models import Dataset, RuleMap
from evalsite.api_errors import refusal
from evalsite.http import ApiRequest
from evalsite.idempotency import idempotency_header, idempotent_create, loader
from evalsite.paging import Number
from evalsite.schemas import Id, StrictSchema
from runs.api import _dataset
from runs.api_schemas import ErrorOut, JudgeConfigOut
from runs.judging import configs as judging
from runs.models import Run
from runs.reports.coverage import CoverageView, coverage_summary, coverage_view
from runs.services import preflight

router = Router(tags=["coverage"])

COVERAGE = "/agents/{agent_id}/datasets/{dataset_id}/coverage"
IDEMPOTENCY = idempotency_header()


class CaseVerdictOut(Schema):
    case_id: int
    number: int
    verdict: str = Field(description='pass | fail | error | abstained | "" (not run)')


class RuleOut(Schema):
    id: str
    section: str
    text: str
    topic: str
    changed: bool = Field(description="Changed since the version before")
    covered: bool
    cases: list[CaseVerdictOut]


class RuleMapOut(Schema):
    id: int
    version: int
    status: str = Field(description="queued | running | done | failed")
    adopted: bool = Field(description="False: a finished map kept as a proposal beside the word map")
    error: str
    tied: dict[str, int]
    created_at: datetime
    finished_at: datetime | None


class CoverageOut(Schema):
    version: int
    previous: int | None
    run_id: int | None = Field(description="The run whose verdicts are shown; null: each case's latest")
    runs: list[int] = Field(description="Finished runs of this dataset by this version, newest first")
    rules: int
    covered: int
    changed: int
    uncovered_cases: int = Field(description="Cases tied to no rule")
    rows: list[RuleOut]
    rule_map: RuleMapOut | None
    generating: bool = Field(description="Cases are being generated into the dataset")


class VersionIn(StrictSchema):
    version: int | None = Field(None, description="Agent version number; the current version when empty")


class AdoptIn(VersionIn):
    map: int | None = Field(None, description="Id of the proposed map; the version's latest proposal when empty")


class CoverageGenerateIn(VersionIn):
    count: int = Field(description="Test cases to write for the uncovered rules")


class GenerateOut(Schema):
    dataset_id: int
    status: str = Field(description="The dataset's status: extracting while the model writes")
    rules: int = Field(description="Uncovered rules the cases are written for")
    message: str


class JudgePreflightOut(Schema):
    state: str = Field(description="offline | running | passed | failed | unchecked")
    judge: JudgeConfigOut
    preflight: dict[str, Any] = Field(description="Its preflight: status, reasons, items, cost ({} if none)")


def _version(agent: Agent, number: int | None) -> AgentVersion:
    """The version numbered `number`, else the current one; 404 when there is none."""
    if number is None:
        version = agent.current_version
    else:
        version = agent.versions.filter(number=number).first()
    if version is None:
        raise Http404("The agent has no such version")  # as the page
    version.agent = agent
    return version


def _dataset_version(
    request: ApiRequest, agent_id: int, dataset_id: int, number: int | None
) -> tuple[Dataset, AgentVersion]:
    """The dataset, and the version of its agent numbered `number` (else the current one)."""
    agent, dataset = _dataset(request, agent_id, dataset_id)
    return dataset, _version(agent, number)


def _rule_map(rule_map: RuleMap) -> dict[str, Any]:
    return {
        "id": rule_map.pk,
        "version": rule_map.version.number,
        "status": rule_map.status,
        "adopted": rule_map.adopted,
        "error": rule_map.error,
        "tied": rule_map.tied,
        "created_at": rule_map.created_at,
        "finished_at": rule_map.finished_at,
    }


def _coverage(dataset: Dataset, view: CoverageView) -> dict[str, Any]:
    rows = [
        {
            "id": row.rule.id,
            "section": row.rule.section,
            "text": row.rule.text,
            "topic": row.rule.topic,
            "changed": row.changed,
            "covered": row.covered,
            "cases": [{"case_id": c.case.pk, "number": c.number, "verdict": c.verdict} for c in row.cases],
        }
        for row in view.rows
    ]
    return {
        **coverage_summary(view),
        "version": view.version.number,
        "previous": view.previous.number if view.previous else None,
        "run_id": view.run.pk if view.run else None,
        "runs": [run.pk for run in view.runs],
        "rows": rows,
        "rule_map": _rule_map(view.rule_map) if view.rule_map else None,
        "generating": dataset.status == Dataset.Status.EXTRACTING,
    }


# ---- coverage -----------------------------------------------------------------------------------


@router.get(
    COVERAGE, response=CoverageOut, url_name="coverage_page", summary="Which rules of the agent a dataset tests"
)
def coverage_read(
    request: ApiRequest,
    agent_id: int,
    dataset_id: int,
    version: Annotated[
        Number | None, Query(None, description="Agent version number; the current version when empty")
    ] = None,
    run: Annotated[
        Id | None, Query(description="Show this run's verdicts (a run of the dataset by the version)")
    ] = None,
) -> dict[str, Any]:
    """The coverage page: per rule of the version, the cases that test it and their verdicts (of
    `run`, else each case's latest), rules changed since the version before, and the map in use."""
    dataset, chosen = _dataset_version(request, agent_id, dataset_id, version)
    shown = Run.objects.filter(pk=run, dataset=dataset, agent_version=chosen).first() if run else None
    return _coverage(dataset, coverage_view(dataset=dataset, version=chosen, run=shown))


@router.post(
    f"{COVERAGE}/map",
    response={200: RuleMapOut, 202: RuleMapOut, 400: ErrorOut},
    url_name="coverage_map",
    summary="Map the dataset's cases to the version's rules with the model (a worker job)",
)
def coverage_map(
    request: ApiRequest, agent_id: int, dataset_id: int, payload: VersionIn, idempotency_key: str = IDEMPOTENCY
) -> Status[Any]:
    """202 with the map (queued); a map already under way is answered instead of a second one,
    and so is the first map of a replayed Idempotency-Key (200). Poll the coverage's rule_map."""
    dataset, version = _dataset_version(request, agent_id, dataset_id, payload.version)
    try:
        rule_map, replayed = idempotent_create(
            user=request.user,
            operation=f"coverage_map:{agent_id}:{dataset_id}",
            key=idempotency_key,
            body=payload.model_dump(),
            load=loader(RuleMap),
            create=lambda: rule_map_start(dataset=dataset, version=version, user=request.user),
        )
    except ValidationError as error:
        return refusal(400, error)
    return Status(200 if replayed else 202, _rule_map(rule_map))


@router.post(
    f"{COVERAGE}/map/adopt",
    response={200: RuleMapOut, 400: ErrorOut, 404: ErrorOut, 409: ErrorOut},
    url_name="coverage_adopt",
    summary="Use the model's map that was kept as a proposal",
)
def coverage_adopt(request: ApiRequest, agent_id: int, dataset_id: int, payload: AdoptIn) -> Status[Any]:
    dataset, version = _dataset_version(request, agent_id, dataset_id, payload.version)
    if payload.map is not None:
        rule_map = get_object_or_404(RuleMap, pk=payload.map, dataset=dataset, version=version)
    else:
        proposal = latest_rule_map(dataset=dataset, version=version, done=True)
        if proposal is None or not proposal.is_proposal:
            return refusal(409, "There is no proposed map of this version to use.")
        rule_map = proposal
    try:
        rule_map_adopt(rule_map=rule_map)
    except ValidationError as error:
        return refusal(400, error)
    return Status(200, _rule_map(rule_map))


@router.post(
    f"{COVERAGE}/generate",
    response={200: GenerateOut, 202: GenerateOut, 400: ErrorOut},
    url_name="coverage_generate",
    summary="Generate test cases for the rules no case tests yet, appended to the dataset (a worker job)",
)
def coverage_generate(
    request: ApiRequest, agent_id: int, dataset_id: int, payload: CoverageGenerateIn, idempotency_key: str = IDEMPOTENCY
) -> Status[Any]:
    """202; the dataset is extracting until the cases are written. A replayed Idempotency-Key
    answers 200 without writing more."""
    dataset, version = _dataset_version(request, agent_id, dataset_id, payload.version)
    rules = coverage_view(dataset=dataset, version=version).uncovered
    try:
        dataset, replayed = idempotent_create(
            user=request.user,
            operation=f"coverage_generate:{agent_id}:{dataset_id}",
            key=idempotency_key,
            body=payload.model_dump(),
            load=loader(Dataset),
            create=lambda: dataset_generate_more(dataset=dataset, user=request.user, rules=rules, count=payload.count),
        )
    except ValidationError as error:
        return refusal(400, error)
    message = f"Writing {payload.count} test case(s) for {len(rules)} uncovered rule{'s' * (len(rules) != 1)}."
    body = {"dataset_id": dataset.pk, "status": dataset.status, "rules": len(rules), "message": message}
    return Status(200 if replayed else 202, body)


# ---- the judge's preflight ------------------------------------------------------------------------


def _preflight(config: Any) -> dict[str, Any]:
    return {"state": preflight.judge_preflight_state(config=config), "judge": config, "preflight": config.preflight}


@router.get(
    "/judge-preflight",
    response=JudgePreflightOut,
    url_name="judge_preflight_panel",
    summary="The console judge's preflight on the calibration set",
)
def judge_preflight_read(request: ApiRequest) -> dict[str, Any]:
    return _preflight(judging.console_judge_config())


@router.post(
    "/judge-preflight/start",
    response={202: JudgePreflightOut},
    url_name="judge_preflight_start",
    summary="Preflight the console's judge again (a worker job)",
)
def judge_preflight_restart(request: ApiRequest) -> Status[Any]:
    """Idempotent: while one is under way, no second one starts. Poll GET /judge-preflight."""
    config = judging.console_judge_config()
    if config.judge_model:
        preflight.judge_preflight_start(config=config, force=True)
    return Status(202, _preflight(config))


@router.get(
    "/agents/{agent_id}/eval/datasets/{dataset_id}/preflight",
    response=JudgePreflightOut,
    url_name="runs_start_preflight",
    summary="The preflight of the judge a run of this dataset would use",
)
def run_start_preflight(request: ApiRequest, agent_id: int, dataset_id: int) -> dict[str, Any]:
    """What the start dialog polls while the judge's preflight runs."""
    _agent, dataset = _dataset(request, agent_id, dataset_id)
    return _preflight(judging.dataset_judge_config(dataset=dataset))

"""JSON API for the runs pages beyond runs/api.py: the compare page's matrix of cases x runs,
the history across versions, and a dataset's pinned baseline.

Agents and runs are reached through the token owner's teams: another team's is a 404.
"""

from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.http import QueryDict
from ninja import Field, Query, Router, Schema, Status

from agents.selectors import agent_get_for_user
from evalsite.api_errors import form_refusal, refusal
from evalsite.http import ApiRequest
from evalsite.schemas import Id
from runs import selectors, services
from runs.api_schemas import ErrorOut
from runs.comparing import history
from runs.comparing.matrix import MAX_RUNS, run_matrix
from runs.forms import MatrixForm
from runs.models import DatasetBaseline

router = Router(tags=["runs"])

RUNS_PARAMETER = Query([], description="Run ids, 2 to 5 (repeat the parameter: runs=1&runs=2)")


class MatrixTestOut(Schema):
    cases: int = Field(description="Cases scored in both runs")
    fixes: int
    breaks: int
    p_value: float
    mean_difference: float | None
    significant: bool
    significantly_worse: bool


class MatrixColumnOut(Schema):
    run_id: int
    agent_version: int
    created_at: datetime
    status: str
    test: MatrixTestOut | None = Field(description="Against the first run (none for the first)")
    judges: str | None = Field(description="How its judge differs from the first run's, if it does")


class MatrixCellOut(Schema):
    run_id: int
    number: int = Field(description="The case's number in that run")
    status: str = Field(description="pass | fail | error | abstained | skipped ...")
    score: float | None


class MatrixRowOut(Schema):
    number: int
    question: str
    change: str = Field(description="regression | fix | moved | steady | partial (first run against the last)")
    cells: list[MatrixCellOut | None] = Field(description="One per column; null: the case is not in that run")


class MatrixOut(Schema):
    columns: list[MatrixColumnOut]
    rows: list[MatrixRowOut]
    counts: dict[str, int]
    judges_differ: bool


class HistoryPointOut(Schema):
    version: int
    runs: list[int]
    pass_rate: float | None
    mean_score: float | None


class HistorySeriesOut(Schema):
    label: str = Field(description="The judge configuration that scored its points")
    fingerprint: str
    points: list[HistoryPointOut]


class DatasetHistoryOut(Schema):
    dataset_id: int
    name: str
    versions: list[int] = Field(description="Agent versions in the order they were first run")
    series: list[HistorySeriesOut]
    left_out: list[int] = Field(description="Stopped runs, not in any figure")


class BaselineOut(Schema):
    dataset_id: int | None = Field(description="null: the run's dataset was deleted")
    run_id: int | None = Field(description="The pinned run; null when none is")
    pinned_by: str | None
    pinned_at: datetime | None


# ---- the compare page's matrix -----------------------------------------------------------------


@router.get(
    "/agents/{agent_id}/runs/matrix",
    response={200: MatrixOut, 400: ErrorOut},
    url_name="runs_compare",
    summary=f"Compare 2 to {MAX_RUNS} runs of one dataset: a matrix of cases x runs",
)
def run_compare_matrix(request: ApiRequest, agent_id: int, runs: list[Id] = RUNS_PARAMETER) -> Status[Any]:
    """The compare page's matrix: runs in the order they were made, each tested against the
    first; rows ordered regressions first, then fixes, cases that moved, the rest."""
    agent = agent_get_for_user(user=request.user, agent_id=agent_id)
    data = QueryDict(mutable=True)
    data.setlist("runs", [str(pk) for pk in runs])
    form = MatrixForm(data, agent=agent)
    if not form.is_valid():
        return form_refusal(400, form)
    matrix = run_matrix(runs=form.cleaned_data["runs"])
    columns = [
        {
            "run_id": column.run.pk,
            "agent_version": column.run.agent_version.number,
            "created_at": column.run.created_at,
            "status": column.run.status,
            "test": _test(column.test),
            "judges": column.judges,
        }
        for column in matrix.columns
    ]
    rows = [
        {
            "number": row.number,
            "question": row.question,
            "change": row.change,
            "cells": [
                {"run_id": c.run_pk, "number": c.number, "status": c.status, "score": c.score} if c else None
                for c in row.cells
            ],
        }
        for row in matrix.rows
    ]
    return Status(
        200, {"columns": columns, "rows": rows, "counts": matrix.counts, "judges_differ": matrix.judges_differ}
    )


def _test(test: Any) -> dict[str, Any] | None:
    if test is None:
        return None
    return {
        "cases": test.cases,
        "fixes": test.fixes,
        "breaks": test.breaks,
        "p_value": test.p_value,
        "mean_difference": test.mean_difference,
        "significant": test.significant,
        "significantly_worse": test.significantly_worse,
    }


# ---- history across versions ------------------------------------------------------------------


@router.get(
    "/agents/{agent_id}/runs/history",
    response=list[DatasetHistoryOut],
    url_name="runs_history",
    summary="Pass rate and mean score per agent version and dataset, one series per judge",
)
def run_history(request: ApiRequest, agent_id: int) -> list[dict[str, Any]]:
    agent = agent_get_for_user(user=request.user, agent_id=agent_id)
    return [
        {
            "dataset_id": item.dataset_id,
            "name": item.name,
            "versions": item.versions,
            "series": [
                {
                    "label": series.label,
                    "fingerprint": series.fingerprint,
                    "points": [
                        {
                            "version": p.version,
                            "runs": [run.pk for run in p.runs],
                            "pass_rate": p.pass_rate,
                            "mean_score": p.mean_score,
                        }
                        for p in series.points
                    ],  # fmt: skip
                }
                for series in item.series
            ],
            "left_out": [run.pk for run in item.left_out],
        }
        for item in history.agent_history(agent=agent)
    ]


# ---- the baseline -----------------------------------------------------------------------------


def _baseline(dataset_id: int | None) -> dict[str, Any]:
    baselines = DatasetBaseline.objects.filter(dataset_id=dataset_id) if dataset_id else DatasetBaseline.objects.none()
    pinned = baselines.select_related("pinned_by").first()
    return {
        "dataset_id": dataset_id,
        "run_id": pinned.run_id if pinned else None,
        "pinned_by": pinned.pinned_by.username if pinned and pinned.pinned_by else None,
        "pinned_at": pinned.pinned_at if pinned else None,
    }


@router.post(
    "/runs/{run_id}/baseline",
    response={200: BaselineOut, 400: ErrorOut},
    url_name="runs_baseline",
    summary="Pin a completed run as its dataset's baseline (replacing the one pinned before)",
)
def run_baseline_pin(request: ApiRequest, run_id: int) -> Status[Any]:
    """Idempotent: pinning the pinned run again changes nothing."""
    run = selectors.run_get_for_user(user=request.user, run_id=run_id)
    try:
        services.dataset_baseline_pin(run=run, user=request.user)
    except ValidationError as error:
        return refusal(400, error)
    return Status(200, _baseline(run.dataset_id))


@router.delete(
    "/runs/{run_id}/baseline",
    response=BaselineOut,
    url_name="runs_baseline_clear",
    summary="Unpin the run if it is its dataset's baseline (nothing happens otherwise)",
)
def run_baseline_unpin(request: ApiRequest, run_id: int) -> dict[str, Any]:
    run = selectors.run_get_for_user(user=request.user, run_id=run_id)
    services.dataset_baseline_unpin(run=run)
    return _baseline(run.dataset_id)

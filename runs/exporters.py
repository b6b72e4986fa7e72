"""A run as a file: JSON (everything, machine-readable), CSV and XLSX (for spreadsheets),
and a standalone HTML report (one file, inline CSS, no scripts).

JSON shape (`"format": "evalsite.run", "version": 1`):

    {
      "format": "evalsite.run", "version": 1, "exported_at": ISO-8601,
      "run": {id, url, agent: {id, name, kind}, agent_version, dataset: {id, name},
              purpose, parent_id, status, error, scorer, scorer_label, judge_model,
              scoring: {pass_threshold, number_of_requests, criteria, judge_prompt, ...},
              concurrency, total, completed, passed, failed, errored, skipped,
              pass_rate (0-1 over the cases as written, every repeat), average_score,
              robustness, consistency, agent_tokens, judge_tokens, agent_cost, judge_cost,
              summary, summary_note, created_by, created_at, started_at, finished_at,
              duration_seconds},
      "results": [{id, case: {position, number (both 1-based), case_id, question, expected_answer,
                   tags, documents, ...every other snapshot field},
                   repeat (from 1), variant (0: as written), status, question, actual_answer, conversation,
                   tool_calls, retrieval_context, trace_id, score, verdict, reasoning,
                   error, scorers: [{name, label, score, passed, detail}], duration_ms,
                   agent_tokens, judge_tokens, agent_cost, judge_cost, attempts,
                   queued_at, claimed_at, finished_at}, ...]
    }

Results are in case order (then repeat, then variant). Costs are USD as numbers.
Spreadsheet cells go through the datasets exporter's formula neutraliser (OWASP CSV
injection), so no cell written from run data starts with = + - @ TAB CR LF.
"""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.text import slugify

from datasets.exporters import neutralise
from runs import charts, selectors
from runs.models import Result, Run

FORMAT_NAME = "evalsite.run"
FORMAT_VERSION = 1
# Result fields the JSON leaves out: the foreign keys (nested or implied) and the
# dispatch token, an internal detail of the case queue.
RESULT_FIELDS_OMITTED = {"run", "case", "token"}
XLSX_CELL_LIMIT = 32_767
# Characters XML 1.0 forbids: openpyxl refuses them, so they are dropped from cells.
_ILLEGAL_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")

CSV_COLUMNS = (
    "run_id",
    "case_number",
    "case_id",
    "repeat",
    "variant",
    "status",
    "score",
    "verdict",
    "question",
    "expected_answer",
    "actual_answer",
    "error",
    "reasoning",
    "scorers",
    "tool_calls",
    "tags",
    "duration_ms",
    "agent_tokens",
    "judge_tokens",
    "agent_cost_usd",
    "judge_cost_usd",
    "trace_id",
    "finished_at",
)


def export_filename(run: Run, extension: str) -> str:
    name = slugify(run.dataset_name)[:60] or "run"
    return f"evalsite-run-{run.pk}-{name}.{extension}"


# ---- JSON -----------------------------------------------------------------------------


def run_export_data(run: Run) -> dict[str, Any]:
    results = list(selectors.result_list(run=run))
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "exported_at": _iso(timezone.now()),
        "run": _run_data(run, results),
        "results": [_result_data(result) for result in results],
    }


def run_export_json(run: Run) -> bytes:
    return json.dumps(run_export_data(run), ensure_ascii=False, indent=2, default=_json_default).encode()


def _run_data(run: Run, results: list[Result]) -> dict[str, Any]:
    main = [result for result in results if result.variant == 0]
    scored = [result for result in main if result.is_finished]
    return {
        "id": run.pk,
        "url": settings.SITE_URL.rstrip("/") + reverse("runs:detail", args=[run.agent_id, run.pk]),
        "agent": {"id": run.agent_id, "name": run.agent.name, "kind": run.agent.kind},
        "agent_version": run.agent_version.number,
        "dataset": {"id": run.dataset_id, "name": run.dataset_name},
        "purpose": run.purpose,
        "parent_id": run.parent_id,
        "status": run.status,
        "error": run.error,
        "scorer": run.scorer,
        "scorer_label": run.get_scorer_display(),
        "judge_model": run.judge_model,
        "scoring": run.scoring,
        "concurrency": run.concurrency,
        "total": run.total,
        "completed": run.completed,
        "passed": run.passed,
        "failed": run.failed,
        "errored": run.errored,
        "skipped": sum(1 for result in main if result.status == Result.Status.SKIPPED),
        "pass_rate": round(run.passed / len(main), 4) if main else None,
        "scored": len(scored),
        "average_score": run.current_average,
        "robustness": run.robustness,
        "consistency": run.consistency,
        "agent_tokens": run.agent_tokens,
        "judge_tokens": run.judge_tokens,
        "agent_cost": float(run.agent_cost),
        "judge_cost": float(run.judge_cost),
        "summary": run.summary,
        "summary_note": run.summary_note,
        "created_by": run.created_by.get_username() if run.created_by else None,
        "created_at": _iso(run.created_at),
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "duration_seconds": selectors.run_duration_seconds(run),
    }


def _result_data(result: Result) -> dict[str, Any]:
    data: dict[str, Any] = {"id": result.pk}
    case = result.case
    data["case"] = {
        # 1-based, as the run page, the CSV and the API number cases.
        "position": case.position + 1,
        "number": case.position + 1,
        "case_id": case.case_id,
        "question": case.question,
        "expected_answer": case.expected_answer,
        **case.data,
    }
    for field in Result._meta.concrete_fields:
        if field.name in RESULT_FIELDS_OMITTED or field.name == "id":
            continue
        value = getattr(result, field.name)
        data[field.name] = float(value) if isinstance(value, Decimal) else value
    data["repeat"] = result.repeat + 1
    return data


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    return str(value)


# ---- CSV and XLSX --------------------------------------------------------------------


def _result_row(run: Run, result: Result) -> list[Any]:
    """One result as spreadsheet values (numbers stay numbers, text is neutralised later)."""
    case = result.case
    return [
        run.pk,
        case.position + 1,
        case.case_id,
        result.repeat + 1,
        result.variant,
        result.get_status_display(),
        result.score,
        result.verdict,
        result.question or case.question,
        case.expected_answer,
        result.actual_answer,
        result.error,
        result.reasoning,
        "; ".join(_scorer_text(row) for row in result.scorers),
        json.dumps(result.tool_calls, ensure_ascii=False) if result.tool_calls else "",
        ", ".join(str(tag) for tag in case.data.get("tags") or []),
        result.duration_ms,
        result.agent_tokens,
        result.judge_tokens,
        float(result.agent_cost),
        float(result.judge_cost),
        result.trace_id,
        _iso(result.finished_at) or "",
    ]


def _scorer_text(row: dict[str, Any]) -> str:
    value = row.get("score")
    shown = "–" if value is None else f"{value:g}"
    verdicts: dict[bool | None, str] = {True: " pass", False: " fail"}
    verdict = verdicts.get(row.get("passed"), "")
    return f"{row.get('label') or row.get('name')}: {shown}{verdict}"


def _summary_rows(run: Run) -> list[tuple[str, Any]]:
    data = _run_data(run, list(Result.objects.filter(run=run).only("variant", "status")))
    return [
        ("Run", f"#{run.pk}"),
        ("Agent", f"{data['agent']['name']} (version {data['agent_version']})"),
        ("Dataset", run.dataset_name),
        ("Status", run.get_status_display()),
        ("Error", run.error),
        ("Scorer", run.get_scorer_display() + (f" ({run.judge_model})" if run.judge_model else "")),
        ("Pass threshold", run.scoring.get("pass_threshold", 7)),
        ("Results scored (cases as written, every repeat)", run.passed + run.failed + run.errored),
        ("Passed", run.passed),
        ("Failed", run.failed),
        ("Errors", run.errored),
        ("Not run", data["skipped"]),
        ("Pass rate", data["pass_rate"]),
        ("Average score (0-10)", None if run.current_average is None else round(run.current_average, 2)),
        ("Robustness (smoke variants passed)", run.robustness),
        ("Consistency (mean score spread across repeats)", run.consistency),
        ("Agent tokens", run.agent_tokens),
        ("Judge tokens", run.judge_tokens),
        ("Agent cost (USD)", float(run.agent_cost)),
        ("Judge cost (USD)", float(run.judge_cost)),
        ("Started", data["started_at"] or data["created_at"]),
        ("Finished", data["finished_at"] or ""),
        ("Duration (s)", None if data["duration_seconds"] is None else round(data["duration_seconds"], 1)),
        ("Summary", run.summary or run.summary_note),
    ]


def _cell_text(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return value
    return neutralise(str(value))


def run_export_csv(run: Run) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=csv.QUOTE_ALL)
    writer.writerow(CSV_COLUMNS)
    for result in selectors.result_list(run=run):
        writer.writerow(_cell_text(value) for value in _result_row(run, result))
    return buffer.getvalue()


def _xlsx_cell(value: Any) -> Any:
    value = _cell_text(value)
    if isinstance(value, str):
        value = _ILLEGAL_XML.sub("", value)[:XLSX_CELL_LIMIT]
    return value


def run_export_xlsx(run: Run) -> bytes:
    from openpyxl import Workbook
    from openpyxl.styles import Font

    workbook = Workbook(write_only=True)
    results = workbook.create_sheet("Results")
    results.freeze_panes = "A2"
    results.append([_bold(results, name, Font) for name in CSV_COLUMNS])
    for result in selectors.result_list(run=run):
        results.append([_xlsx_cell(value) for value in _result_row(run, result)])
    summary = workbook.create_sheet("Summary")
    summary.column_dimensions["A"].width = 44
    summary.column_dimensions["B"].width = 80
    for label, value in _summary_rows(run):
        summary.append([_xlsx_cell(label), _xlsx_cell(value)])
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def _bold(sheet: Any, name: str, font: Any) -> Any:
    from openpyxl.cell import WriteOnlyCell

    cell = WriteOnlyCell(sheet, value=name)
    cell.font = font(bold=True)
    return cell


# ---- the standalone HTML report ------------------------------------------------------


def run_report_context(run: Run) -> dict[str, Any]:
    outcomes = selectors.case_outcome_list(run=run, with_tags=True)
    cards = selectors.case_card_list(run=run, outcomes=outcomes)
    threshold = run.scoring.get("pass_threshold", 7)
    main_total = len(outcomes)  # cases
    counts = selectors.case_filter_counts(outcomes)
    return {
        "run": run,
        "cards": cards,
        "counts": counts,
        "case_total": main_total,
        "skipped": sum(1 for outcome in outcomes if outcome.status == selectors.CASE_SKIPPED),
        "histogram": charts.score_histogram(selectors.run_scores(run=run), threshold=threshold),
        "tag_chart": charts.tag_pass_rates(outcomes),
        "duration": selectors.run_duration_seconds(run),
        "generated_at": timezone.now(),
        "pass_percent": round(100 * counts["passed"] / main_total) if main_total else 0,
        "fail_percent": round(100 * counts["failed"] / main_total) if main_total else 0,
        "error_percent": round(100 * counts["error"] / main_total) if main_total else 0,
    }


def run_export_html(run: Run) -> str:
    return render_to_string("runs/report.html", run_report_context(run))

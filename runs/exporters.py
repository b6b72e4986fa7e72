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
              simulator_tokens, simulator_cost (a scenario case's user simulator), needs_simulator
              (scenario results skipped for want of a model: left out of pass_rate),
              summary, summary_note, created_by, created_at, started_at, finished_at,
              duration_seconds},
      "results": [{id, case: {position, number (both 1-based), case_id, question, expected_answer,
                   tags, documents, ...every other snapshot field},
                   repeat (from 1), variant (0: as written), status, question, actual_answer, conversation,
                   tool_calls, retrieval_context, trace_id, score, verdict, reasoning,
                   error, scorers: [{name, label, score, passed, detail}], duration_ms,
                   agent_tokens, judge_tokens, agent_cost, judge_cost, simulator_tokens, simulator_cost,
                   scenario ({ended_by, goal, reason, user_turns, max_turns, failing_turn}), attempts,
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

from datasets.fields import neutralise
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
    "simulator_tokens",
    "simulator_cost_usd",
    "trace_id",
    "finished_at",
)


def export_filename(run: Run, extension: str) -> str:
    name = slugify(run.dataset_name)[:60] or "run"
    return f"evalsite-run-{run.pk}-{name}.{extension}"


# ---- JSON -----------------------------------------------------------------------------


def run_url(run: Run, site_url: str | None = None) -> str:
    """The run page's absolute address: `site_url` (evalsite.links.site_url of the request), else SITE_URL."""
    return (site_url or settings.SITE_URL).rstrip("/") + reverse("runs:detail", args=[run.agent_id, run.pk])


def run_export_data(run: Run, *, site_url: str | None = None) -> dict[str, Any]:
    results = list(selectors.result_list(run=run))
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "exported_at": _iso(timezone.now()),
        "run": _run_data(run, results, site_url=site_url),
        "results": [_result_data(result) for result in results],
    }


def run_export_json(run: Run, *, site_url: str | None = None) -> bytes:
    return json.dumps(
        run_export_data(run, site_url=site_url), ensure_ascii=False, indent=2, default=_json_default
    ).encode()


def _run_data(run: Run, results: list[Result], *, site_url: str | None = None) -> dict[str, Any]:
    main = [result for result in results if result.variant == 0 and not result.needs_simulator]
    scored = [result for result in main if result.is_finished]
    cases = selectors.run_counts(run=run, outcomes=selectors.case_outcome_list(run=run)).as_dict()["cases"]
    return {
        "id": run.pk,
        "url": run_url(run, site_url),
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
        # The counts above are per request (every repeat); per case, a case passes only
        # when every one of its repeats passed.
        "cases": cases,
        "average_score": run.current_average,
        "robustness": run.robustness,
        "consistency": run.consistency,
        "agent_tokens": run.agent_tokens,
        "judge_tokens": run.judge_tokens,
        "agent_cost": float(run.agent_cost),
        "judge_cost": float(run.judge_cost),
        "simulator_tokens": run.simulator_tokens,
        "simulator_cost": float(run.simulator_cost),
        "needs_simulator": sum(1 for result in results if result.variant == 0 and result.needs_simulator),
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
        "number": case.display_number,  # the case's number in its dataset (kept through re-runs)
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
        case.display_number,
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
        result.simulator_tokens,
        float(result.simulator_cost),
        result.trace_id,
        result.finished_at,  # ISO text in CSV, a date cell in XLSX
    ]


def _scorer_text(row: dict[str, Any]) -> str:
    value = row.get("score")
    shown = "–" if value is None else f"{value:g}"
    verdicts: dict[bool | None, str] = {True: " pass", False: " fail"}
    verdict = verdicts.get(row.get("passed"), "")
    return f"{row.get('label') or row.get('name')}: {shown}{verdict}"


def _summary_rows(run: Run, site_url: str | None = None) -> list[tuple[str, Any]]:
    data = _run_data(run, list(Result.objects.filter(run=run).only("variant", "status", "error")), site_url=site_url)
    return [
        ("Run", f"#{run.pk}"),
        ("Link", data["url"]),
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
        ("Cases", data["cases"]["total"]),
        ("Cases passed (every repeat passed)", data["cases"]["passed"]),
        ("Cases failed", data["cases"]["failed"]),
        ("Cases with errors", data["cases"]["errored"]),
        ("Cases not run", data["cases"]["skipped"]),
        ("Flaky cases (repeats disagree)", data["cases"]["flaky"]),
        ("Average score (0-10)", None if run.current_average is None else round(run.current_average, 2)),
        ("Robustness (smoke variants passed)", run.robustness),
        ("Consistency (mean score spread across repeats)", run.consistency),
        ("Agent tokens", run.agent_tokens),
        ("Judge tokens", run.judge_tokens),
        ("Agent cost (USD)", float(run.agent_cost)),
        ("Judge cost (USD)", float(run.judge_cost)),
        ("Simulator tokens", run.simulator_tokens),
        ("Simulator cost (USD)", float(run.simulator_cost)),
        ("Scenario results not run (no simulator model)", data["needs_simulator"]),
        ("Case pass rate (every repeat passed)", data["cases"]["pass_rate"]),
        ("Started", run.started_at or run.created_at),
        ("Finished", run.finished_at),
        ("Duration (s)", None if data["duration_seconds"] is None else round(data["duration_seconds"], 1)),
        ("Summary", run.summary or run.summary_note),
    ]


def _cell_text(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
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
    if isinstance(value, datetime):
        # Excel has no time zones: the local time of the console, as the pages show it.
        return timezone.localtime(value).replace(tzinfo=None)
    value = _cell_text(value)
    if isinstance(value, str):
        value = _ILLEGAL_XML.sub("", value)[:XLSX_CELL_LIMIT]
    return value


# Results sheet: each column's width (characters) and, for text, whether it wraps.
XLSX_WIDTHS = {"question": 48, "expected_answer": 48, "actual_answer": 56, "reasoning": 56, "error": 36}
XLSX_WRAPPED = {"question", "expected_answer", "actual_answer", "error", "reasoning", "scorers", "tool_calls"}
XLSX_NARROW = {"run_id": 8, "case_number": 8, "repeat": 8, "variant": 8, "score": 8, "status": 10}
DATE_FORMAT = "yyyy-mm-dd hh:mm:ss"
USD_FORMAT = '"$"#,##0.0000'
XLSX_FORMATS = {
    "score": "0.0",
    "finished_at": DATE_FORMAT,
    "agent_cost_usd": USD_FORMAT,
    "judge_cost_usd": USD_FORMAT,
    "simulator_cost_usd": USD_FORMAT,
}
SUMMARY_FORMATS = {
    "Pass rate": "0.0%",
    "Case pass rate (every repeat passed)": "0.0%",
    "Robustness (smoke variants passed)": "0.0%",
    "Agent cost (USD)": USD_FORMAT,
    "Judge cost (USD)": USD_FORMAT,
    "Simulator cost (USD)": USD_FORMAT,
    "Started": DATE_FORMAT,
    "Finished": DATE_FORMAT,
}


def run_export_xlsx(run: Run, *, site_url: str | None = None) -> bytes:
    """Summary first, then Results: a bold, frozen header with a filter, sized and wrapped
    columns, dates as dates and rates as percentages (write-only mode: one pass, low memory)."""
    from openpyxl import Workbook
    from openpyxl.styles import Alignment, Font
    from openpyxl.utils import get_column_letter

    workbook = Workbook(write_only=True)
    top, wrap = Alignment(vertical="top"), Alignment(vertical="top", wrap_text=True)
    bold = Font(bold=True)

    summary = workbook.create_sheet("Summary")
    summary.column_dimensions["A"].width = 44
    summary.column_dimensions["B"].width = 80
    for label, value in _summary_rows(run, site_url):
        summary.append(
            [
                _styled(summary, label, font=bold, alignment=top),
                _styled(summary, value, number_format=SUMMARY_FORMATS.get(label), alignment=wrap),
            ]
        )

    results = workbook.create_sheet("Results")
    results.freeze_panes = "A2"
    for index, name in enumerate(CSV_COLUMNS, start=1):
        width = XLSX_WIDTHS.get(name) or XLSX_NARROW.get(name) or max(12, len(name) + 2)
        results.column_dimensions[get_column_letter(index)].width = width
    results.append([_styled(results, name, font=bold) for name in CSV_COLUMNS])
    styles = [(XLSX_FORMATS.get(name), wrap if name in XLSX_WRAPPED else top) for name in CSV_COLUMNS]
    rows = 0
    for result in selectors.result_list(run=run):
        values = _result_row(run, result)
        results.append(
            [
                _styled(results, value, number_format=number_format, alignment=alignment)
                for value, (number_format, alignment) in zip(values, styles, strict=True)
            ]
        )
        rows += 1
    results.auto_filter.ref = f"A1:{get_column_letter(len(CSV_COLUMNS))}{rows + 1}"
    buffer = io.BytesIO()
    workbook.save(buffer)
    return buffer.getvalue()


def _styled(
    sheet: Any, value: Any, *, font: Any = None, alignment: Any = None, number_format: str | None = None
) -> Any:
    from openpyxl.cell import WriteOnlyCell

    cell = WriteOnlyCell(sheet, value=_xlsx_cell(value))
    if font is not None:
        cell.font = font
    if alignment is not None:
        cell.alignment = alignment
    if number_format and value is not None:
        cell.number_format = number_format
    return cell


# ---- the standalone HTML report ------------------------------------------------------


def run_report_context(run: Run, *, site_url: str | None = None) -> dict[str, Any]:
    outcomes = selectors.case_outcome_list(run=run, with_tags=True)
    cards = selectors.case_card_list(run=run, outcomes=outcomes)
    threshold = run.scoring.get("pass_threshold", 7)
    counts = selectors.case_filter_counts(outcomes)
    # The headline counts requests, as the run page, the CI gate and the other exports do;
    # the per-case figures are shown beside them (run_counts explains both).
    figures = selectors.run_counts(run=run, outcomes=outcomes)
    requests = figures.requests
    return {
        "run": run,
        "run_url": run_url(run, site_url),
        "cards": cards,
        "counts": counts,
        "figures": figures,
        "case_total": len(outcomes),
        "skipped": figures.skipped,
        "histogram": charts.score_histogram(selectors.run_scores(run=run), threshold=threshold),
        "tag_chart": charts.tag_pass_rates(outcomes),
        "duration": selectors.run_duration_seconds(run),
        "generated_at": timezone.now(),
        "pass_percent": round(100 * figures.passed / requests) if requests else 0,
        "fail_percent": round(100 * figures.failed / requests) if requests else 0,
        "error_percent": round(100 * figures.errored / requests) if requests else 0,
    }


def run_export_html(run: Run, *, site_url: str | None = None) -> str:
    return render_to_string("runs/report.html", run_report_context(run, site_url=site_url))

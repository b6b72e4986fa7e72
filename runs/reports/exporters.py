"""A run as a file: JSON (everything, machine-readable), CSV and XLSX (for spreadsheets),
and a standalone HTML report (one file, inline CSS, no scripts).

JSON shape (`"format": "evalsite.run", "version": 1`):

    {
      "format": "evalsite.run", "version": 1, "exported_at": ISO-8601,
      "run": {id, url, agent: {id, name, kind}, agent_version, dataset: {id, name},
              purpose, parent_id, status, error, scorer, scorer_label, judge_model,
              scoring: {pass_threshold, number_of_requests, criteria, judge_prompt, ...},
              concurrency, total, completed, passed, failed, errored, skipped, abstained
              (the offline scorer could not check them: "Needs a judge model"),
              pass_rate (0-1 over the cases as written, every repeat, abstentions left out), average_score,
              robustness, consistency, agent_tokens, judge_tokens, agent_cost, judge_cost,
              simulator_tokens, simulator_cost (a scenario case's user simulator), needs_simulator
              (scenario results skipped for want of a model: left out of pass_rate),
              summary, summary_note, created_by, created_at, started_at, finished_at,
              duration_seconds, budget_cap, stop_reason, judge_failed_preflight,
              trust: {abstained, judge_unusable, cut: [{call, limit, count, setting}],
                      judge_failed_preflight, notes: [sentences]},
              tools: [{tool, expected, called, precision, recall, argument_match_rate}]},
      "results": [{id, case: {position, number (both 1-based), case_id, question, expected_answer,
                   tags, documents, ...every other snapshot field},
                   repeat (from 1), variant (0: as written), status, question, actual_answer, conversation,
                   tool_calls, retrieval_context, trace_id, score, verdict, reasoning,
                   error, error_kind ("judge_unusable": the judge's answer failed its checks),
                   cut ([{call, limit}]: answers that ended at their token limit),
                   scorers: [{name, label, score, passed, detail}], duration_ms,
                   agent_tokens, judge_tokens, agent_cost, judge_cost, simulator_tokens, simulator_cost,
                   scenario ({ended_by, goal, reason, user_turns, max_turns, failing_turn}), attempts
                   (times the agent was asked), repeats ([{cause, attempt}]: why it was asked again),
                   queued_at, claimed_at, finished_at,
                   tool_diagnosis: {matched, missing, extra, wrong_args} or null}, ...]
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
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.text import slugify

from datasets.fields import neutralise
from runs import selectors
from runs.judging.trust import PREFLIGHT_BANNER, cut_label, run_trust_notes
from runs.models import Result, Run
from runs.reports import charts, tools

FORMAT_NAME = "evalsite.run"
FORMAT_VERSION = 1
# Result fields the JSON leaves out: the foreign keys (nested or implied) and the
# dispatch token, an internal detail of the case queue.
RESULT_FIELDS_OMITTED = {"run", "case", "token", "claimed_ahead", "rescored_from"}
XLSX_CELL_LIMIT = 32_767
# Characters XML 1.0 forbids: openpyxl refuses them, so they are dropped from cells.
ILLEGAL_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")

# Tool-use diagnostics per result (runs/reports/tools.py): tool names, "; "-separated.
TOOL_COLUMNS = ("tools_matched", "tools_missing", "tools_extra", "tools_wrong_args")
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
    *TOOL_COLUMNS,
    "judge",
    "judge_samples",
    "judge_stable",
    # What other checks found (runs/judging/trust.py): "Judge answer unusable", and answers cut at their limit.
    "error_kind",
    "cut",
    # How many times the agent was asked about this result (1 normally), and why again.
    "attempts",
    "asked_again_after",
)


@dataclass(frozen=True)
class ExportExtension:
    """What an app above runs adds to every export of a run (the reviews app: the
    reviewers' columns). Apps append to EXPORT_EXTENSIONS in AppConfig.ready(); runs never
    imports them. `cells(run)` gives, per result id, one value per column for CSV/XLSX;
    `results(run)` the JSON per result id (under `name`); `summary(run)` the run-level
    JSON (under `name`), which `template` renders in the HTML report as `data`."""

    name: str
    columns: tuple[str, ...]
    cells: Callable[[Run], dict[int, list[Any]]]
    results: Callable[[Run], dict[int, Any]]
    summary: Callable[[Run], dict[str, Any]]
    template: str


EXPORT_EXTENSIONS: list[ExportExtension] = []


def export_columns() -> tuple[str, ...]:
    return CSV_COLUMNS + tuple(column for ext in EXPORT_EXTENSIONS for column in ext.columns)


def extra_cells(run: Run) -> Callable[[Result], list[Any]]:
    """The extensions' cells of one result, read once per export (one query per extension)."""
    tables = [(ext.cells(run), len(ext.columns)) for ext in EXPORT_EXTENSIONS]
    return lambda result: [value for table, width in tables for value in table.get(result.pk, [""] * width)]


def export_filename(run: Run, extension: str) -> str:
    name = slugify(run.dataset_name)[:60] or "run"
    return f"evalsite-run-{run.pk}-{name}.{extension}"


# ---- JSON -----------------------------------------------------------------------------


def run_url(run: Run, site_url: str | None = None) -> str:
    """The run page's absolute address: `site_url` (evalsite.links.site_url of the request), else SITE_URL."""
    return (site_url or settings.SITE_URL).rstrip("/") + reverse("runs:detail", args=[run.agent_id, run.pk])


def run_export_data(run: Run, *, site_url: str | None = None) -> dict[str, Any]:
    results = list(selectors.result_list(run=run))
    rows = [_result_data(result) for result in results]
    data = _run_data(run, results, site_url=site_url)
    for ext in EXPORT_EXTENSIONS:
        data[ext.name] = ext.summary(run)
        per_result = ext.results(run)
        for row in rows:
            row[ext.name] = per_result.get(row["id"])
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "exported_at": _iso(timezone.now()),
        "run": data,
        "results": rows,
    }


def run_export_json(run: Run, *, site_url: str | None = None) -> bytes:
    return json.dumps(
        run_export_data(run, site_url=site_url), ensure_ascii=False, indent=2, default=_json_default
    ).encode()


def _run_data(run: Run, results: list[Result], *, site_url: str | None = None) -> dict[str, Any]:
    main = [result for result in results if result.variant == 0 and not result.needs_simulator]
    scored = [result for result in main if result.is_finished]
    cases = selectors.run_counts(run=run, outcomes=selectors.case_outcome_list(run=run)).as_dict()["cases"]
    # Abstentions ("Needs a judge model") are neither pass nor fail: out of the pass rate.
    counted = len(main) - run.abstained
    trust = run_trust_notes(run=run)
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
        "judge": _judge_data(run),
        "scoring": run.scoring,
        "concurrency": run.concurrency,
        "total": run.total,
        "completed": run.completed,
        "passed": run.passed,
        "failed": run.failed,
        "errored": run.errored,
        "skipped": sum(1 for result in main if result.status == Result.Status.SKIPPED),
        "abstained": run.abstained,
        "pass_rate": round(run.passed / counted, 4) if counted > 0 else None,
        "scored": len(scored),
        # The counts above are per request (every repeat); per case, a case passes only
        # when every one of its repeats passed.
        "cases": cases,
        "average_score": run.current_average,
        # Every time the agent was asked about a result again, by cause (results: attempts, repeats).
        "repeat_calls": _repeat_calls(run),
        "robustness": run.robustness,
        "consistency": run.consistency,
        "agent_tokens": run.agent_tokens,
        "judge_tokens": run.judge_tokens,
        "agent_cost": float(run.agent_cost),
        "judge_cost": float(run.judge_cost),
        "simulator_tokens": run.simulator_tokens,
        "simulator_cost": float(run.simulator_cost),
        "needs_simulator": sum(1 for result in results if result.variant == 0 and result.needs_simulator),
        "judge_failed_preflight": run.judge_failed_preflight,
        # What the figures leave out or cannot vouch for, counted and in words (runs/judging/trust.py).
        "trust": {**trust.as_dict(), "notes": trust.lines()},
        "summary": run.summary,
        "summary_note": run.summary_note,
        "ungated_checks_failed": run.ungated_checks_failed,
        "summary_model": run.summary_model,
        "summary_disagreements": run.summary_disagreements,
        "created_by": run.created_by.get_username() if run.created_by else None,
        "created_at": _iso(run.created_at),
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "duration_seconds": selectors.run_duration_seconds(run),
        "budget_cap": None if run.budget_cap is None else float(run.budget_cap),
        "stop_reason": run.stop_reason,
        "tools": [row.as_dict() for row in tools.run_tool_table(run=run)],
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
    diagnosis = tools.result_diagnosis(result)
    data["tool_diagnosis"] = diagnosis.as_dict() if diagnosis else None
    data["rescored_from_id"] = result.rescored_from_id
    return data


def _repeat_calls(run: Run) -> dict[str, Any]:
    repeats = selectors.run_repeats(run=run)
    return {"total": repeats.total, "causes": [{"after": label, "times": n} for label, n in repeats.causes]}


def _judge_data(run: Run) -> dict[str, Any] | None:
    """The judge configuration that scored the run (issue 18): its label says which judge made the scores."""
    config = run.judge_config
    if config is None:
        return None
    return {
        "id": config.pk,
        "number": config.number,
        "label": config.label,
        "fingerprint": config.fingerprint,
        "judge_model": config.judge_model,
        "threshold": config.threshold,
        "scorers": config.scorers,
        "resamples": config.resamples,
        "examples": len(config.examples),
    }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    return str(value)


# ---- CSV and XLSX --------------------------------------------------------------------


def result_row(run: Run, result: Result) -> list[Any]:
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
        *_tool_cells(result),
        run.judge_config.label if run.judge_config else "",
        ", ".join(f"{sample:g}" for sample in result.judge_samples),
        {True: "stable", False: "unstable"}.get(result.judge_stable, "") if result.judge_stable is not None else "",
        result.get_error_kind_display() if result.error_kind else "",
        "; ".join(cut_label(cut) for cut in result.cut or []),
        result.attempts,
        repeats_text(result),
    ]


def repeats_text(result: Result) -> str:
    """Why the agent was asked about the result again, one cause per repeat ("; "-separated)."""
    labels = dict(Result.RepeatCause.choices)
    return "; ".join(labels.get(entry.get("cause", ""), "an unrecorded cause") for entry in result.repeats)


def _tool_cells(result: Result) -> list[str]:
    diagnosis = tools.result_diagnosis(result)
    if diagnosis is None:
        return [""] * len(TOOL_COLUMNS)
    return ["; ".join(names) for names in diagnosis.as_dict().values()]


def _scorer_text(row: dict[str, Any]) -> str:
    value = row.get("score")
    shown = "–" if value is None else f"{value:g}"
    verdicts: dict[bool | None, str] = {True: " pass", False: " fail"}
    verdict = verdicts.get(row.get("passed"), "")
    return f"{row.get('label') or row.get('name')}: {shown}{verdict}"


def summary_rows(run: Run, site_url: str | None = None) -> list[tuple[str, Any]]:
    data = _run_data(run, list(Result.objects.filter(run=run).only("variant", "status", "error")), site_url=site_url)
    trust = data["trust"]
    warning = [("Warning", PREFLIGHT_BANNER)] if run.judge_failed_preflight else []
    return [
        *warning,
        ("Run", f"#{run.pk}"),
        ("Link", data["url"]),
        ("Agent", f"{data['agent']['name']} (version {data['agent_version']})"),
        ("Dataset", run.dataset_name),
        ("Status", run.get_status_display()),
        ("Error", run.error),
        ("Stopped because", run.stop_reason),
        ("Cost cap (USD)", None if run.budget_cap is None else float(run.budget_cap)),
        ("Scorer", run.get_scorer_display() + (f" ({run.judge_model})" if run.judge_model else "")),
        ("Judge", run.judge_config.label if run.judge_config else ""),
        ("Judge fingerprint", run.judge_config.fingerprint if run.judge_config else ""),
        ("Pass threshold", run.pass_threshold),
        ("Results scored (cases as written, every repeat)", run.passed + run.failed + run.errored),
        ("Passed", run.passed),
        ("Failed", run.failed),
        ("Errors", run.errored),
        ("Not run", data["skipped"]),
        ("Need a judge model (left out of the pass rate)", run.abstained),
        ("Judge answers unusable (counted as errors)", trust["judge_unusable"]),
        ("Answers cut at their token limit", sum(cut["count"] for cut in trust["cut"])),
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
        ("Failed checks that did not change the verdict", run.ungated_checks_failed),
        ("Summary", run.summary or run.summary_note),
        ("Summary written by", f"a model ({run.summary_model}), not the run's figures" if run.summary_model else ""),
        ("Summary disagrees with the run", " ".join(run.summary_disagreements)),
        *(("Note", line) for line in trust["notes"]),
    ]


def cell_text(value: Any) -> Any:
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
    writer.writerow(export_columns())
    extra = extra_cells(run)
    for result in selectors.result_list(run=run):
        writer.writerow(cell_text(value) for value in result_row(run, result) + extra(result))
    return buffer.getvalue()


# ---- the standalone HTML report ------------------------------------------------------


def run_report_context(run: Run, *, site_url: str | None = None) -> dict[str, Any]:
    outcomes = selectors.case_outcome_list(run=run, with_tags=True)
    cards = selectors.case_card_list(run=run, outcomes=outcomes)
    threshold = run.pass_threshold
    counts = selectors.case_filter_counts(outcomes)
    # The headline counts requests, as the run page, the CI gate and the other exports do;
    # the per-case figures are shown beside them (run_counts explains both).
    figures = selectors.run_counts(run=run, outcomes=outcomes)
    requests = figures.requests - figures.abstained  # an abstention is neither pass nor fail
    return {
        "run": run,
        "run_url": run_url(run, site_url),
        "cards": cards,
        "counts": counts,
        "figures": figures,
        "case_total": len(outcomes),
        "counted": requests,
        "skipped": figures.skipped,
        "histogram": charts.score_histogram(selectors.run_scores(run=run), threshold=threshold),
        "tag_chart": charts.tag_pass_rates(outcomes),
        "duration": selectors.run_duration_seconds(run),
        "generated_at": timezone.now(),
        "pass_percent": round(100 * figures.passed / requests) if requests else 0,
        "fail_percent": round(100 * figures.failed / requests) if requests else 0,
        "error_percent": round(100 * figures.errored / requests) if requests else 0,
        "extensions": [(ext.template, ext.summary(run)) for ext in EXPORT_EXTENSIONS],
        "trust": run_trust_notes(run=run),
    }


def run_export_html(run: Run, *, site_url: str | None = None) -> str:
    return render_to_string("runs/report.html", run_report_context(run, site_url=site_url))

"""Tool-use diagnostics: per result, which expected tools were called, missing, extra or
called with wrong arguments; per run and tool, precision, recall and argument-match rate.

The per-result diagnosis is the trajectory check's own (runs/judging/trajectory.py `diagnose`), in the
case's trajectory mode, so the card, the exports and the API say the same thing. Arguments count
only where the case checks them (`check_tool_args`), as in the check.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from runs.judging.trajectory import ToolDiagnosis, diagnose
from runs.models import Result, Run


def tool_diagnosis(
    actual: list[dict[str, Any]], expected: list[dict[str, Any]], check_args: bool, mode: str = "strict"
) -> ToolDiagnosis:
    return diagnose(actual, expected, mode, check_args)


def result_diagnosis(result: Result) -> ToolDiagnosis | None:
    """The diagnosis of a finished result whose case expects tools, in its case's trajectory mode
    (the same one its trajectory check explained on the card), else None."""
    data = result.case.data
    expected = data.get("expected_tools") or []
    if not expected or result.status not in (Result.Status.PASS, Result.Status.FAIL):
        return None
    mode = data.get("trajectory_mode") or "strict"
    return diagnose(result.tool_calls or [], expected, mode, bool(data.get("check_tool_args")))


@dataclass
class ToolRow:
    name: str
    expected: int = 0  # calls the cases expected
    called: int = 0  # calls the agent made
    hits: int = 0  # expected calls made (by name)
    args_checked: int = 0  # hits whose arguments the case checks
    args_matched: int = 0

    @property
    def precision(self) -> float | None:
        return self.hits / self.called if self.called else None

    @property
    def recall(self) -> float | None:
        return self.hits / self.expected if self.expected else None

    @property
    def arg_match_rate(self) -> float | None:
        return self.args_matched / self.args_checked if self.args_checked else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "tool": self.name,
            "expected": self.expected,
            "called": self.called,
            "precision": self.precision,
            "recall": self.recall,
            "argument_match_rate": self.arg_match_rate,
        }


def run_tool_table(*, run: Run, results: list[Result] | None = None) -> list[ToolRow]:
    """Per tool over the run's finished results whose case expects tools (one query if not given)."""
    if results is None:
        results = list(
            Result.objects.filter(run=run, status__in=(Result.Status.PASS, Result.Status.FAIL))
            .select_related("case")
            .only("status", "tool_calls", "case__data")
        )
    rows: dict[str, ToolRow] = defaultdict(lambda: ToolRow(""))
    for result in results:
        diagnosis = result_diagnosis(result)
        if diagnosis is None:
            continue
        for name in [_name(call) for call in result.tool_calls or []]:
            _row(rows, name).called += 1
        names = diagnosis.as_dict()
        for name in names["matched"] + names["wrong_args"] + names["missing"]:
            _row(rows, name).expected += 1
        for name in names["matched"] + names["wrong_args"]:
            _row(rows, name).hits += 1
        if diagnosis.check_args:
            for name in names["matched"]:
                _row(rows, name).args_checked += 1
                _row(rows, name).args_matched += 1
            for name in names["wrong_args"]:
                _row(rows, name).args_checked += 1
    return sorted(rows.values(), key=lambda row: row.name)


def _row(rows: dict[str, ToolRow], name: str) -> ToolRow:
    row = rows[name]
    row.name = name
    return row


def _name(call: dict[str, Any]) -> str:
    return str(call.get("name", "")).strip().lower()  # as the trajectory check compares names

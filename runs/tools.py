"""Tool-use diagnostics: per result, which expected tools were called, missing, extra or
called with wrong arguments; per run and tool, precision, recall and argument-match rate.

Built on the trajectory check's matching (runs/scoring.py `matching_pairs`, `call_fits`):
first calls are paired with expectations by name and arguments, then the calls left over
with the expectations left over by name alone: those pairs are the wrong-argument calls.
Arguments count only where the case checks them (`check_tool_args`), as in the check.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from runs.models import Result, Run
from runs.trajectory import call_fits, matching_pairs


@dataclass
class Diagnosis:
    matched: list[str] = field(default_factory=list)  # expected tools called as expected
    wrong_args: list[str] = field(default_factory=list)  # expected tools called with other arguments
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    check_args: bool = False

    def as_dict(self) -> dict[str, list[str]]:
        return {"matched": self.matched, "missing": self.missing, "extra": self.extra, "wrong_args": self.wrong_args}


def tool_diagnosis(actual: list[dict[str, Any]], expected: list[dict[str, Any]], check_args: bool) -> Diagnosis:
    exact = matching_pairs(actual, expected, lambda call, want: call_fits(call, want, check_args))
    rest_actual = [i for i in range(len(actual)) if i not in exact]
    rest_expected = [j for j in range(len(expected)) if j not in exact.values()]
    by_name = matching_pairs(
        [actual[i] for i in rest_actual],
        [expected[j] for j in rest_expected],
        lambda call, want: call_fits(call, want, False),
    )
    named = {rest_actual[a]: rest_expected[e] for a, e in by_name.items()}
    diagnosis = Diagnosis(check_args=check_args)
    diagnosis.matched = [_name(expected[j]) for j in sorted(exact.values())]
    diagnosis.wrong_args = [_name(expected[j]) for j in sorted(named.values())]
    paired_expected = set(exact.values()) | set(named.values())
    diagnosis.missing = [_name(want) for j, want in enumerate(expected) if j not in paired_expected]
    diagnosis.extra = [_name(call) for i, call in enumerate(actual) if i not in exact and i not in named]
    return diagnosis


def result_diagnosis(result: Result) -> Diagnosis | None:
    """The diagnosis of a finished result whose case expects tools, else None."""
    expected = result.case.data.get("expected_tools") or []
    if not expected or result.status not in (Result.Status.PASS, Result.Status.FAIL):
        return None
    return tool_diagnosis(result.tool_calls or [], expected, bool(result.case.data.get("check_tool_args")))


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
        for name in diagnosis.matched + diagnosis.wrong_args + diagnosis.missing:
            _row(rows, name).expected += 1
        for name in diagnosis.matched + diagnosis.wrong_args:
            _row(rows, name).hits += 1
        if diagnosis.check_args:
            for name in diagnosis.matched:
                _row(rows, name).args_checked += 1
                _row(rows, name).args_matched += 1
            for name in diagnosis.wrong_args:
                _row(rows, name).args_checked += 1
    return sorted(rows.values(), key=lambda row: row.name)


def _row(rows: dict[str, ToolRow], name: str) -> ToolRow:
    row = rows[name]
    row.name = name
    return row


def _name(call: dict[str, Any]) -> str:
    return str(call.get("name", "")).strip().lower()  # as the trajectory check compares names

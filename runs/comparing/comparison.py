"""Comparing two runs of one dataset, case by case.

Cases are paired and their changes named by runs.comparing.pairing (the verify panel and the CI
gate use the same module, so they never disagree with this page). Every figure covers the
cases scored in both runs, and comes with the paired test (runs.comparing.stats): whether the
difference is more than noise.

Two runs are "not directly comparable" when something other than the agent changed:
the snapshot of a shared case (question, expected answer, documents, settings), the
set of cases (unless one run re-ran part of the other), the judge or its prompt and
criteria, or the pass threshold. The page says what differs; it still compares. When the
judges differ (runs.judging.configs), changes are labelled as such, never plain fixes and
regressions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db.models import Sum

from runs.comparing.pairing import (
    CHANGE_BETTER,
    CHANGE_FIX,
    CHANGE_ONLY_A,
    CHANGE_ONLY_B,
    CHANGE_REGRESSION,
    CHANGE_SAME,
    CHANGE_UNSCORED,
    CHANGE_WORSE,
    SCORED,
    pairing_test,
    run_pairing,
)
from runs.comparing.stats import DEFAULT_ALPHA, PairedTest
from runs.comparing.worddiff import word_diff
from runs.judging.configs import judges_differ
from runs.models import Result, Run, RunCase
from runs.selectors import (
    CASE_ABSTAINED,
    CASE_ERROR,
    CASE_FAIL,
    CASE_PASS,
    CASE_SKIPPED,
    CaseOutcome,
    run_duration_seconds,
)

__all__ = ["CHANGE_BETTER", "CHANGE_FIX", "CHANGE_REGRESSION", "CHANGE_SAME", "CHANGE_WORSE", "run_compare"]
# Side-by-side answers (with their word diff) for this many rows, regressions and fixes
# first: enough to read every change; the rest are a click away on the run pages.
ANSWERS_SHOWN = 100
# Judge settings that change what a score means, as stored in Run.scoring.
JUDGE_SETTINGS = (
    ("judge_prompt", "Judge prompt"),
    ("acceptance_criteria", "Acceptance criteria"),
    ("rejection_criteria", "Rejection criteria"),
    ("evaluation_criteria", "Evaluation criteria"),
)
# RunCase.data keys whose difference is shown by name (the rest are "other settings").
DATA_LABELS = {
    "documents": "documents",
    "document_context": "document context",
    "turns": "turns",
    "expected_tools": "expected tools",
    "trajectory_mode": "trajectory mode",
    "check_tool_args": "tool argument check",
    "expected_context": "expected context",
    "judge_guideline": "judge guideline",
    "smoke_count": "smoke tests",
    "smoke_guidance": "smoke tests",
}
# Provenance only: where a case came from says nothing about what it tests.
DATA_IGNORED = {"source_file", "source_location", "source_span", "tags", "extra", "tests_rule"}


@dataclass
class Side:
    position: int
    status: str
    score: float | None
    case_pk: int = 0
    case_number: int = 0  # the case's number in its dataset, the same in both runs

    @property
    def number(self) -> int:
        return self.case_number or self.position + 1

    @property
    def passed(self) -> bool:
        return self.status == CASE_PASS


@dataclass
class Answer:
    """One run's first attempt at the case, for the side-by-side view."""

    text: str
    error: str
    score: float | None
    verdict: str
    reasoning: str


@dataclass
class CaseRow:
    question: str
    case_id: str
    a: Side | None
    b: Side | None
    change: str
    changed_fields: list[str] = field(default_factory=list)
    answer_a: Answer | None = None
    answer_b: Answer | None = None
    diff: list[tuple[str, str]] = field(default_factory=list)  # word diff of A's answer to B's

    @property
    def answers_differ(self) -> bool:
        return any(kind != "equal" for kind, _ in self.diff)

    @property
    def answer_pairs(self) -> list[tuple[Answer | None, str]]:
        return [(self.answer_a, "A"), (self.answer_b, "B")]

    @property
    def delta(self) -> float | None:
        if self.a is None or self.b is None or self.a.score is None or self.b.score is None:
            return None
        return round(self.b.score - self.a.score, 1)


@dataclass
class Totals:
    passed: int
    failed: int
    errored: int
    scored: int
    average: float | None
    cost: float
    duration: float | None
    # Cases the offline scorer abstained on ("Needs a judge model"): not scored, named apart.
    abstained: int = 0

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.scored if self.scored else None


@dataclass
class Delta:
    label: str
    a: str
    b: str
    delta: str
    tone: str  # "good" | "bad" | "" : the delta's colour


@dataclass
class Comparison:
    a: Run
    b: Run
    rows: list[CaseRow]
    differences: list[str]
    notes: list[str]
    totals_a: Totals
    totals_b: Totals
    deltas: list[Delta]
    # One line per stopped run: how many of its cases were not run, what the figures cover.
    stopped: list[str] = field(default_factory=list)
    test: PairedTest | None = None
    # Set when the runs' judges differ: then no change is a plain fix or regression.
    judges: str | None = None

    @property
    def comparable(self) -> bool:
        return not self.differences

    @property
    def regressions(self) -> list[CaseRow]:
        return [row for row in self.rows if row.change == CHANGE_REGRESSION]

    @property
    def fixes(self) -> list[CaseRow]:
        return [row for row in self.rows if row.change == CHANGE_FIX]

    @property
    def compared(self) -> int:
        return sum(1 for row in self.rows if row.a and row.b and row.change != CHANGE_UNSCORED)


def runs_share_dataset(a: Run, b: Run) -> bool:
    if a.dataset_id is not None or b.dataset_id is not None:
        return a.dataset_id == b.dataset_id
    return a.dataset_name == b.dataset_name  # both datasets were deleted since


def run_compare(*, a: Run, b: Run, alpha: float = DEFAULT_ALPHA, answers: bool = False) -> Comparison:
    """A (before) against B (after): per case, totals, the paired test, and what makes them
    incomparable. With `answers`, the rows carry both answers side by side (two more queries)."""
    pairing = run_pairing(a=a, b=b)
    outcomes_a, outcomes_b = pairing.outcomes_a, pairing.outcomes_b
    rows: list[CaseRow] = []
    changed_cases = 0
    for pair in pairing.pairs:
        case_a, case_b = pair.case_a, pair.case_b
        changed = _snapshot_changes(case_a, case_b)
        changed_cases += bool(changed)
        side_a, side_b = _side(pair.outcome_a), _side(pair.outcome_b)
        rows.append(CaseRow(case_b.question, case_b.case_id, side_a, side_b, pair.change, changed))
    rows += [CaseRow(c.question, c.case_id, _side(outcomes_a.get(c.pk)), None, CHANGE_ONLY_A) for c in pairing.only_a]
    rows += [CaseRow(c.question, c.case_id, None, _side(outcomes_b.get(c.pk)), CHANGE_ONLY_B) for c in pairing.only_b]
    rows.sort(key=_row_order)

    only_a, only_b, matched = len(pairing.only_a), len(pairing.only_b), len(pairing.pairs)
    differences, notes = _differences(a, b, changed_cases, only_a, only_b, matched)
    # Every figure covers the same cases: those scored in both runs. A stopped run (or one
    # still going) has cases the other scored; counting them on one side only would make
    # the totals disagree with the case list.
    shared = [row for row in rows if row.a and row.b and row.change != CHANGE_UNSCORED]
    totals_a = _totals(a, [row.a for row in shared if row.a])
    totals_b = _totals(b, [row.b for row in shared if row.b])
    # Cases a run could not score for want of a judge model: out of the figures, named beside them.
    totals_a.abstained = sum(1 for row in rows if row.a and row.a.status == CASE_ABSTAINED)
    totals_b.abstained = sum(1 for row in rows if row.b and row.b.status == CASE_ABSTAINED)
    stopped = [_stopped_line(run, outcomes, len(shared)) for run, outcomes in ((a, outcomes_a), (b, outcomes_b))]
    deltas = _deltas(totals_a, totals_b)
    if any(stopped) or len(shared) < max(len(outcomes_a), len(outcomes_b)):
        for delta in deltas:  # wall-clock time cannot be split by case: say what it covers
            if delta.label == "Duration":
                delta.label = "Duration (whole run)"
    if answers:
        _add_answers(a, b, rows[:ANSWERS_SHOWN])
    return Comparison(
        a,
        b,
        rows,
        differences,
        notes,
        totals_a,
        totals_b,
        deltas,
        [line for line in stopped if line],
        test=pairing_test(pairing, alpha=alpha),
        judges=judges_differ(a, b),
    )


def _add_answers(a: Run, b: Run, rows: list[CaseRow]) -> None:
    wanted_a = {row.a.case_pk: row for row in rows if row.a}
    wanted_b = {row.b.case_pk: row for row in rows if row.b}
    for run, wanted, side in ((a, wanted_a, "answer_a"), (b, wanted_b, "answer_b")):
        first = (
            Result.objects.filter(run=run, variant=0, repeat=0, case_id__in=list(wanted))
            .only("case_id", "actual_answer", "error", "score", "verdict", "reasoning", "status")
            .order_by()
        )
        for result in first:
            if result.is_finished:
                answer = Answer(result.actual_answer, result.error, result.score, result.verdict, result.reasoning)
                setattr(wanted[result.case_id], side, answer)
    for row in rows:
        if row.answer_a and row.answer_b:
            row.diff = word_diff(row.answer_a.text, row.answer_b.text)


def _stopped_line(run: Run, outcomes: dict[int, CaseOutcome], shared: int) -> str:
    if run.status != Run.Status.STOPPED:
        return ""
    missing = sum(1 for outcome in outcomes.values() if outcome.status == CASE_SKIPPED)
    return (
        f"Run #{run.pk} was stopped: {missing} of its {len(outcomes)} cases were not run. "
        f"Totals, changes and the case list cover the {shared} case{'s' if shared != 1 else ''} scored in both runs."
    )


def _snapshot_changes(case_a: RunCase, case_b: RunCase) -> list[str]:
    changes = []
    if case_a.question != case_b.question:
        changes.append("question")
    if case_a.expected_answer != case_b.expected_answer:
        changes.append("expected answer")
    data_a, data_b = case_a.data or {}, case_b.data or {}
    for key in sorted(set(data_a) | set(data_b)):
        if key in DATA_IGNORED or _same(data_a.get(key), data_b.get(key)):
            continue
        label = DATA_LABELS.get(key, "other settings")
        if label not in changes:
            changes.append(label)
    return changes


def _same(x: Any, y: Any) -> bool:
    # Missing and empty are the same setting ("no documents", "no turns").
    return (x or None) == (y or None)


def _side(outcome: CaseOutcome | None) -> Side | None:
    if outcome is None:
        return None
    return Side(outcome.position, outcome.status, outcome.score, outcome.case_pk, outcome.number)


_ORDER = [CHANGE_REGRESSION, CHANGE_FIX, CHANGE_WORSE, CHANGE_BETTER, CHANGE_SAME, CHANGE_UNSCORED]


def _row_order(row: CaseRow) -> tuple[int, float, int]:
    rank = _ORDER.index(row.change) if row.change in _ORDER else len(_ORDER)
    side = row.b or row.a
    position = side.position if side else 0
    if row.change == CHANGE_ONLY_B:
        position += 1_000_000  # after A's leftovers
    # Within "worse" and "better", the biggest moves first.
    magnitude = -abs(row.delta) if row.delta is not None and row.change in (CHANGE_WORSE, CHANGE_BETTER) else 0.0
    return rank, magnitude, position


def _differences(a: Run, b: Run, changed: int, only_a: int, only_b: int, shared: int) -> tuple[list[str], list[str]]:
    differences: list[str] = []
    notes: list[str] = []
    if changed:
        differences.append(
            f"Dataset snapshot: {changed} of the {shared} shared case{'s' if shared != 1 else ''} "
            f"changed between the runs (marked below)."
        )
    related = a.parent_id == b.pk or b.parent_id == a.pk
    if only_a or only_b:
        parts = [f"{only_a} only in run #{a.pk}" if only_a else "", f"{only_b} only in run #{b.pk}" if only_b else ""]
        text = " and ".join(part for part in parts if part)
        if related:
            notes.append(f"One run re-ran part of the other: {text}. Totals below cover the {shared} shared cases.")
        else:
            differences.append(f"Dataset snapshot: the case lists differ ({text}).")
    judge_a, judge_b = _judge_label(a), _judge_label(b)  # in detail; runs.judging.configs says whether they differ
    if judge_a != judge_b:
        differences.append(f"Judge: {judge_a} in run #{a.pk}, {judge_b} in run #{b.pk}.")
    for key, label in JUDGE_SETTINGS:
        if (a.scoring.get(key) or "").strip() != (b.scoring.get(key) or "").strip():
            differences.append(f"{label}: changed between the runs.")
    threshold_a, threshold_b = a.pass_threshold, b.pass_threshold
    if threshold_a != threshold_b:
        differences.append(f"Pass threshold: {threshold_a}/10 in run #{a.pk}, {threshold_b}/10 in run #{b.pk}.")
    repeats_a, repeats_b = a.scoring.get("number_of_requests") or 1, b.scoring.get("number_of_requests") or 1
    if repeats_a != repeats_b:
        notes.append(f"Repeats per case: {repeats_a} in run #{a.pk}, {repeats_b} in run #{b.pk}.")
    if a.agent_version_id == b.agent_version_id:
        notes.append(f"Both runs tested the same agent version (v{b.agent_version.number}).")
    return differences, notes


def _judge_label(run: Run) -> str:
    if run.scorer == Run.Scorer.OFFLINE:
        return "the offline reference scorer"
    return f"LLM judge {run.judge_model}" if run.judge_model else "LLM judge"


def _totals(run: Run, sides: list[Side]) -> Totals:
    scored = [side for side in sides if side.status in SCORED]
    scores = [side.score for side in scored if side.score is not None]
    # The cost of these cases only (every repeat and variant of them), so both columns
    # price the same work; the run's summary cost is not comparable when a run was cut short.
    spent = Result.objects.filter(run=run, case_id__in=[side.case_pk for side in scored]).aggregate(
        agent=Sum("agent_cost", default=Decimal(0)), judge=Sum("judge_cost", default=Decimal(0))
    )
    return Totals(
        passed=sum(1 for side in scored if side.status == CASE_PASS),
        failed=sum(1 for side in scored if side.status == CASE_FAIL),
        errored=sum(1 for side in scored if side.status == CASE_ERROR),
        scored=len(scored),
        average=round(sum(scores) / len(scores), 2) if scores else None,
        cost=float(spent["agent"] + spent["judge"]),
        duration=run_duration_seconds(run),
    )


def _deltas(a: Totals, b: Totals) -> list[Delta]:
    def rate(value: float | None) -> str:
        return "–" if value is None else f"{value:.0%}"

    def signed(value: float, fmt: str) -> str:
        return ("+" if value > 0 else "") + format(value, fmt)

    def tone(value: float, higher_is_better: bool = True) -> str:
        if not value:
            return ""
        return "good" if (value > 0) == higher_is_better else "bad"

    deltas = [
        Delta("Passed", str(a.passed), str(b.passed), signed(b.passed - a.passed, "d"), tone(b.passed - a.passed)),
        Delta(
            "Failed", str(a.failed), str(b.failed), signed(b.failed - a.failed, "d"), tone(b.failed - a.failed, False)
        ),
        Delta(
            "Errors",
            str(a.errored),
            str(b.errored),
            signed(b.errored - a.errored, "d"),
            tone(b.errored - a.errored, False),
        ),
    ]
    if a.abstained or b.abstained:  # left out of every figure here: said, not hidden
        deltas.append(Delta("Need a judge model", str(a.abstained), str(b.abstained), "", ""))
    if a.pass_rate is not None and b.pass_rate is not None:
        points = round((b.pass_rate - a.pass_rate) * 100, 1)
        deltas.append(
            Delta("Pass rate", rate(a.pass_rate), rate(b.pass_rate), signed(points, "g") + " pts", tone(points))
        )
    if a.average is not None and b.average is not None:
        change = round(b.average - a.average, 2)
        deltas.append(
            Delta("Average score", f"{a.average:.1f}", f"{b.average:.1f}", signed(change, ".1f"), tone(change))
        )
    cost = round(b.cost - a.cost, 4)
    cost_text = ("+" if cost > 0 else "−" if cost < 0 else "") + f"${abs(cost):.4f}"
    deltas.append(Delta("Cost", f"${a.cost:.4f}", f"${b.cost:.4f}", cost_text, tone(cost, False)))
    if a.duration is not None and b.duration is not None:
        change = round(b.duration - a.duration, 1)
        deltas.append(
            Delta(
                "Duration",
                _seconds(a.duration),
                _seconds(b.duration),
                signed(change, ".1f") + " s",
                tone(change, False),
            )
        )
    return deltas


def _seconds(value: float) -> str:
    return f"{value:.1f} s" if value < 120 else f"{value / 60:.1f} min"

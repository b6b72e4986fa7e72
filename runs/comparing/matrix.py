"""Comparing up to five runs of one dataset at once: a matrix of cases x runs.

Runs are put in the order they were made; every run is paired with the first one by
runs.comparing.pairing (the same matching and outcome rule as the two-run comparison), and tested
against it. A row's change is the first run against the last: regressions first, then
fixes, then cases whose verdict moved in between, then the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runs.comparing.pairing import (
    CHANGE_FIX,
    CHANGE_REGRESSION,
    SCORED,
    CasePair,
    Pairing,
    case_change,
    match_cases,
    pairing_test,
)
from runs.comparing.stats import PairedTest
from runs.judging.configs import judges_differ
from runs.models import Run, RunCase
from runs.selectors import CASE_PASS, CaseOutcome, case_outcome_list

MAX_RUNS = 5
CHANGE_MOVED = "moved"  # same verdict at both ends, another one in between
CHANGE_STEADY = "steady"
CHANGE_PARTIAL = "partial"  # not scored in the first or the last run
_ORDER = [CHANGE_REGRESSION, CHANGE_FIX, CHANGE_MOVED, CHANGE_STEADY, CHANGE_PARTIAL]


@dataclass
class Cell:
    run_pk: int
    position: int
    number: int
    status: str
    score: float | None


@dataclass
class MatrixRow:
    question: str
    cells: list[Cell | None]
    change: str = CHANGE_STEADY

    @property
    def number(self) -> int:
        return next((cell.number for cell in self.cells if cell), 0)


@dataclass
class MatrixColumn:
    run: Run
    test: PairedTest | None = None  # against the first run (None for the first)
    judges: str | None = None  # set when its judge differs from the first run's


@dataclass
class Matrix:
    columns: list[MatrixColumn]
    rows: list[MatrixRow]
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def judges_differ(self) -> bool:
        return any(column.judges for column in self.columns)


def run_matrix(*, runs: list[Run]) -> Matrix:
    """Cases x runs (2 to MAX_RUNS runs of one dataset): about four queries per run."""
    runs = sorted(runs, key=lambda run: (run.created_at, run.pk))[:MAX_RUNS]
    cases = {run.pk: list(RunCase.objects.filter(run=run).order_by("position")) for run in runs}
    outcomes = {run.pk: {o.case_pk: o for o in case_outcome_list(run=run)} for run in runs}
    first = runs[0]
    rows = {
        case.pk: MatrixRow(case.question, [_cell(case, outcomes[first.pk].get(case.pk))]) for case in cases[first.pk]
    }
    columns = [MatrixColumn(first)]
    extra: list[MatrixRow] = []
    for index, run in enumerate(runs[1:], start=1):
        matched, only_first, only_run = match_cases(cases[first.pk], cases[run.pk])
        pairs = [CasePair(a, b, outcomes[first.pk].get(a.pk), outcomes[run.pk].get(b.pk)) for a, b in matched]
        for pair in pairs:
            rows[pair.case_a.pk].cells.append(_cell(pair.case_b, pair.outcome_b))
        for case in only_first:
            rows[case.pk].cells.append(None)
        for case in only_run:  # not in the first run: a row of its own, empty before this run
            cells: list[Cell | None] = [None] * index + [_cell(case, outcomes[run.pk].get(case.pk))]
            extra.append(MatrixRow(case.question, cells))
        for row in extra:
            row.cells += [None] * (index + 1 - len(row.cells))
        pairing = Pairing(first, run, pairs, only_first, only_run, outcomes[first.pk], outcomes[run.pk])
        columns.append(MatrixColumn(run, pairing_test(pairing), judges_differ(first, run)))
    every = list(rows.values()) + extra
    for row in every:
        row.change = _row_change(row.cells)
    every.sort(key=lambda row: (_ORDER.index(row.change), row.number))
    counts = {name: sum(1 for row in every if row.change == name) for name in _ORDER}
    return Matrix(columns, every, counts)


def _cell(case: RunCase, outcome: CaseOutcome | None) -> Cell:
    status = outcome.status if outcome else "skipped"
    return Cell(case.run_id, case.position, case.display_number, status, outcome.score if outcome else None)


def _row_change(cells: list[Cell | None]) -> str:
    first, last = cells[0], cells[-1]
    if first is None or last is None or first.status not in SCORED or last.status not in SCORED:
        return CHANGE_PARTIAL
    change = case_change(_as_outcome(first), _as_outcome(last))
    if change in (CHANGE_REGRESSION, CHANGE_FIX):
        return change
    verdicts = {cell.status == CASE_PASS for cell in cells if cell and cell.status in SCORED}
    return CHANGE_MOVED if len(verdicts) > 1 else CHANGE_STEADY


def _as_outcome(cell: Cell) -> CaseOutcome:
    return CaseOutcome(case_pk=0, position=cell.position, status=cell.status, score=cell.score)

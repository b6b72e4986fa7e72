"""One way to pair two runs' cases and to say what changed in each: used by the compare
page (runs.comparing.comparison), the verify panel (suggestions.selectors), the baseline box on the
run page and the CI gate, so none of them can disagree about a fix or a regression.

- **A case's outcome** is `runs.selectors.case_outcome_list` (one SQL query per run): a
  case passes only when every repeat passed, else the worst finished status wins (error
  over fail); smoke variants are left out. `runs.selectors.case_outcomes` is the same thing keyed by
  position, for callers that only need the scored cases.
- **Matching** goes from the most to the least specific key: the dataset case the
  snapshot came from, then the stable case id, then the question, then (for what is left
  over) the case's number in its dataset. A re-run or a verification numbers its copies
  from 0, and a dataset edited between two runs may have moved cases, so positions alone
  would pair the wrong cases.
- **The change** of a pair: regression (passed in A, not in B), fix, better, worse, same,
  or unscored when either side has no finished result (skipped by Stop, still running).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from runs.comparing.stats import DEFAULT_ALPHA, PairedTest, paired_test
from runs.models import Result, Run, RunCase
from runs.selectors import CASE_ERROR, CASE_FAIL, CASE_PASS, CaseOutcome, case_outcome_list

CHANGE_REGRESSION = "regression"  # passed in A, not in B
CHANGE_FIX = "fix"  # did not pass in A, passes in B
CHANGE_BETTER = "better"
CHANGE_WORSE = "worse"
CHANGE_SAME = "same"
CHANGE_UNSCORED = "unscored"  # not scored in one of the runs (skipped, running)
CHANGE_ONLY_A = "only_a"
CHANGE_ONLY_B = "only_b"
SCORED = (CASE_PASS, CASE_FAIL, CASE_ERROR)


@dataclass
class CasePair:
    case_a: RunCase
    case_b: RunCase
    outcome_a: CaseOutcome | None
    outcome_b: CaseOutcome | None

    @property
    def change(self) -> str:
        return case_change(self.outcome_a, self.outcome_b)

    @property
    def scored(self) -> bool:
        return self.change != CHANGE_UNSCORED


@dataclass
class Pairing:
    a: Run
    b: Run
    pairs: list[CasePair]
    only_a: list[RunCase]
    only_b: list[RunCase]
    outcomes_a: dict[int, CaseOutcome]  # by RunCase pk
    outcomes_b: dict[int, CaseOutcome]

    @property
    def shared(self) -> list[CasePair]:
        """The pairs scored in both runs: every figure of a comparison covers these only."""
        return [pair for pair in self.pairs if pair.scored]


def run_pairing(*, a: Run, b: Run) -> Pairing:
    """A's cases paired with B's, with both outcomes (four queries)."""
    cases_a = list(RunCase.objects.filter(run=a).order_by("position"))
    cases_b = list(RunCase.objects.filter(run=b).order_by("position"))
    outcomes_a = {o.case_pk: o for o in case_outcome_list(run=a)}
    outcomes_b = {o.case_pk: o for o in case_outcome_list(run=b)}
    matched, only_a, only_b = match_cases(cases_a, cases_b)
    pairs = [CasePair(x, y, outcomes_a.get(x.pk), outcomes_b.get(y.pk)) for x, y in matched]
    return Pairing(a, b, pairs, only_a, only_b, outcomes_a, outcomes_b)


def match_cases(
    cases_a: list[RunCase], cases_b: list[RunCase]
) -> tuple[list[tuple[RunCase, RunCase]], list[RunCase], list[RunCase]]:
    """(pairs in B's order, A's unmatched cases, B's unmatched cases)."""
    free_a = {case.pk: case for case in cases_a}
    pairs: dict[int, RunCase] = {}  # B's pk -> A's case

    def claim(key: Any) -> None:
        index: dict[Any, list[RunCase]] = {}
        for case in free_a.values():
            if (value := key(case)) not in (None, ""):
                index.setdefault(value, []).append(case)
        for case in cases_b:
            if case.pk in pairs or (value := key(case)) in (None, ""):
                continue
            if index.get(value):
                match = index[value].pop(0)
                pairs[case.pk] = match
                del free_a[match.pk]

    claim(lambda case: case.source_case_id)
    claim(lambda case: case.case_id)
    claim(lambda case: case.question.strip())
    claim(lambda case: case.display_number)
    matched = [(pairs[case.pk], case) for case in cases_b if case.pk in pairs]
    return matched, list(free_a.values()), [case for case in cases_b if case.pk not in pairs]


def case_change(a: CaseOutcome | None, b: CaseOutcome | None) -> str:
    if a is None or b is None or a.status not in SCORED or b.status not in SCORED:
        return CHANGE_UNSCORED
    passed_a, passed_b = a.status == CASE_PASS, b.status == CASE_PASS
    if passed_a and not passed_b:
        return CHANGE_REGRESSION
    if passed_b and not passed_a:
        return CHANGE_FIX
    if a.score is not None and b.score is not None and a.score != b.score:
        return CHANGE_BETTER if b.score > a.score else CHANGE_WORSE
    return CHANGE_SAME


def pairing_test(
    pairing: Pairing, *, alpha: float = DEFAULT_ALPHA, exclude: set[int] | frozenset[int] = frozenset()
) -> PairedTest:
    """The paired test over the shared cases (two queries for the repeats' scores).

    `exclude` holds dataset case ids (RunCase.source_case_id) left out, such as flaky ones.
    """
    shared = [pair for pair in pairing.shared if pair.case_b.source_case_id not in exclude]
    scores_a = _repeat_scores(pairing.a) if shared else {}
    scores_b = _repeat_scores(pairing.b) if shared else {}
    rows = [
        (
            _passed(pair.outcome_a),
            _passed(pair.outcome_b),
            scores_a.get(pair.case_a.pk, []),
            scores_b.get(pair.case_b.pk, []),
        )
        for pair in shared
    ]
    return paired_test(
        rows, alpha=alpha, label_a=run_label(pairing.a, pairing.b), label_b=run_label(pairing.b, pairing.a)
    )


def run_label(run: Run, other: Run) -> str:
    """How a sentence names the run: its version ("v5"), or "run #12" when both tested the same version."""
    if run.agent_version_id != other.agent_version_id:
        return f"v{run.agent_version.number}"
    return f"run #{run.pk}"


def _passed(outcome: CaseOutcome | None) -> bool:
    return outcome is not None and outcome.status == CASE_PASS


def _repeat_scores(run: Run) -> dict[int, list[float]]:
    """Every scored repeat of every case of the run (by RunCase pk): one narrow query, no IN list."""
    scores: dict[int, list[float]] = defaultdict(list)
    rows = Result.objects.filter(
        run=run, variant=0, status__in=Result.FINISHED_STATUSES, score__isnull=False
    ).values_list("case_id", "score")
    for case_pk, score in rows.order_by("case_id", "repeat"):
        if score is not None:
            scores[case_pk].append(float(score))
    return dict(scores)

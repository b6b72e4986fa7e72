"""The coverage view's reads: each rule of an agent version with its cases and their verdicts.

datasets.coverage says which cases exercise which rules; this module adds what runs know:
each case's latest verdict over the dataset's runs, or its verdict in one chosen run (a
verify run, say), and which rules the version added or changed since the version before
it. Rules with no case come first, then the least tested.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from agents.models import AgentVersion
from agents.rules import AgentRule, rules_changed
from datasets.coverage import Coverage, coverage_for, latest_rule_map
from datasets.models import Dataset, RuleMap, TestCase
from runs.models import Result, Run

# The latest verdicts come from this many of the dataset's newest finished runs.
RECENT_RUNS = 30
# An abstention ("Needs a judge model") is shown as such, never as "not run" nor as a verdict.
VERDICT_STATUSES = (Result.Status.PASS, Result.Status.FAIL, Result.Status.ERROR, Result.Status.ABSTAINED)


@dataclass
class CaseVerdict:
    case: TestCase
    number: int
    verdict: str  # "pass" | "fail" | "error" | "abstained" | "" (not run)


@dataclass
class RuleRow:
    rule: AgentRule
    cases: list[CaseVerdict]
    changed: bool
    counts: Counter[str] = field(default_factory=Counter)

    @property
    def covered(self) -> bool:
        return bool(self.cases)


@dataclass
class CoverageView:
    version: AgentVersion
    previous: AgentVersion | None
    coverage: Coverage
    rows: list[RuleRow]
    run: Run | None
    runs: list[Run]
    rule_map: RuleMap | None  # the newest map of any status (a running one is shown as such)
    uncovered_cases: int

    @property
    def uncovered(self) -> list[AgentRule]:
        return [row.rule for row in self.rows if not row.covered]

    @property
    def covered_share(self) -> float | None:
        return (len(self.rows) - len(self.uncovered)) / len(self.rows) if self.rows else None


def coverage_view(*, dataset: Dataset, version: AgentVersion, run: Run | None = None) -> CoverageView:
    cases = list(dataset.cases.order_by("position", "id"))
    numbers = {case.pk: number for number, case in enumerate(cases, start=1)}
    coverage = coverage_for(dataset=dataset, version=version, cases=cases)
    verdicts = _run_verdicts(run) if run is not None else _latest_verdicts(dataset)
    previous = version.agent.versions.filter(number__lt=version.number).order_by("-number").first()
    changed = rules_changed(version, previous) if previous is not None else set()
    by_pk = {case.pk: case for case in cases}
    rows = []
    for rule in coverage.rules:
        pks = coverage.cases_by_rule.get(rule.id, [])
        row = RuleRow(
            rule=rule,
            cases=[CaseVerdict(by_pk[pk], numbers[pk], verdicts.get(pk, "")) for pk in pks if pk in by_pk],
            changed=rule.id in changed,
        )
        row.counts.update(item.verdict or "not_run" for item in row.cases)
        rows.append(row)
    order = {rule.id: index for index, rule in enumerate(coverage.rules)}
    rows.sort(key=lambda row: (row.covered, len(row.cases), order[row.rule.id]))
    return CoverageView(
        version=version,
        previous=previous,
        coverage=coverage,
        rows=rows,
        run=run,
        runs=_runs_of(dataset, version),
        rule_map=latest_rule_map(dataset=dataset, version=version),
        uncovered_cases=sum(1 for case in cases if not coverage.links.get(case.pk)),
    )


def _latest_verdicts(dataset: Dataset) -> dict[int, str]:
    """source case pk -> the verdict of its newest scored result over the dataset's recent runs."""
    run_ids = list(
        Run.objects.filter(dataset=dataset, status__in=(Run.Status.COMPLETED, Run.Status.STOPPED))
        .order_by("-created_at", "-id")
        .values_list("pk", flat=True)[:RECENT_RUNS]
    )
    rows = (
        Result.objects.filter(run_id__in=run_ids, status__in=VERDICT_STATUSES, variant=0, repeat=0)
        .order_by("-run__created_at", "-run_id")
        .values_list("case__source_case_id", "status")
    )
    verdicts: dict[int, str] = {}
    for case_pk, status in rows:
        if case_pk is not None:
            verdicts.setdefault(case_pk, status)
    return verdicts


def _run_verdicts(run: Run) -> dict[int, str]:
    rows = Result.objects.filter(run=run, variant=0, repeat=0).values_list("case__source_case_id", "status")
    return {pk: status if status in VERDICT_STATUSES else "" for pk, status in rows if pk is not None}


def _runs_of(dataset: Dataset, version: AgentVersion) -> list[Run]:
    """The finished runs of this dataset by this version, newest first: a verify run among them."""
    return list(
        Run.objects.filter(
            dataset=dataset, agent_version=version, status__in=(Run.Status.COMPLETED, Run.Status.STOPPED)
        ).order_by("-created_at", "-id")[:20]
    )


def coverage_summary(view: CoverageView) -> dict[str, Any]:
    """Figures for the page head (and the tests): rules, covered, changed, cases tied to no rule."""
    return {
        "rules": len(view.rows),
        "covered": sum(1 for row in view.rows if row.covered),
        "changed": sum(1 for row in view.rows if row.changed),
        "uncovered_cases": view.uncovered_cases,
    }

"""The CI gate's decision (`manage.py evalrun`): whether a finished run may ship.

    exit 2  the run failed or was stopped: no evidence either way, never a pass
    exit 1  the pass rate is under the threshold, or (with a baseline and
            `fail_on="regression"`) the paired test says the run is significantly worse
            than the baseline at `alpha`: more cases broke than got fixed, and the exact
            McNemar p-value is under alpha
    exit 0  otherwise; a difference the test cannot tell from noise does not fail

With `ignore_flaky`, the dataset's flaky cases (TestCase.is_flaky) are left out of the
pass rate and the test, and listed, so an unstable case does not block a release.
The pass rate counts every repeat of every case as written (smoke variants apart).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Q

from datasets.models import TestCase
from runs.judging import judges_differ
from runs.models import Result, Run
from runs.pairing import pairing_test, run_pairing
from runs.stats import DEFAULT_ALPHA

EXIT_PASSED, EXIT_FAILED, EXIT_ERROR = 0, 1, 2
FAIL_ON_REGRESSION = "regression"


@dataclass
class GateDecision:
    code: int
    lines: list[str]  # what the command prints, the reason last
    data: dict[str, Any] = field(default_factory=dict)  # the JSON output's figures

    @property
    def reason(self) -> str:
        return self.lines[-1]


def gate_decide(
    *,
    run: Run,
    threshold: float | None,
    baseline: Run | None = None,
    fail_on: str = "",
    alpha: float = DEFAULT_ALPHA,
    ignore_flaky: bool = False,
    unfinished: str = "",
) -> GateDecision:
    """`unfinished`: why the run cannot be gated on (it failed or was stopped), from the command."""
    flaky = _flaky_cases(run) if ignore_flaky else []
    excluded = {case.pk for case in flaky}
    passed, total = _pass_count(run, excluded)
    rate = passed / total if total else 0.0
    lines = [f"Results: {passed}/{total} passed ({100 * rate:.1f}%)"]
    data: dict[str, Any] = {"passed_counted": passed, "total_counted": total} if ignore_flaky else {}
    if ignore_flaky:
        lines.append(_flaky_line(flaky))
        data["ignored_flaky"] = {
            "count": len(flaky),
            "cases": [{"id": c.pk, "case_id": c.case_id, "question": c.question[:200]} for c in flaky],
        }
    if unfinished:
        # A run that did not run all its cases is no evidence either way: never a pass.
        return GateDecision(EXIT_ERROR, [*lines, unfinished], {**data, "pass_rate": round(rate, 4)})
    worse = False
    if baseline is not None:
        test = pairing_test(run_pairing(a=baseline, b=run), alpha=alpha, exclude=excluded)
        judges = judges_differ(baseline, run)
        lines.append(f"Against baseline run #{baseline.pk}: {test.sentence}")
        lines.append(test.interval_sentence)
        if judges:
            lines.append(f"{judges} The changes may come from the judge, not the agent.")
        worse = fail_on == FAIL_ON_REGRESSION and test.significantly_worse
        data.update(baseline_id=baseline.pk, fail_on=fail_on or None, test=test.as_dict(), judges_differ=judges)
    below = threshold is not None and rate < threshold
    if worse and below:
        code, verdict = (
            EXIT_FAILED,
            f"Significantly worse than the baseline, and below the threshold ({_pct(threshold)}).",
        )
    elif worse and baseline is not None:
        code, verdict = EXIT_FAILED, f"Significantly worse than baseline run #{baseline.pk} at alpha = {alpha:g}."
    elif below:
        code, verdict = EXIT_FAILED, f"Below the threshold: {100 * rate:.1f}% < {_pct(threshold)}."
    elif threshold is not None:
        code, verdict = EXIT_PASSED, f"Passed: {100 * rate:.1f}% meets the threshold of {_pct(threshold)}."
    elif fail_on == FAIL_ON_REGRESSION:  # a baseline without a threshold
        code, verdict = EXIT_PASSED, "Passed: not significantly worse than the baseline."
    else:
        code, verdict = EXIT_PASSED, "Passed: no threshold, and the baseline is compared for information only."
    data["pass_rate"] = round(rate, 4)
    return GateDecision(code, [*lines, verdict], data)


def _pct(threshold: float | None) -> str:
    return f"{100 * (threshold or 0):.1f}%"


def _pass_count(run: Run, excluded: set[int]) -> tuple[int, int]:
    results = Result.objects.filter(run=run, variant=0)
    if excluded:
        results = results.exclude(case__source_case_id__in=excluded)
    counts = results.aggregate(total=Count("id"), passed=Count("id", filter=Q(status=Result.Status.PASS)))
    return counts["passed"], counts["total"]


def _flaky_cases(run: Run) -> list[TestCase]:
    if run.dataset_id is None:
        return []
    cases = TestCase.objects.filter(dataset_id=run.dataset_id).filter(TestCase.flaky_filter())
    return list(cases.order_by("position", "id"))


def _flaky_line(flaky: list[TestCase]) -> str:
    if not flaky:
        return "Ignoring flaky cases: none in this dataset."
    listed = "; ".join(
        f"{case.case_id or f'#{case.position + 1}'} “{case.question[:60]}” ({case.flips}/{case.flip_chances} flips)"
        for case in flaky
    )
    return f"Ignoring {len(flaky)} flaky case{'s' if len(flaky) != 1 else ''}: {listed}."

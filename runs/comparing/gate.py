"""The CI gate's decision (`manage.py evalrun`): whether a finished run may ship.

    exit 2  the run failed or was stopped, or the run's judge failed preflight (unless
            `allow_failed_preflight`): no evidence either way, never a pass
    exit 1  the pass rate is under the threshold, or (with a baseline and
            `fail_on="regression"`) the paired test says the run is significantly worse
            than the baseline at `alpha`: more cases broke than got fixed, and the exact
            McNemar p-value is under alpha
    exit 0  otherwise; a difference the test cannot tell from noise does not fail
    exit 4  nothing to gate on: every result needs a judge model (the offline scorer abstained
            on all), or `ignore_flaky` left every case out (each one is flaky), so there is no
            pass rate and no test; a pipeline decides what that means for it

With `ignore_flaky`, the dataset's flaky cases (TestCase.is_flaky) are left out of the
pass rate and the test, and listed, so an unstable case does not block a release.
The pass rate counts every repeat of every case as written (smoke variants apart), except
the results the offline scorer abstained on ("Needs a judge model"): neither pass nor fail,
they are counted and named beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Q

from datasets.models import TestCase
from runs.comparing.pairing import pairing_test, run_pairing
from runs.comparing.stats import DEFAULT_ALPHA
from runs.judging.configs import judges_differ
from runs.models import Result, Run

EXIT_PASSED, EXIT_FAILED, EXIT_ERROR = 0, 1, 2
PREFLIGHT_LINE = "The judge failed preflight: its scores are not trustworthy."
EXIT_NOTHING_TO_GATE = 4
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
    allow_failed_preflight: bool = False,
) -> GateDecision:
    """`unfinished`: why the run cannot be gated on (it failed or was stopped), from the command."""
    flaky = _flaky_cases(run) if ignore_flaky else []
    excluded = {case.pk for case in flaky}
    passed, total, abstained = _pass_count(run, excluded)
    rate = passed / total if total else 0.0
    lines = [f"Results: {passed}/{total} passed ({100 * rate:.1f}%)"]
    data: dict[str, Any] = {"passed_counted": passed, "total_counted": total} if ignore_flaky else {}
    data["abstained"] = abstained
    if abstained:
        lines.append(
            f"{abstained} result{'s' if abstained != 1 else ''} need{'s' if abstained == 1 else ''} a judge model "
            "(the expected answer describes behaviour the offline scorer cannot check): left out of the pass rate."
        )
    if run.judge_failed_preflight:
        lines.append(PREFLIGHT_LINE)
        if not (unfinished or allow_failed_preflight):
            unfinished = "Not gated: the judge failed preflight. Pass --allow-failed-preflight to gate on its scores."
    if abstained and not total and not unfinished:
        reason = (
            "Nothing to gate on: every result needs a judge model. Configure a judge model "
            "(EVALSITE_JUDGE_MODEL) and run again, or write factual expected answers."
        )
        return GateDecision(
            EXIT_NOTHING_TO_GATE, [*lines, reason], {**data, "pass_rate": None, "nothing_to_gate": True}
        )
    if ignore_flaky:
        lines.append(_flaky_line(flaky))
        data["ignored_flaky"] = {
            "count": len(flaky),
            "cases": [{"id": c.pk, "case_id": c.case_id, "question": c.question[:200]} for c in flaky],
        }
    if unfinished:
        # A run that did not run all its cases is no evidence either way: never a pass.
        return GateDecision(EXIT_ERROR, [*lines, unfinished], {**data, "pass_rate": round(rate, 4)})
    if ignore_flaky and not total:
        return _nothing_to_gate(flaky, lines[1:], data)
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


def _nothing_to_gate(flaky: list[TestCase], lines: list[str], data: dict[str, Any]) -> GateDecision:
    """Every case left out as flaky: a pass rate of 0/0 is no figure, neither a pass nor a fail."""
    count = len(flaky)
    reason = (
        f"Nothing to gate on: all {count} case{'s' if count != 1 else ''} of this dataset are flaky, and "
        "--ignore-flaky leaves them out. Make some cases stable, or gate without --ignore-flaky."
    )
    return GateDecision(
        EXIT_NOTHING_TO_GATE,
        ["Results: no case left to count.", *lines, reason],
        {**data, "pass_rate": None, "nothing_to_gate": True},
    )


def _pct(threshold: float | None) -> str:
    return f"{100 * (threshold or 0):.1f}%"


def _pass_count(run: Run, excluded: set[int]) -> tuple[int, int, int]:
    """(passed, counted, abstained): abstentions are neither pass nor fail, so not counted."""
    results = Result.objects.filter(run=run, variant=0)
    if excluded:
        results = results.exclude(case__source_case_id__in=excluded)
    abstain = Q(status=Result.Status.ABSTAINED)
    counts = results.aggregate(
        total=Count("id", filter=~abstain),
        passed=Count("id", filter=Q(status=Result.Status.PASS)),
        abstained=Count("id", filter=abstain),
    )
    return counts["passed"], counts["total"], counts["abstained"]


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

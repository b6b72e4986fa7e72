"""What the Verify result says when the change helped but the exact test cannot yet tell it from chance."""

import pytest

from runs.comparing.stats import paired_test
from suggestions.selectors import VerifyComparison, fixes_needed


@pytest.mark.parametrize(("breaks", "needed"), [(0, 6), (1, 8), (2, 10)])
def test_the_fewest_fixes_the_exact_test_calls_significant(breaks, needed):
    assert fixes_needed(breaks=breaks, alpha=0.05) == needed


def _comparison(fixes: int, breaks: int, same: int, judges: str | None = None) -> VerifyComparison:
    rows = [(False, True, [2.0], [9.0])] * fixes + [(True, False, [9.0], [2.0])] * breaks
    rows += [(True, True, [9.0], [9.0])] * same
    return VerifyComparison(
        run=None, parent=None, compared=len(rows), total=len(rows), sampled_passing=0, failing_before=fixes,
        passed_before=breaks + same, passed_after=fixes + same, failed_after=breaks, fixes=[], regressions=[],
        average_before=None, average_after=None, compare_url="", parent_total=len(rows),
        test=paired_test(rows), judges=judges,
    )  # fmt: skip


def test_three_fixes_on_ten_cases_are_named_a_good_sign_not_proof():
    assert _comparison(3, 0, 7).evidence == (
        "3 fixes and no regressions on 10 cases is a good sign, but not yet proof: a change that made no "
        "difference would still split the changed verdicts this unevenly about 1 time in 4 (p = 0.25). The exact "
        "test counts the cases whose verdict changed; with no regressions it needs at least 6 fixes to call the "
        "change real (p < 0.05). More cases that exercise what changed would show it; running each case more "
        "times makes every verdict steadier, but the test still counts cases."
    )


def test_one_regression_raises_the_bar():
    assert "with 1 regression it needs at least 8 fixes" in _comparison(4, 1, 5).evidence


@pytest.mark.parametrize(
    ("fixes", "breaks", "judges"), [(6, 0, None), (1, 1, None), (0, 2, None), (3, 0, "Another judge scored it.")]
)
def test_nothing_is_said_when_the_test_is_significant_the_change_did_not_help_or_the_judges_differ(
    fixes, breaks, judges
):
    assert _comparison(fixes, breaks, 4, judges).evidence == ""

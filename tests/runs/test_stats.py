"""The paired tests (runs.comparing.stats) against values computed by hand."""

import pytest

from runs.comparing.stats import bootstrap_interval, mcnemar_exact, paired_test


@pytest.mark.parametrize(
    ("fixes", "breaks", "expected"),
    [
        (6, 1, 16 / 128),  # 2 * (C(7,0) + C(7,1)) / 2^7
        (1, 6, 16 / 128),  # symmetric
        (0, 5, 2 / 32),  # 2 * C(5,0) / 2^5
        (0, 6, 2 / 64),
        (1, 9, 22 / 1024),  # 2 * (1 + 10) / 2^10
        (3, 3, 1.0),  # a tie: 2 * 42 / 64 > 1, capped
        (1, 0, 1.0),  # one discordant case says nothing
        (0, 0, 1.0),  # no discordant case at all
    ],
)
def test_mcnemar_exact_matches_the_binomial_by_hand(fixes, breaks, expected):
    assert mcnemar_exact(fixes, breaks) == pytest.approx(expected)


def test_bootstrap_of_identical_differences_is_that_difference():
    assert bootstrap_interval([([5.0], [7.0])] * 8) == (2.0, 2.0)


def test_bootstrap_of_two_runs_that_score_the_same_is_zero():
    assert bootstrap_interval([([s], [s]) for s in (1.0, 4.0, 9.0)]) == (0.0, 0.0)


def test_bootstrap_interval_matches_the_resampling_distribution():
    # Differences 0, 0, 0, 3: the resampled mean is 0.75 k, k ~ Binomial(4, 1/4).
    # P(k = 0) = 0.316 > 2.5%, so the low end is 0; P(k >= 3) = 0.051 > 2.5% but
    # P(k = 4) = 0.004 < 2.5%, so the high end is 0.75 * 3 = 2.25.
    pairs = [([5.0], [5.0])] * 3 + [([4.0], [7.0])]
    assert bootstrap_interval(pairs) == (0.0, 2.25)


def test_bootstrap_resamples_the_repeats_of_a_case():
    # One case, B's repeats 5 and 7: their resampled mean is 5, 6 or 7 (1/4, 1/2, 1/4).
    assert bootstrap_interval([([5.0, 5.0], [5.0, 7.0])]) == (0.0, 2.0)


def test_bootstrap_is_seeded():
    pairs = [([float(n % 7)], [float(n % 5)]) for n in range(30)]
    assert bootstrap_interval(pairs) == bootstrap_interval(pairs)


def test_bootstrap_without_scores_has_no_interval():
    assert bootstrap_interval([]) is None
    assert bootstrap_interval([([], [3.0])]) is None


def _case(a: bool, b: bool, score_a: float = 5.0, score_b: float = 5.0):
    return (a, b, [score_a], [score_b])


def test_paired_test_in_plain_words_when_not_significant():
    cases = [_case(False, True)] * 6 + [_case(True, False)] + [_case(True, True)] * 3
    test = paired_test(cases, label_a="v4", label_b="v5")
    assert (test.fixes, test.breaks, test.cases) == (6, 1, 10)
    assert test.p_value == pytest.approx(0.125)
    assert not test.significant
    assert (
        test.sentence == "v5 fixes 6 and breaks 1 case of 10; not distinguishable from noise with 10 cases (p = 0.12)."
    )


def test_paired_test_in_plain_words_when_significant_and_worse():
    cases = [_case(True, False, 8.0, 3.0)] * 9 + [_case(False, True, 3.0, 8.0)] + [_case(True, True)] * 5
    test = paired_test(cases, label_a="v4", label_b="v5")
    assert test.p_value == pytest.approx(22 / 1024)
    assert test.significant and test.significantly_worse and not test.significantly_better
    assert test.sentence == "v5 fixes 1 and breaks 9 cases of 15; this is unlikely to be chance (p = 0.021)."
    assert test.mean_difference == round((9 * -5 + 5) / 15, 2)


def test_paired_test_of_all_equal_runs():
    test = paired_test([_case(True, True, 9.0, 9.0), _case(False, False, 2.0, 2.0)], label_a="v1", label_b="v2")
    assert test.p_value == 1.0 and not test.significant
    assert test.mean_difference == 0.0 and test.interval == (0.0, 0.0)
    assert test.sentence == "v2 passes and fails the same cases as v1: no difference over 2 cases."
    assert test.interval_sentence.startswith("Mean score change 0.0 (95% interval 0.0 to 0.0")


def test_paired_test_with_no_shared_case():
    test = paired_test([])
    assert test.sentence == "No case was scored in both runs: there is nothing to compare."
    assert test.interval is None and not test.significant


def test_word_diff_marks_removed_and_added_words():
    from runs.comparing.worddiff import word_diff

    assert word_diff("Refunds within 30 days.", "Refunds within 14 days.") == [
        ("equal", "Refunds within "),
        ("del", "30 "),
        ("ins", "14 "),
        ("equal", "days."),
    ]
    assert word_diff("same words", "same\nwords") == [("equal", "same\nwords")]
    assert word_diff("", "new") == [("ins", "new")]

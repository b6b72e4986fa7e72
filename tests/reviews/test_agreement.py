"""The agreement math against figures worked out by hand."""

import pytest

from reviews.agreement import Pair, agreement, cohen_kappa, confusion_matrix, reviewer_agreement


def _pairs(cells: dict[tuple[bool, bool], int], score: tuple[float | None, float | None] = (None, None)) -> list[Pair]:
    return [Pair(j, score[0], r, score[1]) for (j, r), n in cells.items() for _ in range(n)]


def test_a_mixed_table_gives_the_hand_computed_kappa():
    # judge pass & reviewer pass 4, pass/fail 2, fail/pass 1, fail/fail 3.
    # po = 7/10; judge passes 6, reviewer passes 5: pe = (6*5 + 4*5)/100 = 0.5; kappa = 0.2/0.5 = 0.4.
    pairs = _pairs({(True, True): 4, (True, False): 2, (False, True): 1, (False, False): 3})

    figures = agreement(pairs)

    assert figures.confusion.as_dict() == {
        "judge_pass_reviewer_pass": 4,
        "judge_pass_reviewer_fail": 2,
        "judge_fail_reviewer_pass": 1,
        "judge_fail_reviewer_fail": 3,
    }
    assert (figures.reviewed, figures.agreed) == (10, 7)
    assert figures.rate == pytest.approx(0.7)
    assert figures.kappa == pytest.approx(0.4)


def test_all_agreeing_with_both_verdicts_is_kappa_one():
    # po = 1; pe = (3*3 + 2*2)/25 = 0.52; kappa = 0.48/0.48 = 1.
    figures = agreement(_pairs({(True, True): 3, (False, False): 2}))
    assert figures.rate == 1.0
    assert figures.kappa == pytest.approx(1.0)


def test_all_agreeing_on_one_verdict_leaves_kappa_undefined():
    # Everyone said pass: po = pe = 1, kappa is 0/0. Reported as None, never as 0 or 1.
    figures = agreement(_pairs({(True, True): 5}))
    assert figures.rate == 1.0
    assert figures.agreed == 5
    assert figures.kappa is None
    assert figures.confusion.pass_pass == 5 and figures.confusion.total == 5


def test_always_disagreeing_is_kappa_minus_one():
    # po = 0; judge passes 2 of 4, reviewer passes 2 of 4: pe = (2*2 + 2*2)/16 = 0.5; kappa = -0.5/0.5.
    figures = agreement(_pairs({(True, False): 2, (False, True): 2}))
    assert figures.rate == 0.0
    assert figures.kappa == pytest.approx(-1.0)


def test_worse_than_chance_but_not_opposite():
    # pp 1, pf 3, fp 0, ff 0: po = 1/4; judge passes 4, reviewer passes 1: pe = (4*1 + 0*3)/16 = 0.25;
    # kappa = (0.25 - 0.25)/0.75 = 0.
    assert cohen_kappa(confusion_matrix(_pairs({(True, True): 1, (True, False): 3}))) == pytest.approx(0.0)


def test_no_pairs_means_no_figures():
    figures = agreement([])
    assert (figures.reviewed, figures.rate, figures.kappa, figures.mae) == (0, None, None, None)


def test_the_mean_absolute_score_difference_skips_pairs_without_a_reviewer_score():
    pairs = [
        Pair(True, 9.0, True, 9.0),
        Pair(True, 8.0, False, 3.0),
        Pair(False, 4.0, True, 7.0),
        Pair(True, 7.5, False, None),
    ]
    figures = agreement(pairs)
    # |9-9| + |8-3| + |4-7| = 0 + 5 + 3 over 3 scored pairs.
    assert figures.mae == pytest.approx(8 / 3)
    assert figures.scored_pairs == 3
    assert figures.reviewed == 4


def test_agreement_between_reviewers_counts_pairs_of_reviews():
    # A result reviewed once says nothing; [T, T] is 1 agreeing pair; [T, F, F] is 3 pairs, 1 agreeing.
    figures = reviewer_agreement([[True, True], [True, False, False], [True]])
    assert (figures.results, figures.pairs, figures.agreed) == (2, 4, 2)
    assert figures.rate == 0.5
    assert reviewer_agreement([[True]]).rate is None

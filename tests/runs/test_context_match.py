"""Retrieval context by containment: a labelled set of expected passages against what an agent
retrieved (verbatim inside, paraphrase, partial, absent, split across two passages)."""

import pytest

from runs.judging.context_match import match_context, match_passage, normalised
from runs.judging.scoring import context_row

REFUNDS = (
    "Refunds: a new subscription can be refunded in full within 30 days of the first payment. "
    "After 30 days, refunds are prorated for annual plans only. Monthly plans are refundable within 14 days."
)
SUPPORT = (
    "Support hours: our team answers chat and email Monday to Friday, 8:00 to 18:00 CET. "
    "Phone support is for Enterprise customers only."
)
SECURITY = (
    "Security: passwords must be at least 12 characters. Two-factor authentication is required for admins. "
    "Sessions expire after 8 hours of inactivity."
)
SHIPPING = "Shipping is free on orders over $50. Standard delivery takes 3 to 5 business days."

# (expected passage, retrieved passages, found?, how)
LABELLED = [
    # verbatim inside a longer passage
    (
        "Refunds: a new subscription can be refunded in full within 30 days of the first payment.",
        [REFUNDS],
        True,
        "contained",
    ),
    ("Monthly plans are refundable within 14 days.", [SUPPORT, REFUNDS], True, "contained"),
    ("Phone support is for Enterprise customers only.", [SUPPORT], True, "contained"),
    ("Sessions expire after 8 hours of inactivity.", [SHIPPING, SECURITY], True, "contained"),
    ("Shipping is free on orders over $50.", [SHIPPING], True, "contained"),
    # verbatim apart from case, punctuation and spacing
    (
        "refunds:  a new subscription can be refunded in full within 30 days of the first payment",
        [REFUNDS],
        True,
        "contained",
    ),
    ("PHONE SUPPORT IS FOR ENTERPRISE CUSTOMERS ONLY", [SUPPORT], True, "contained"),
    ("Two-factor authentication is required for admins", [SECURITY], True, "contained"),
    ("Standard delivery takes 3 to 5 business days", [SECURITY, SHIPPING], True, "contained"),
    (
        "Shipping is free on orders over $50.\nStandard delivery takes 3 to 5 business days.",
        [SHIPPING],
        True,
        "contained",
    ),
    # the whole retrieved passage expected
    (REFUNDS, [REFUNDS], True, "contained"),
    (SUPPORT, [SECURITY, SUPPORT], True, "contained"),
    # paraphrases that keep the content words
    ("A new subscription is refundable in full within 30 days of the first payment.", [REFUNDS], True, "sentences"),
    ("Enterprise customers only get phone support.", [SUPPORT], True, "sentences"),
    ("Passwords need at least 12 characters.", [SECURITY], True, "sentences"),
    ("Orders over $50 ship free.", [SHIPPING], True, "sentences"),
    # split across two retrieved passages
    (
        "Monthly plans are refundable within 14 days. Phone support is for Enterprise customers only.",
        [REFUNDS, SUPPORT],
        True,
        "sentences",
    ),
    (
        "Passwords must be at least 12 characters. Shipping is free on orders over $50.",
        [SECURITY, SHIPPING],
        True,
        "sentences",
    ),
    (
        "Sessions expire after 8 hours of inactivity. Standard delivery takes 3 to 5 business days. "
        "Monthly plans are refundable within 14 days.",
        [SECURITY, SHIPPING, REFUNDS],
        True,
        "sentences",
    ),
    # partial: some sentences there, not enough of them
    (
        "Monthly plans are refundable within 14 days. Refunds are paid back in store credit.",
        [REFUNDS],
        False,
        "partial",
    ),
    (
        "Phone support is for Enterprise customers only. Phone support runs 24/7 on weekends.",
        [SUPPORT],
        False,
        "partial",
    ),
    (
        "Passwords must be at least 12 characters. Passwords are rotated every 90 days. Admins use hardware keys.",
        [SECURITY],
        False,
        "partial",
    ),
    (
        "Shipping is free on orders over $50. Express delivery arrives the next day.",
        [SHIPPING, SUPPORT],
        False,
        "partial",
    ),
    # absent: another topic, or the same words with another figure
    ("Refunds are available within 60 days of purchase.", [SUPPORT], False, "absent"),
    ("Data is stored in the EU region.", [REFUNDS, SUPPORT, SECURITY], False, "absent"),
    ("Phone support is available around the clock for everyone.", [SHIPPING], False, "absent"),
    ("Monthly plans are refundable within 30 days.", [SUPPORT], False, "absent"),
    ("Shipping is free on orders over $20.", [SHIPPING], False, "absent"),
    ("Sessions expire after 2 hours of inactivity.", [SECURITY], False, "absent"),
    ("The API rate limit is 100 requests per minute.", [], False, "absent"),
    ("Chat is answered on weekends.", [REFUNDS], False, "absent"),
    ("Passwords must be at least 16 characters.", [SECURITY], False, "absent"),
]


def test_the_labelled_set_is_large_enough_and_covers_every_kind():
    assert len(LABELLED) >= 30
    assert {how for *_, how in LABELLED} == {"contained", "sentences", "partial", "absent"}


@pytest.mark.parametrize(("expected", "retrieved", "found", "how"), LABELLED)
def test_each_labelled_pair_is_matched_as_labelled(expected, retrieved, found, how):
    match = match_passage(expected, retrieved)
    assert (match.found, match.how) == (found, how)


def test_normalising_drops_case_punctuation_and_spacing():
    assert normalised("Refunds:  a NEW plan,\nwithin 30 days.") == "refunds a new plan within 30 days"


def test_a_correctly_retrieved_passage_inside_a_longer_one_is_a_full_match():
    row = context_row(
        [REFUNDS], ["Refunds: a new subscription can be refunded in full within 30 days of the first payment."]
    )
    assert (row.score, row.passed) == (1.0, True)
    assert row.detail == (
        "1 of 1 expected passage(s) found in the 1 retrieved: expected passage 1 is inside retrieved passage #1."
    )


def test_the_detail_says_where_each_expected_passage_was_found_or_not():
    row = context_row(
        [SHIPPING, REFUNDS, SUPPORT],
        [
            "Monthly plans are refundable within 14 days. Phone support is for Enterprise customers only.",
            "Monthly plans are refundable within 14 days. Refunds are paid back in store credit.",
            "Data is stored in the EU region.",
        ],
    )
    assert row.passed is False
    assert row.score == round((1 + 0.5 + 0) / 3, 3)
    assert row.detail == (
        "1 of 3 expected passage(s) found in the 3 retrieved: "
        "expected passage 1 is covered by retrieved passages #2, #3 (100 % of its sentences); "
        "expected passage 2 is only partly there (50 % of its sentences, in retrieved passage #2); "
        "expected passage 3 is in no retrieved passage."
    )


def test_no_retrieved_context_says_so():
    row = context_row([], ["Shipping is free on orders over $50."])
    assert row.passed is False
    assert row.detail == "The agent returned no retrieval context; 1 passage(s) were expected."


def test_blank_expected_passages_are_left_out():
    assert [m.expected for m in match_context([SHIPPING], ["", "  ", "Orders over $50 ship free."])] == [
        "Orders over $50 ship free."
    ]

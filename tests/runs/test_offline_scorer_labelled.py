"""The offline reference scorer against a labelled set: it agrees with every label it gives a
verdict on, and abstains ("Needs a judge model") on every expectation that describes behaviour.

Each row is (expected answer, actual answer, label): "pass" and "fail" are what a careful reviewer
would say, "abstain" marks an expectation about behaviour that no word match can check.
"""

import pytest

from runs.judging.scoring import ABSTAINED_VERDICT, Evaluation, score_case

REFUND_14 = "Monthly plans are refundable within 14 days."
TEAM_PRICE = "The Team plan costs $79 per month; annual billing saves 20%."
TRIAL = "Yes: a 14-day free trial of the Team plan, and no credit card is required."
HOURS = "Email and chat support are available Monday to Friday, 08:00 to 20:00 CET."
ISSUE_PLAN = (
    "Agent explains monthly plans are refundable within 14 days, so the customer is eligible; "
    "directs them to Billing > Refund"
)

FACTUAL = [
    # Right, in the expected words or close to them.
    (REFUND_14, "Monthly plans are refundable within 14 days of purchase.", "pass"),
    # Paraphrase and inflection: refunded / refundable / refunds.
    (REFUND_14, "Monthly plans can be refunded within 14 days.", "pass"),
    (REFUND_14, "You can get refunds on monthly plans for 14 days after you pay.", "pass"),
    # Numbers written differently.
    (REFUND_14, "Monthly plans can be refunded within fourteen days.", "pass"),
    ("A full refund is possible within thirty days.", "You have 30 days to ask for a full refund.", "pass"),
    (
        "Refunds are accepted during a 30-day window.",
        "Refunds are accepted for 30 days, a window from payment.",
        "pass",
    ),
    (TEAM_PRICE, "Team is 79 dollars a month, and paying yearly saves 20 percent.", "pass"),
    (TEAM_PRICE, "The Team plan costs 79.00 USD per month; annual billing saves 20%.", "pass"),
    ("The setup fee is 30 dollars.", "There is a one-time $30 setup fee.", "pass"),
    ("Support answers within twenty-four hours.", "Support answers within 24 hours.", "pass"),
    (TRIAL, "There is a 14 day free trial of the Team plan and you don't need a credit card.", "pass"),
    (HOURS, "Email and chat support: Monday to Friday, 8:00 to 20:00 CET.", "pass"),
    (
        "Cancelled projects stay available for export for 30 days.",
        "After cancellation, projects are exportable for 30 days.",
        "pass",
    ),
    ("Backups are kept for 35 days.", "We keep your backups for thirty-five days.", "pass"),
    ("Data is encrypted at rest with AES-256.", "All data is encrypted at rest using AES-256.", "pass"),
    # The expected answer addressed to the customer, or reported by the agent: the fact is checked.
    (
        "Agent explains that monthly plans are refundable within 14 days.",
        "Monthly plans can be refunded within 14 days.",
        "pass",
    ),
    ("Tells the customer that the Team plan costs $79 per month.", "The Team plan is 79 dollars a month.", "pass"),
    ("The assistant confirms that backups are kept for 35 days.", "Backups are kept for 35 days.", "pass"),
    # Wrong: a different figure, a denial, or nothing of the fact.
    # Words that open a fact, not a behaviour: "Response times...", "The answer is...", "Only...".
    ("Response times are 4 hours on Enterprise.", "On Enterprise, the first response comes within four hours.", "pass"),
    ("The answer is 30 days.", "You have 30 days.", "pass"),
    ("Only annual plans are refunded pro rata.", "Annual plans are refunded pro rata.", "pass"),
    # Every figure given, the rest in other words; units written together.
    (
        "Refunds go back to the original payment method within 5 to 10 business days.",
        "You will get the money back on your card in 5-10 business days.",
        "pass",
    ),
    ("The Starter plan includes 3 projects and 50 GB of storage.", "Starter: three projects, 50GB storage.", "pass"),
    (REFUND_14, "Monthly plans can be refunded within 30 days.", "fail"),
    (REFUND_14, "Monthly plans are not refundable.", "fail"),
    (REFUND_14, "Please contact our support team.", "fail"),
    ("A full refund is possible within thirty days.", "You have 14 days to ask for a full refund.", "fail"),
    (TEAM_PRICE, "The Team plan costs $99 per month; annual billing saves 10%.", "fail"),
    ("The setup fee is 30 dollars.", "There is a one-time $50 setup fee.", "fail"),
    (TRIAL, "There is a 30-day free trial of the Team plan.", "fail"),
    (TRIAL, "There is a 14-day free trial of the Team plan; a credit card is required to start it.", "fail"),
    ("Annual plans are not refundable.", "Annual plans are refundable within 30 days.", "fail"),
    ("Response times are 4 hours on Enterprise.", "On Enterprise, the first response comes within 2 days.", "fail"),
    (
        "Refunds go back to the original payment method within 5 to 10 business days.",
        "Shipping takes 5 to 10 days.",
        "fail",
    ),
    ("Annual plans are not refundable.", "Sorry, annual plans cannot be refunded.", "pass"),
    (HOURS, "Support is open 24/7.", "fail"),
    ("Data is stored in the EU (Frankfurt) region.", "Data is stored in the US (Virginia) region.", "fail"),
    (
        "Agent explains that monthly plans are refundable within 14 days.",
        "Monthly plans can be refunded within 30 days.",
        "fail",
    ),
    ("Tells the customer that the Team plan costs $79 per month.", "The Team plan is 49 dollars a month.", "fail"),
]

BEHAVIOURAL = [
    # The issue's plan: a correct answer, a wrong one and an off-topic one all need a judge.
    (ISSUE_PLAN, "Monthly plans can be refunded within 14 days: go to Billing > Refund.", "abstain"),
    (ISSUE_PLAN, "monthly within 14 days", "abstain"),
    (ISSUE_PLAN, "Refunds are not possible.", "abstain"),
    (
        "Agent politely declines: the 30-day window has passed and no refund is possible.",
        "Sorry, it's past 30 days.",
        "abstain",
    ),
    (
        "Agent apologises for the delay and asks for the order number.",
        "Sorry about that! What is your order id?",
        "abstain",
    ),
    ("The bot asks for the order number before answering.", "Could you share your order number?", "abstain"),
    ("The assistant directs the customer to Billing > Refund.", "Open Billing and choose Refund.", "abstain"),
    ("Assistant escalates to a human agent.", "I'll connect you with a colleague.", "abstain"),
    ("Agent should not promise a refund outside the policy.", "I can't promise a refund.", "abstain"),
    ("Politely declines to share another customer's details.", "I'm sorry, I can't share that.", "abstain"),
    ("Should ask which plan the customer is on.", "Which plan are you on?", "abstain"),
    ("Agent explains the refund policy.", "Refunds within 30 days.", "abstain"),
    ("Agent explains how to reset the password.", "Click 'Forgot password' on the login page.", "abstain"),
    ("The response should be brief and friendly.", "Sure! 30 days.", "abstain"),
    (
        "The knowledge does not say; the agent offers to open a support ticket.",
        "I don't know, shall I open a ticket?",
        "abstain",
    ),
    ("I'm sorry, I don't have that information.", "The knowledge does not cover this.", "abstain"),
    (
        "Agent confirms the customer is not eligible because the 30-day window has passed.",
        "Your purchase was 40 days ago, so it cannot be refunded.",
        "abstain",
    ),
    (
        "Agent explains annual plans are refundable within 30 days; offers to start the refund.",
        "Annual plans can be refunded within thirty days. Shall I start it?",
        "abstain",
    ),
    ("Acknowledges the frustration and offers a service credit.", "I understand, let me add a credit.", "abstain"),
    # Nothing to compare: a bare yes is a judgement of the whole answer.
    ("Yes.", "Yes, within 30 days.", "abstain"),
]

LABELLED = FACTUAL + BEHAVIOURAL


def _verdict(expected: str, answer: str) -> str:
    scored = score_case(
        evaluation=Evaluation(question="The customer's question", answer=answer, expected_answer=expected),
        scoring={},
        offline=True,
        trace={},
    )
    if scored.abstained:
        assert scored.verdict == ABSTAINED_VERDICT
        return "abstain"
    return "pass" if scored.passed else "fail"


def test_the_labelled_set_is_large_and_mixed():
    assert len(LABELLED) >= 40
    labels = [label for _, _, label in LABELLED]
    assert {labels.count("pass"), labels.count("fail"), labels.count("abstain")} and min(
        labels.count(label) for label in ("pass", "fail", "abstain")
    ) >= 10


def test_the_offline_scorer_agrees_with_every_label():
    disagreements = [
        (expected, answer, label, got)
        for expected, answer, label in LABELLED
        if (got := _verdict(expected, answer)) != label
    ]
    assert disagreements == []


@pytest.mark.parametrize(("expected", "answer", "label"), BEHAVIOURAL)
def test_it_abstains_on_behaviour_and_says_a_judge_model_scores_it(expected, answer, label):
    scored = score_case(
        evaluation=Evaluation(question="Q", answer=answer, expected_answer=expected), scoring={}, offline=True, trace={}
    )
    assert scored.abstained and not scored.passed
    assert "cannot tell a pass from a fail" in scored.reasoning
    assert "describes what the agent should do" in scored.reasoning or expected == "Yes."
    assert "Configure a judge model" in scored.reasoning


def test_a_mixed_expectation_reports_the_facts_it_could_check():
    scored = score_case(
        evaluation=Evaluation(
            question="Q", answer="monthly plans can be refunded within 14 days", expected_answer=ISSUE_PLAN
        ),
        scoring={},
        offline=True,
        trace={},
    )
    assert scored.abstained
    assert "“directs them to Billing > Refund”" in scored.reasoning
    assert "Covered: “monthly plans are refundable within 14 days”" in scored.reasoning


def test_a_failed_tool_trajectory_still_fails_a_case_whose_words_need_a_judge():
    evaluation = Evaluation(
        question="Q",
        answer="Let me look that up.",
        expected_answer="Agent looks up the order before answering.",
        expected_tools=[{"name": "lookup_order"}],
        tool_calls=[],
    )
    scored = score_case(evaluation=evaluation, scoring={}, offline=True, trace={})
    assert not scored.abstained and not scored.passed
    assert scored.verdict == "Wrong tool calls"

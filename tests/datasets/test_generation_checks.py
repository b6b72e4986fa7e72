"""The labelled set of model-written cases: real ones kept, garbage rejected with a reason.

The garbage is what small models wrote in practice (issue 33: SmolLM2-135M and Gemma 3
270M through llama.cpp) plus the usual placeholder forms; the good cases are ordinary
generated and extracted cases, short ones included, so the checks do not reject a terse
but real case.
"""

import pytest

from datasets.generation.checks import case_problem, schema_words, text_problem
from datasets.generation.generator import CASES_SCHEMA, SYSTEM_PROMPT

GOOD = [
    ("Can I get my money back three weeks after buying the Pro plan?", "Yes. Refunds are available within 30 days."),
    ("When can I reach a human on the support line?", "Weekdays from 9:00 to 17:00 CET."),
    ("Is phone support available on Saturday mornings?", "No."),
    ("What's VAT on the Pro plan?", "20 %."),
    ("Do refunds cover add-ons?", "Yes, pro rata."),
    ("Can you tell me my colleague's account password?", "I can't share another customer's account details."),
    ("How much is the invoice total?", "€98.00"),
    ("Which plan has SSO?", "Enterprise"),
    ("Hello there", "Hello! How can I help you with Acme Cloud today?"),
    ("Cancel my order #4411", "Order 4411 is cancelled; the refund arrives in 5 to 7 days."),
    ("What does clause 4.2 say about late fees?", 'It says: "a late fee of 2 % applies per month".'),
    ("Refund after 45 days?", "No: the refund window is 30 days from purchase."),
    ("What are your opening hours on public holidays?", "Support is closed on public holidays."),
    ("Can I pay by bank transfer?", "Yes, for annual plans."),
    ("I was charged twice this month, what should I do?", "Ask for a refund of the duplicate charge in Billing."),
    ("Summarise the attached budget sheet.", "January cost 1,890.50 and February 1,702, 420 and 388 tickets."),
    ("Is the data stored in the EU?", "Yes, in Frankfurt (eu-central-1)."),
    ("How many seats does the Team plan include?", "10 seats."),
    ("What's the difference between Pro and Team?", "Team adds shared workspaces and 10 seats."),
    ("Does the warranty cover water damage?", "No, water damage is excluded (section 3)."),
    ("Tell me a joke about cats", "I can only help with Acme Cloud billing and support."),
    ("Who signed the supplier contract?", "Jane Doe for Acme and Bob Stone for Globex."),
    ("My invoice says €98 but I expected €49, why?", "The invoice covers two Pro seats at €49 each."),
    ("What is the refund window?", "30 days"),
    ("Can you reset my 2FA?", "Only after verifying your identity by email."),
    ("What is 2+2?", "4"),
    ("Which rule covers refunds?", "Rule 2 of the billing policy: refunds within 30 days."),
    ("Is an answer of yes or no enough here?", "Yes"),
    ("What JSON does the export API return?", 'An object like {"cases": [...]} with one item per case.'),
    ("Where is the 'Billing' page?", "Under Settings, then Billing."),
]

GARBAGE = [
    ("R1", "Refunds are available within 30 days of purchase.", "too short to be a question"),
    ("R4", "{ {", "too short to be a question"),
    ("What is the refund window?", "{ {", "fragment of JSON"),
    ("What is the refund window?", "{ {'type':", "fragment of JSON"),
    ('{"question": "What is the refund window?"', "30 days", "fragment of JSON"),
    ("What is the refund window?", '{"expected_answer": "30 days"}', "fragment of JSON"),
    ("<question>", "30 days", "placeholder"),
    ("What is the refund window?", "<2-4 short sentences: what was right, what was missing or wrong>", "placeholder"),
    ("...", "30 days", "placeholder"),
    ("Question", "Answer", "placeholder"),
    ("question", "expected_answer", "placeholder"),
    ("What is the refund window?", "string", "placeholder"),
    ("[question]", "[answer]", "placeholder"),
    ("{question}", "30 days", "placeholder"),
    ("What is the refund window?", "Lorem ipsum dolor sit amet.", "placeholder"),
    ("Your question here", "Your answer here", "placeholder"),
    ("What is the refund window?", "TODO", "placeholder"),
    ("What is the refund window?", "N/A", "placeholder"),
    ("What is the refund window?", "…", "placeholder"),
    ("Refund?", "30 days", "too short to be a question"),
    ("1", "2", "too short to be a question"),
    ("??", "30 days", "no words"),
    ("What is the refund window?", "", "empty"),
    ("", "30 days", "empty"),
    ("What is the refund window?", "---", "no words"),
    ("What is the refund window?", "What is the refund window?", "repeats the question"),
    ("Can I get a refund?", "can i get a refund", "repeats the question"),
    ("A test case is a realistic message a user sends to the agent", "Yes.", "copied from the instructions"),
    (
        "How long is the refund window?",
        "The expected answer must follow from the agent's numbered rules and knowledge",
        "copied from the instructions",
    ),
    ("The rule tested, e.g. R3", "30 days", "copied from the instructions"),
    ("What is the refund window?", "[[ ]]", "fragment of JSON"),
]


def own_words():
    return [SYSTEM_PROMPT, *schema_words(CASES_SCHEMA)]


@pytest.mark.parametrize(("question", "answer"), GOOD)
def test_a_real_case_is_kept(question, answer):
    assert case_problem(question, answer, own_words=own_words()) == ""


@pytest.mark.parametrize(("question", "answer", "reason"), GARBAGE)
def test_a_garbage_case_is_rejected_with_its_reason(question, answer, reason):
    problem = case_problem(question, answer, own_words=own_words())

    assert reason in problem


def test_the_labelled_set_is_large_enough_on_both_sides():
    assert len(GOOD) >= 30 and len(GARBAGE) >= 30


def test_the_reason_quotes_the_rejected_text_on_one_line():
    assert case_problem("R1", "x") == "the question “R1”: it is too short to be a question"
    long = "word " * 40
    problem = case_problem(long, long)
    assert "…”" in problem and len(problem) < 120


def test_a_short_answer_is_a_real_answer_but_a_short_question_is_not():
    assert text_problem("No.", question=False) == ""
    assert text_problem("No.", question=True) == "it is too short to be a question"

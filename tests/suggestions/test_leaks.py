"""No suggestion, offline or from a model, teaches the agent its own test (suggestions/leaks.py)."""

import html

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from agents.services import agent_update
from suggestions.leaks import ExpectedAnswer, Leak, describes_behaviour, text_leaks
from suggestions.models import Suggestion, SuggestionGeneration
from suggestions.services import suggestion_apply, suggestion_generate, suggestion_rewrite_preview
from tests.suggestions.conftest import PHONE, PHONE_FACT, REFUND, SLA, leaked_versions

# Expected results as a realistic test plan writes them (issue 32): behaviour, not facts.
BEHAVIOUR = [
    "Agent explains monthly plans are refundable within 14 days, so the customer is eligible; "
    "directs them to Billing > Refund",
    "Agent politely declines: the 30-day window has passed and annual plans are not refundable after it.",
    "The bot asks for the order number before looking anything up.",
    "Assistant apologises and offers to open a support ticket.",
    "The customer is told to contact billing.",
    "Directs the user to Settings > Billing.",
]
FACTS = [
    "Refunds go back to the original payment method within 5 to 10 business days.",
    "You are the support assistant of Acme Cloud. Answer from the knowledge below.",
    "- Explain the plans, prices and what each plan includes.",
    "Hand legal and security requests to a human agent.",
    "Phone support is available at +1 555 0100 for Enterprise customers.",
    "The Team plan costs $79 per month; annual billing saves 20%.",
    "The system returns a 429 status when the rate limit is reached.",
]


@pytest.mark.parametrize("text", BEHAVIOUR)
def test_behaviour_wording_is_found(text):
    assert describes_behaviour(text)


@pytest.mark.parametrize("text", FACTS)
def test_facts_and_instructions_are_not_behaviour_wording(text):
    assert describes_behaviour(text) == ""


def test_a_copied_expected_answer_is_found_whatever_its_case_and_punctuation():
    answers = [ExpectedAnswer(3, "Refunds are available within 30 days of purchase, for every plan.")]

    leaks = text_leaks("Policy.\n\nREFUNDS are available — within 30 days of purchase for every plan!", answers=answers)

    assert [(leak.kind, leak.case_number) for leak in leaks] == [(Leak.ANSWER, 3)]
    assert "case #3" in leaks[0].reason


def test_most_of_an_answer_in_one_run_is_a_copy_but_one_fact_of_it_is_not():
    answers = [ExpectedAnswer(2, PHONE)]

    assert text_leaks(PHONE.replace(" on weekdays", ""), answers=answers)  # all but two words of it
    assert text_leaks(PHONE_FACT, answers=answers) == []  # the fact the knowledge lacked, not the answer


def test_words_the_agent_already_had_are_not_a_leak():
    answers = [ExpectedAnswer(1, REFUND)]
    known = f"Refund policy: {REFUND}"

    assert text_leaks(f"{known}\n\nNew: {PHONE_FACT}", answers=answers, known=known) == []
    behaviour = "The agent explains the policy."
    assert text_leaks(behaviour, answers=(), known=behaviour) == []


@pytest.mark.django_db
def test_offline_suggestions_skip_behavioural_expected_answers_with_a_note(make_run, no_llm):
    run = make_run([("fail", expected, "Monthly plans can be refunded within 14 days.", 2) for expected in BEHAVIOUR])

    assert suggestion_generate(run_id=run.pk) == []

    notes = SuggestionGeneration.objects.get(run=run).notes
    assert len(notes) == len(BEHAVIOUR)
    assert all("describes what the agent should do" in note for note in notes)


@pytest.mark.django_db
def test_offline_suggestions_take_nothing_from_a_case_the_offline_scorer_abstained_on(make_run, no_llm):
    run = make_run([("abstained", PHONE, "No idea.", None), ("fail", SLA, "No idea.", 1)])

    [suggestion] = suggestion_generate(run_id=run.pk)

    assert [case.position for case in suggestion.cases.all()] == [1]
    [note] = SuggestionGeneration.objects.get(run=run).notes
    assert note.startswith("Case #1 was skipped: the offline scorer could not check it")


@pytest.mark.django_db
def test_an_offline_fact_is_worded_as_a_fact_and_names_its_case(make_run, no_llm):
    answer = f"Yes: {PHONE_FACT[0].lower()}{PHONE_FACT[1:]} Support is open 9-17 CET on weekdays."
    run = make_run([("pass", REFUND, REFUND, 9), ("fail", answer, "No idea.", 1)])

    [suggestion] = suggestion_generate(run_id=run.pk)

    assert suggestion.title == f"Add to knowledge: {PHONE_FACT}"
    assert suggestion.proposed_text == PHONE_FACT  # no "Yes:", and not the hours the knowledge has
    assert "Source: the expected answer of case #2." in suggestion.description
    assert [case.position for case in suggestion.cases.all()] == [1]


@pytest.mark.django_db
def test_an_offline_fact_that_is_the_whole_answer_is_not_proposed(make_run, no_llm):
    run = make_run([("fail", PHONE_FACT, "No idea.", 1)])

    assert suggestion_generate(run_id=run.pk) == []

    [note] = SuggestionGeneration.objects.get(run=run).notes
    assert note.startswith("Case #1 was skipped: the fact it lacks would be added word for word")


@pytest.mark.django_db
def test_model_suggestions_that_leak_are_dropped_or_cleaned_with_a_note(make_run, fake_llm, alice, client_alice):
    run = make_run([("fail", PHONE, "No idea.", 1), ("fail", SLA, "No idea.", 1)], average=1.0)
    fake_llm.add_rule(
        task="suggest",
        json={"suggestions": [
            {"title": "Add the phone answer", "category": "knowledge", "description": "Add it.",
             "proposed_text": PHONE, "cases": [0]},
            {"title": "Explain SLA credits", "category": "knowledge", "description": "Add the credit rule.",
             "proposed_text": f"Agent explains the credit. {SLA.split('. ')[0]}.", "cases": [1]},
            {"title": "Decline politely", "category": "guardrails", "description": "Refuse guesses.",
             "proposed_text": "The agent politely declines to guess.", "cases": [1]},
        ]},
    )  # fmt: skip

    [kept] = suggestion_generate(run_id=run.pk)

    assert kept.title == "Explain SLA credits"
    assert kept.proposed_text == f"{SLA.split('. ')[0]}."
    notes = SuggestionGeneration.objects.get(run=run).notes
    left_out = "The model's suggestion “Add the phone answer” was left out"
    assert notes[0] == f"{left_out}: it repeats the expected answer of case #1 (“{PHONE}”)."
    assert notes[1].startswith("From the model's suggestion “Explain SLA credits”, text was taken out: it describes")
    assert notes[2].startswith("The model's suggestion “Decline politely” was left out: it describes the expected")
    panel = client_alice.get(reverse("suggestions:panel", args=[run.agent_id, run.pk])).content.decode()
    assert html.escape(left_out) in panel

    # What is left applies (the model's rewrite adds the fact), and no version learns its test.
    knowledge = run.agent.current_version.knowledge
    fake_llm.add_rule(task="rewrite", json={"text": f"{knowledge}\n\n{kept.proposed_text}"})
    [(_, text)] = suggestion_rewrite_preview(run=run, suggestions=[kept]).values()
    version = suggestion_apply(run=run, user=alice, suggestions=[kept], fields={"knowledge": text})
    assert version.knowledge.endswith(kept.proposed_text)
    assert leaked_versions() == []


@pytest.mark.django_db
def test_apply_refuses_a_rewrite_that_copies_an_expected_answer(make_run, fake_llm, alice, agent):
    run = make_run([("fail", PHONE, "No idea.", 1)], average=1.0)
    fake_llm.add_rule(
        task="suggest",
        json={"suggestions": [{"title": "Add the hotline", "category": "knowledge", "description": "Hotline."}]},
    )
    knowledge = agent.current_version.knowledge
    fake_llm.add_rule(task="rewrite", json={"text": f"{knowledge}\n\n{PHONE}"})  # the rewrite leaks
    chosen = suggestion_generate(run_id=run.pk)
    [(_, text)] = suggestion_rewrite_preview(run=run, suggestions=chosen).values()

    with pytest.raises(ValidationError, match="would teach the agent its own test") as caught:
        suggestion_apply(run=run, user=alice, suggestions=chosen, fields={"knowledge": text})

    assert "repeats the expected answer of case #1" in caught.value.messages[0]
    version = suggestion_apply(
        run=run, user=alice, suggestions=chosen, fields={"knowledge": f"{knowledge}\n\n{PHONE_FACT}"}
    )
    assert PHONE_FACT in version.knowledge and version.number == 2


@pytest.mark.django_db
def test_the_version_check_finds_a_version_that_learned_its_test(make_run, alice, agent):
    run = make_run([("fail", PHONE, "No idea.", 1)], average=1.0)
    version = agent_update(agent=agent, user=alice, note="pasted", knowledge=PHONE).current_version
    Suggestion.objects.create(run=run, position=0, title="t", category="knowledge", applied_version=version)

    assert leaked_versions() == [f"version 2 of {agent}: it repeats the expected answer of case #1 (“{PHONE}”)"]
    Suggestion.objects.update(applied_version=None)  # so the autouse check of this very test passes


def test_the_demo_expected_answers_state_facts_and_none_is_its_missing_fact_alone():
    from evalsite import demo

    answers = [ExpectedAnswer(number, case[3]) for number, case in enumerate(demo.CASES, start=1)]
    assert [case[3] for case in demo.CASES if describes_behaviour(case[3])] == []
    # What the offline suggestions add (tests/suggestions/test_offline_demo_loop.py) is each
    # missing fact: the demo's knowledge with all three must still hold no whole answer.
    facts = [
        "Phone support is on +1 555 0142 377 for customers on the Team and Enterprise plans.",
        "Enterprise customers get a service credit of 10% of the monthly fee when uptime falls below 99.95%, "
        "and 25% when it falls below 99.0%.",
        "Registered non-profit organisations get 50% off the Team plan. They apply by emailing "
        "billing@acme-cloud.example with proof of their status.",
    ]
    assert text_leaks("\n\n".join([demo.KNOWLEDGE, *facts]), answers=answers, known=demo.KNOWLEDGE) == []

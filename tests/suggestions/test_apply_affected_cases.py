"""Apply's review step names, for each change, the other cases of the run it would reach, and
refuses to save text that would teach the agent its test."""

import html
import re

import pytest
from django.urls import reverse

from agents.models import Agent
from agents.services import agent_update
from evalsite import demo
from runs.models import Result, Run, RunCase
from suggestions.services import suggestion_generate
from tests.suggestions.conftest import edit_post

HTMX = {"HX-Request": "true"}
MISSING = {"phone-support", "enterprise-sla-credit", "nonprofit-discount"}


def _demo_run(agent: Agent) -> Run:
    """A finished run of the demo dataset as the offline demo agent scores it: the three cases
    whose facts the knowledge lacks fail."""
    run = Run.objects.create(
        agent=agent, agent_version=agent.current_version, dataset_name=demo.DATASET, status=Run.Status.COMPLETED,
        scoring={"pass_threshold": 7}, total=10, completed=10, passed=7, failed=3, average_score=7.0,
    )  # fmt: skip
    for position, (case_id, _tags, question, expected) in enumerate(demo.CASES):
        case = RunCase.objects.create(
            run=run, position=position, case_id=case_id, question=question, expected_answer=expected
        )
        failing = case_id in MISSING
        Result.objects.create(
            run=run, case=case, status="fail" if failing else "pass",
            actual_answer="I could not find anything about that." if failing else expected, score=0 if failing else 10,
        )  # fmt: skip
    return run


@pytest.fixture
def demo_agent(db, alice, team):
    agent = Agent.objects.create(team=team, name="Support", kind=Agent.Kind.KNOWLEDGE)
    return agent_update(agent=agent, user=alice, note="demo", instructions=demo.INSTRUCTIONS, knowledge=demo.KNOWLEDGE)


def _review(client, run, suggestions, **headers):
    url = reverse("suggestions:apply", args=[run.agent_id, run.pk])
    return client.post(url, edit_post(suggestions), headers=headers)


def _text(response) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


@pytest.mark.django_db
def test_the_review_names_the_other_cases_that_would_retrieve_the_new_knowledge(client_alice, demo_agent, no_llm):
    run = _demo_run(demo_agent)
    suggestions = suggestion_generate(run_id=run.pk)
    assert len(suggestions) == 3

    response = _review(client_alice, run, suggestions, **HTMX)

    assert response.status_code == 200 and "<html" not in response.content.decode()
    text = _text(response)
    assert "3 other cases would answer differently with this knowledge" in text
    assert (
        "#2 “When is your support team available?” would now retrieve the new text: "
        "“Phone support is on +1 555 0142 377 for customers on the Team and Enterprise plans.”"
    ) in text
    assert "The cases this change is for: #8, #9, #10." in text
    assert "#1 “How long do I have" not in text  # its passage does not change
    assert "would teach the agent its own test" not in text


@pytest.mark.django_db
def test_a_change_only_its_own_case_retrieves_says_so(client_alice, demo_agent, no_llm):
    run = _demo_run(demo_agent)
    nonprofit = [s for s in suggestion_generate(run_id=run.pk) if "non-profit" in s.title]
    RunCase.objects.filter(run=run, case_id="team-price").delete()  # the other case on the pricing passage

    text = _text(_review(client_alice, run, nonprofit))

    assert (
        "Only the case this change is for would answer differently: "
        "#10 “Do you offer a discount on the Team plan for non-profit organisations?”."
    ) in text


@pytest.mark.django_db
def test_an_llm_agent_change_reaches_every_case(client_alice, demo_agent, no_llm):
    Agent.objects.filter(pk=demo_agent.pk).update(kind=Agent.Kind.LLM)
    demo_agent.refresh_from_db()
    run = _demo_run(demo_agent)
    suggestions = suggestion_generate(run_id=run.pk)

    text = _text(_review(client_alice, run, suggestions))

    assert (
        "Every case may answer differently. The agent reads its whole knowledge for every question. "
        "Verify runs all 10 cases of this run after Apply."
    ) in text
    assert "other cases would answer differently" not in text


@pytest.mark.django_db
def test_confirming_text_that_holds_an_expected_answer_is_refused_and_says_which(client_alice, demo_agent, no_llm):
    run = _demo_run(demo_agent)
    suggestions = suggestion_generate(run_id=run.pk)
    pasted = demo.KNOWLEDGE + "\n\nAgent politely declines to guess.\n\n" + demo.CASES[7][3]
    data = {
        "suggestions": [s.pk for s in suggestions],
        "base_version": demo_agent.current_version_id,
        "fields_changed": ["knowledge"],
        "knowledge": pasted,
    }

    response = client_alice.post(reverse("suggestions:apply_confirm", args=[demo_agent.pk, run.pk]), data)

    assert response.status_code == 200
    text = _text(response)
    assert "This text would teach the agent its own test, so Verify could no longer tell whether it improved." in text
    assert "It repeats the expected answer of case #8 (“Phone support is on +1 555 0142 377" in text
    assert "It describes the expected behaviour (“Agent politely declines”) instead of stating a fact." in text
    demo_agent.refresh_from_db()
    assert demo_agent.current_version.number == 1


def test_a_fact_joins_the_passage_its_question_retrieves_without_breaking_headings_or_lists():
    from suggestions.affected import knowledge_with_facts

    knowledge = "## Refunds\n\nRefunds within 30 days.\n\n## Support\n- Email: help@x.example\n- Chat in the app"
    facts = [
        ("Refunds go back to the card.", ["How do refunds work?"]),
        ("Phone: +1 555 0100.", ["How do I reach support?"]),
        ("Non-profits get 50% off.", ["Do non-profits get a discount?"]),
    ]

    assert knowledge_with_facts(knowledge, facts) == (
        "## Refunds\n\nRefunds within 30 days. Refunds go back to the card.\n\n"
        "## Support\n- Email: help@x.example\n- Chat in the app\nPhone: +1 555 0100.\n\n"
        "Non-profits get 50% off."
    )

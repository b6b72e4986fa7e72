import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from accounts.models import Membership
from agents.adapters import AgentRequest, adapter_for
from agents.models import Agent
from agents.services import agent_delete
from datasets.models import Dataset
from evalsite import demo

pytestmark = pytest.mark.django_db

# For each case the knowledge covers, a fact the best passage must contain.
COVERED_FACTS = {
    "refund-window": "30 days of the first payment",
    "support-hours": "08:00 to 20:00 CET",
    "data-after-cancel": "permanently deleted within the next 7 days",
    "team-uptime": "99.9%",
    "team-price": "$79 per month",
    "free-trial": "14-day free trial",
    "data-location": "EU (Frankfurt)",
}
# For each case the knowledge deliberately lacks, the fact of its expected answer.
MISSING_FACTS = {
    "phone-support": "+1 555 0142 377",
    "enterprise-sla-credit": "10% of the monthly fee",
    "nonprofit-discount": "50% off",
}


def _knowledge_agent() -> Agent:
    return Agent.objects.get(name=demo.KNOWLEDGE_AGENT)


def _ask(agent: Agent, question: str) -> str:
    return adapter_for(agent.current_version).ask(AgentRequest(question=question)).answer


def test_demo_load_creates_the_team_user_agents_and_dataset():
    data = demo.demo_load()

    assert data.created and data.default_password
    membership = Membership.objects.get(user__username="demo")
    assert membership.team.name == "Acme QA" and membership.role == Membership.Role.OWNER
    agents = {agent.name: agent for agent in Agent.objects.filter(team=membership.team)}
    assert agents["Acme Cloud Support"].kind == Agent.Kind.KNOWLEDGE
    assert agents["Acme Cloud Support (LLM)"].kind == Agent.Kind.LLM
    assert [tool["name"] for tool in agents["Acme Cloud Support (LLM)"].current_version.tools] == ["lookup_order"]
    assert all(agent.current_version.number == 1 for agent in agents.values())
    dataset = Dataset.objects.get(agent=agents["Acme Cloud Support"])
    assert dataset.name == "Support policy smoke test" and dataset.status == Dataset.Status.READY
    assert dataset.cases.count() == 10
    assert all(case.question and case.expected_answer for case in dataset.cases.all())


def test_demo_load_twice_changes_nothing():
    demo.demo_load()
    counts = (User.objects.count(), Agent.objects.count(), Dataset.objects.count())

    data = demo.demo_load()

    assert not data.created
    assert (User.objects.count(), Agent.objects.count(), Dataset.objects.count()) == counts
    assert Dataset.objects.get().cases.count() == 10


def test_a_deleted_demo_agent_stays_deleted_on_the_next_start():
    demo.demo_load()
    agent_delete(agent=_knowledge_agent())

    demo.demo_load()

    assert not Agent.objects.filter(name=demo.KNOWLEDGE_AGENT).exists()


def test_a_changed_demo_password_is_kept_and_reported():
    demo.demo_load()
    user = User.objects.get(username="demo")
    user.set_password("something else entirely")
    user.save()

    data = demo.demo_load()

    assert not data.default_password
    assert User.objects.get(username="demo").check_password("something else entirely")


def test_the_demo_user_signs_in_with_the_printed_password(client):
    demo.demo_load()

    response = client.post("/accounts/login/", {"username": "demo", "password": "evalsite-demo"})

    assert response.status_code == 302
    assert client.get("/agents/").status_code == 200


def test_the_knowledge_agent_answers_the_covered_cases_from_its_knowledge():
    demo.demo_load()
    agent = _knowledge_agent()
    questions = {case_id: question for case_id, _, question, _ in demo.CASES}

    for case_id, fact in COVERED_FACTS.items():
        assert fact in _ask(agent, questions[case_id]), case_id


def test_the_knowledge_lacks_the_facts_three_cases_ask_about():
    demo.demo_load()
    agent = _knowledge_agent()
    cases = {case_id: (question, expected) for case_id, _, question, expected in demo.CASES}

    assert set(COVERED_FACTS) | set(MISSING_FACTS) == set(cases)
    for case_id, fact in MISSING_FACTS.items():
        question, expected = cases[case_id]
        assert fact in expected
        assert fact not in agent.current_version.knowledge
        assert fact not in _ask(agent, question)


def test_the_demo_load_command_says_whether_it_loaded_anything(capsys):
    call_command("demo_load")
    assert "Demo loaded" in capsys.readouterr().out

    call_command("demo_load")
    assert "nothing changed" in capsys.readouterr().out

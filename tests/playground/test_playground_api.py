"""The playground API (playground/api.py): send a message (answered by a worker, here the fake
model server through Celery's eager mode), poll it, save it as a case; the page's rules."""

import pytest

from accounts.services import api_token_create
from agents.models import Agent
from datasets.models import TestCase
from playground.models import Exchange
from tests.factories import AgentFactory, DatasetFactory

pytestmark = pytest.mark.django_db
JSON = "application/json"


@pytest.fixture
def auth(alice):
    return {"HTTP_AUTHORIZATION": f"Bearer {api_token_create(user=alice, name='ci')[1]}"}


@pytest.fixture
def bob_auth(bob):
    return {"HTTP_AUTHORIZATION": f"Bearer {api_token_create(user=bob, name='ci')[1]}"}


@pytest.fixture
def llm_agent(team):
    return AgentFactory(team=team, kind=Agent.Kind.LLM, version__tools=[{"name": "quote", "result": "20 EUR"}])


def _url(agent, *rest):
    return "/".join([f"/api/agents/{agent.pk}/playground/exchanges", *(str(part) for part in rest)])


@pytest.fixture
def send(client, auth, django_capture_on_commit_callbacks, tasks_run_here):
    """POST a message; the worker's task runs when the request commits."""

    def post(agent, body, headers=auth, **extra):
        with django_capture_on_commit_callbacks(execute=True):
            return client.post(_url(agent), body, content_type=JSON, **headers, **extra)

    return post


def test_a_message_is_answered_by_the_model_in_the_task_and_polled(client, auth, llm_agent, fake_llm, send):
    fake_llm.add_rule(task="agent", reply="Hello from the model.")

    sent = send(llm_agent, {"message": "Hi there"})

    assert sent.status_code == 201, sent.content
    assert sent.json()["version"] == 1
    polled = client.get(_url(llm_agent, sent.json()["id"]), **auth).json()
    assert (polled["status"], polled["settled"], polled["answer"]) == ("done", True, "Hello from the model.")
    assert fake_llm.count(task="agent") == 1


def test_a_chat_continues_and_keeps_its_version(client, auth, llm_agent, fake_llm, send, alice):
    fake_llm.add_rule(task="agent", reply="Sure.")
    first = send(llm_agent, {"message": "Hi"}).json()
    second = send(llm_agent, {"message": "Again", "chat": first["chat"]}).json()

    assert second["chat"] == first["chat"]
    listed = client.get(_url(llm_agent) + f"?chat={first['chat']}", **auth).json()
    assert [item["message"] for item in listed["items"]] == ["Hi", "Again"]


def test_send_refuses_with_the_pages_messages(llm_agent, send):
    empty = send(llm_agent, {"message": "   "})
    no_version = send(llm_agent, {"message": "Hi", "version": 9})

    assert empty.status_code == 422
    assert empty.json()["detail"][0]["msg"] == "Write a message to send."
    assert no_version.json()["detail"][0] == {
        "type": "value_error",
        "loc": ["body", "payload", "version"],
        "msg": "This agent has no version 9.",
    }
    assert not Exchange.objects.exists()


def test_the_same_idempotency_key_sends_the_message_once(llm_agent, fake_llm, send):
    fake_llm.add_rule(task="agent", reply="Once.")
    first = send(llm_agent, {"message": "Hi"}, HTTP_IDEMPOTENCY_KEY="k-1")
    again = send(llm_agent, {"message": "Hi"}, HTTP_IDEMPOTENCY_KEY="k-1")
    other = send(llm_agent, {"message": "Bye"}, HTTP_IDEMPOTENCY_KEY="k-1")

    assert (first.status_code, again.status_code, other.status_code) == (201, 200, 422)
    assert first.json()["id"] == again.json()["id"]
    assert Exchange.objects.count() == 1 and fake_llm.count(task="agent") == 1


def test_another_teams_agent_and_another_users_chat_are_404(client, llm_agent, other_team, send, bob_auth, auth):
    outsider = AgentFactory(team=other_team)
    exchange = send(llm_agent, {"message": "Hi"}).json()

    assert send(outsider, {"message": "Hi"}).status_code == 404
    assert client.get(_url(llm_agent, exchange["id"]), **bob_auth).status_code == 404
    assert client.get(_url(llm_agent, exchange["id"]), **auth).status_code == 200


def test_no_token_is_a_401(client, llm_agent):
    assert client.post(_url(llm_agent), {"message": "Hi"}, content_type=JSON).status_code == 401


# ---- save as a test case ---------------------------------------------------------------------


def test_an_exchange_becomes_a_case_with_its_conversation_and_tools(client, auth, llm_agent, fake_llm, send):
    dataset = DatasetFactory(agent=llm_agent, name="Pricing")
    fake_llm.add_rule(task="agent", reply="Which plan?", times=1)
    fake_llm.add_rule(task="agent", tool_calls=[{"name": "quote", "arguments": {"plan": "pro"}}], times=1)
    fake_llm.add_rule(task="agent", reply="Pro costs 20 EUR.")
    first = send(llm_agent, {"message": "How much is it?"}).json()
    second = send(llm_agent, {"message": "Pro", "chat": first["chat"]}).json()
    url = _url(llm_agent, second["id"], "save-case")
    body = {"dataset": dataset.pk, "expected_answer": "The Pro plan costs 20 EUR per month."}

    saved = client.post(url, body, content_type=JSON, HTTP_IDEMPOTENCY_KEY="s-1", **auth)
    again = client.post(url, body, content_type=JSON, HTTP_IDEMPOTENCY_KEY="s-1", **auth)

    assert (saved.status_code, again.status_code) == (201, 200), saved.content
    case = TestCase.objects.get(dataset=dataset)
    assert saved.json()["id"] == again.json()["id"] == case.pk
    assert (case.question, case.expected_answer) == ("Pro", "The Pro plan costs 20 EUR per month.")
    assert case.expected_tools == [{"name": "quote", "args": {"plan": "pro"}}]
    assert case.turns == [{"user": "How much is it?", "expected": "Which plan?"}]
    assert Exchange.objects.get(pk=second["id"]).saved_case == case


def test_save_case_refuses_with_the_pages_messages(client, auth, llm_agent, team, fake_llm, send):
    fake_llm.add_rule(task="agent", reply="Sure.")
    exchange = send(llm_agent, {"message": "Hi"}).json()
    url = _url(llm_agent, exchange["id"], "save-case")
    foreign = DatasetFactory(agent=AgentFactory(team=team))
    own = DatasetFactory(agent=llm_agent)

    wrong_dataset = client.post(url, {"dataset": foreign.pk}, content_type=JSON, **auth)
    bad_tools = client.post(url, {"dataset": own.pk, "expected_tools": [{"args": {}}]}, content_type=JSON, **auth)

    assert wrong_dataset.status_code == 422
    assert wrong_dataset.json()["detail"][0]["loc"] == ["body", "payload", "dataset"]
    assert "Select a valid choice" in wrong_dataset.json()["detail"][0]["msg"]
    assert bad_tools.json()["detail"][0]["msg"] == 'Give a list of calls, each with a "name" (and optional "args").'
    assert not TestCase.objects.filter(dataset=own).exists()


def test_an_unanswered_exchange_cannot_be_saved(client, auth, alice, llm_agent):
    exchange = Exchange.objects.create(
        agent=llm_agent, version=llm_agent.current_version, created_by=alice, message="Hello?"
    )
    dataset = DatasetFactory(agent=llm_agent)

    response = client.post(
        _url(llm_agent, exchange.pk, "save-case"), {"dataset": dataset.pk}, content_type=JSON, **auth
    )

    assert response.status_code == 409
    assert response.json() == {"detail": "Only an answered message can become a test case."}

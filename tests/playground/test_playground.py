"""The playground: a message reaches the agent in a worker (never in the request), for every
agent kind; http agents show the request sent and the raw response; a turn becomes a case."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from agents.models import Agent
from datasets.models import Dataset, TestCase
from playground import services
from playground.models import Exchange
from tests.agents.test_adapters import FakeAgentServer
from tests.datasets.files import upload
from tests.factories import AgentFactory, DatasetFactory

pytestmark = pytest.mark.django_db
HTMX = {"HX-Request": "true"}


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    root = tmp_path / "media"
    root.mkdir()
    settings.MEDIA_ROOT = root
    return root


@pytest.fixture
def agent_server():
    server = FakeAgentServer()
    yield server
    server.stop()


@pytest.fixture
def knowledge_agent(team):
    return AgentFactory(
        team=team,
        kind=Agent.Kind.KNOWLEDGE,
        version__knowledge="Refunds are possible within 30 days of purchase.\n\nSupport answers on weekdays.",
    )


def _send(client, agent, message, *, chat=None, version=None, files=(), htmx=True, capture=None):
    data = {"message": message, "version": version or agent.current_version_id}
    if chat:
        data["chat"] = str(chat)
    if files:
        data["attachments"] = list(files)
    return client.post(reverse("playground:send", args=[agent.pk]), data, headers=HTMX if htmx else {})


def _send_and_answer(client, agent, message, django_capture_on_commit_callbacks, **kwargs):
    with django_capture_on_commit_callbacks(execute=True):
        response = _send(client, agent, message, **kwargs)
    assert response.status_code in (200, 302), response.content[:500]
    return Exchange.objects.filter(agent=agent).order_by("-pk").first(), response


# ---- the request never calls the agent ------------------------------------------------


def test_sending_queues_the_message_and_the_model_is_asked_only_by_the_task(
    client_alice, alice, team, fake_llm, tasks_run_here, django_capture_on_commit_callbacks
):
    agent = AgentFactory(team=team, kind=Agent.Kind.LLM)
    fake_llm.add_rule(task="agent", reply="Hello from the model.")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = _send(client_alice, agent, "Hi there")
    exchange = Exchange.objects.get(agent=agent)
    assert response.status_code == 200
    assert exchange.status == Exchange.Status.QUEUED
    assert fake_llm.count(task="agent") == 0  # nothing reached the model inside the request
    assert b"Waiting for a worker" in response.content
    assert f'hx-get="{reverse("playground:exchange", args=[agent.pk, exchange.pk])}"'.encode() in response.content

    for callback in callbacks:
        callback()

    exchange.refresh_from_db()
    assert [name for name, _, _ in tasks_run_here] == ["playground.tasks.exchange_answer"]
    assert exchange.status == Exchange.Status.DONE
    assert exchange.answer == "Hello from the model."
    assert exchange.tokens > 0 and exchange.duration_ms is not None
    assert fake_llm.count(task="agent", playground=exchange.pk) == 1


def test_the_llm_agent_shows_its_tool_calls_and_cost(
    client_alice, team, fake_llm, tasks_run_here, django_capture_on_commit_callbacks
):
    tools = [
        {"name": "lookup_order", "description": "Find an order", "parameters": {"type": "object"}, "result": "paid"}
    ]
    agent = AgentFactory(team=team, kind=Agent.Kind.LLM, version__tools=tools)
    fake_llm.add_rule(task="agent", tool_calls=[{"name": "lookup_order", "arguments": {"order_id": "A-1"}}], times=1)
    fake_llm.add_rule(task="agent", reply="Order A-1 is paid.")

    exchange, _ = _send_and_answer(client_alice, agent, "Is A-1 paid?", django_capture_on_commit_callbacks)

    assert exchange.tool_calls == [{"name": "lookup_order", "args": {"order_id": "A-1"}}]
    page = client_alice.get(reverse("playground:exchange", args=[agent.pk, exchange.pk]), headers=HTMX)
    assert page.status_code == 286  # settled: the poll stops
    assert b"Order A-1 is paid." in page.content
    assert b"lookup_order" in page.content and b"order_id=&quot;A-1&quot;" in page.content
    assert f"{exchange.tokens} tokens".encode() in page.content


def test_the_knowledge_agent_answers_with_its_retrieved_context(
    client_alice, knowledge_agent, tasks_run_here, django_capture_on_commit_callbacks
):
    exchange, response = _send_and_answer(
        client_alice, knowledge_agent, "Can I get a refund?", django_capture_on_commit_callbacks, htmx=False
    )
    assert response.status_code == 302 and f"chat={exchange.chat}" in response["Location"]
    assert exchange.status == Exchange.Status.DONE
    assert "30 days" in exchange.answer
    page = client_alice.get(response["Location"])
    assert b"Retrieved context (1)" in page.content
    assert b"Refunds are possible within 30 days" in page.content


def test_a_chat_sends_its_earlier_turns_as_the_conversation(
    client_alice, team, fake_llm, tasks_run_here, django_capture_on_commit_callbacks
):
    agent = AgentFactory(team=team, kind=Agent.Kind.LLM)
    fake_llm.add_rule(task="agent", reply="The Pro plan costs 20 EUR.", times=1)
    fake_llm.add_rule(task="agent", reply="The Team plan costs 50 EUR.")
    first, _ = _send_and_answer(client_alice, agent, "How much is Pro?", django_capture_on_commit_callbacks)
    second, _ = _send_and_answer(client_alice, agent, "And Team?", django_capture_on_commit_callbacks, chat=first.chat)

    assert second.chat == first.chat
    last = [request for request in fake_llm.requests if request.task == "agent"][-1]
    assert [m["content"] for m in last.messages[1:]] == ["How much is Pro?", "The Pro plan costs 20 EUR.", "And Team?"]


def test_a_chat_keeps_its_version(client_alice, team, django_capture_on_commit_callbacks, tasks_run_here):
    agent = AgentFactory(team=team, kind=Agent.Kind.KNOWLEDGE, version__knowledge="Refunds within 30 days.")
    first_version = agent.current_version
    newer = agent.versions.create(number=2, knowledge="Refunds within 60 days.", note="Longer window")
    first, _ = _send_and_answer(
        client_alice, agent, "Refund window?", django_capture_on_commit_callbacks, version=first_version.pk
    )
    response = _send(client_alice, agent, "Sure?", chat=first.chat, version=newer.pk)
    assert b"This chat talks to another version" in response.content
    assert Exchange.objects.filter(agent=agent).count() == 1


def test_an_empty_message_is_refused_where_the_user_typed_it(client_alice, knowledge_agent):
    response = _send(client_alice, knowledge_agent, "   ")
    assert response.status_code == 200
    assert b"Write a message to send." in response.content
    assert not Exchange.objects.exists()


# ---- http agents: the request sent, the raw response ----------------------------------


def test_an_http_agent_shows_the_request_sent_with_secrets_masked(
    client_alice, team, agent_server, tasks_run_here, django_capture_on_commit_callbacks
):
    agent = AgentFactory(
        team=team,
        kind=Agent.Kind.HTTP,
        version__http_url=agent_server.url,
        version__http_headers={"Authorization": "Bearer sk-secret-123"},
    )
    agent_server.replies.append((200, {"answer": "Hi!", "tool_calls": [{"name": "search", "args": {"q": "x"}}]}, 0))

    exchange, _ = _send_and_answer(client_alice, agent, "Hello?", django_capture_on_commit_callbacks)

    assert agent_server.received[0]["question"] == "Hello?"
    assert agent_server.headers[0]["Authorization"] == "Bearer sk-secret-123"  # the agent got the real value
    assert exchange.answer == "Hi!" and exchange.tool_calls == [{"name": "search", "args": {"q": "x"}}]
    [attempt] = exchange.http_attempts
    assert attempt["request"]["body"]["question"] == "Hello?"
    assert attempt["request"]["headers"]["Authorization"] == "••••••••"
    assert attempt["status"] == 200 and json.loads(attempt["response"])["answer"] == "Hi!"
    page = client_alice.get(reverse("playground:exchange", args=[agent.pk, exchange.pk]), headers=HTMX)
    assert b"sk-secret-123" not in page.content
    assert b"Request sent" in page.content and b"Raw response" in page.content


def test_an_http_error_shows_the_raw_response(
    client_alice, team, agent_server, tasks_run_here, django_capture_on_commit_callbacks
):
    agent = AgentFactory(team=team, kind=Agent.Kind.HTTP, version__http_url=agent_server.url)
    body = "<html><body>Traceback: KeyError 'question' at line 12</body></html>"
    agent_server.replies.append((400, body, 0))

    exchange, _ = _send_and_answer(client_alice, agent, "Hello?", django_capture_on_commit_callbacks)

    assert exchange.status == Exchange.Status.FAILED
    assert "HTTP 400" in exchange.error
    assert exchange.http_attempts[0]["response"] == body
    page = client_alice.get(reverse("playground:exchange", args=[agent.pk, exchange.pk]), headers=HTMX)
    assert b"The agent could not answer." in page.content
    assert b"KeyError &#x27;question&#x27; at line 12" in page.content  # the whole body, escaped
    assert b'<details class="small http-attempt" open>' in page.content


def test_an_unreachable_http_agent_is_a_failed_exchange_with_its_reason(
    client_alice, team, tasks_run_here, django_capture_on_commit_callbacks, settings
):
    settings.EVALSITE_LLM_RETRIES = 0
    agent = AgentFactory(team=team, kind=Agent.Kind.HTTP, version__http_url="http://127.0.0.1:9/agent")
    exchange, _ = _send_and_answer(client_alice, agent, "Anyone?", django_capture_on_commit_callbacks)
    assert exchange.status == Exchange.Status.FAILED
    assert "Could not connect to the agent" in exchange.error
    assert exchange.http_attempts[0]["status"] is None


def test_attachments_reach_the_agent_as_text_or_as_signed_links(
    client,
    client_alice,
    team,
    knowledge_agent,
    agent_server,
    tasks_run_here,
    django_capture_on_commit_callbacks,
    media_root,
):
    note = upload("opening-hours.md", b"# Opening hours\n\nThe shop opens at 9 on Saturdays.\n")
    exchange, _ = _send_and_answer(
        client_alice,
        knowledge_agent,
        "When does the shop open on Saturdays?",
        django_capture_on_commit_callbacks,
        files=[note],
    )
    assert "opens at 9 on Saturdays" in exchange.answer  # read from the attachment, not the knowledge

    http_agent = AgentFactory(team=team, kind=Agent.Kind.HTTP, version__http_url=agent_server.url)
    with_file, _ = _send_and_answer(
        client_alice,
        http_agent,
        "Read this",
        django_capture_on_commit_callbacks,
        files=[upload("hours.md", b"Open at 9.")],
    )
    [document] = agent_server.received[0]["documents"]
    assert document["name"] == "hours.md"
    downloaded = client.get(document["url"].removeprefix("http://testserver"))
    assert downloaded.status_code == 200 and b"".join(downloaded.streaming_content) == b"Open at 9."
    assert client.get(document["url"].replace("/documents/", "/documents/x")).status_code in (403, 404)
    assert with_file.status == Exchange.Status.DONE


def test_a_bad_attachment_is_refused_by_name_and_nothing_is_sent(client_alice, knowledge_agent, fake_llm):
    response = _send(client_alice, knowledge_agent, "Read this", files=[upload("notes.pdf", b"not a pdf at all")])
    assert b"notes.pdf" in response.content
    assert not Exchange.objects.exists()


# ---- save as test case ----------------------------------------------------------------


def test_a_turn_becomes_a_test_case_with_its_conversation_tools_and_attachments(
    client_alice, team, fake_llm, tasks_run_here, django_capture_on_commit_callbacks
):
    agent = AgentFactory(team=team, kind=Agent.Kind.LLM, version__tools=[{"name": "quote", "result": "20 EUR"}])
    dataset = DatasetFactory(agent=agent, name="Pricing")
    fake_llm.add_rule(task="agent", reply="Which plan?", times=1)
    fake_llm.add_rule(task="agent", tool_calls=[{"name": "quote", "arguments": {"plan": "pro"}}], times=1)
    fake_llm.add_rule(task="agent", reply="Pro costs 20 EUR.")
    first, _ = _send_and_answer(client_alice, agent, "How much is it?", django_capture_on_commit_callbacks)
    second, _ = _send_and_answer(client_alice, agent, "Pro", django_capture_on_commit_callbacks, chat=first.chat)
    url = reverse("playground:save_case", args=[agent.pk, second.pk])

    dialog = client_alice.get(url, headers=HTMX)
    assert dialog.status_code == 200
    assert b"Pro costs 20 EUR." in dialog.content  # the answer, as a draft expected answer
    assert b"&quot;quote&quot;" in dialog.content
    response = client_alice.post(
        url,
        {
            "dataset": dataset.pk,
            "question": "Pro",
            "expected_answer": "The Pro plan costs 20 EUR per month.",
            "expected_tools": json.dumps(second.tool_calls),
            "keep_conversation": "on",
        },
        headers=HTMX,
    )

    assert response.status_code == 200 and response["HX-Redirect"].endswith(f"chat={first.chat}")
    case = TestCase.objects.get(dataset=dataset)
    assert case.question == "Pro"
    assert case.expected_answer == "The Pro plan costs 20 EUR per month."
    assert case.expected_tools == [{"name": "quote", "args": {"plan": "pro"}}]
    assert case.turns == [{"user": "How much is it?", "expected": "Which plan?"}]
    assert "playground" in case.tags
    second.refresh_from_db()
    assert second.saved_case == case
    page = client_alice.get(reverse("playground:exchange", args=[agent.pk, second.pk]), headers=HTMX)
    assert b"Saved as a test case of" in page.content


def test_save_as_case_refuses_bad_tools_and_another_agents_dataset(
    client_alice, team, knowledge_agent, tasks_run_here, django_capture_on_commit_callbacks
):
    exchange, _ = _send_and_answer(client_alice, knowledge_agent, "Refunds?", django_capture_on_commit_callbacks)
    other = DatasetFactory(agent=AgentFactory(team=team))
    url = reverse("playground:save_case", args=[knowledge_agent.pk, exchange.pk])
    own = DatasetFactory(agent=knowledge_agent)

    bad_json = client_alice.post(url, {"dataset": own.pk, "question": "Refunds?", "expected_tools": "[{"})
    foreign = client_alice.post(url, {"dataset": other.pk, "question": "Refunds?"})

    assert b"Not valid JSON" in bad_json.content
    assert b"Select a valid choice" in foreign.content
    assert not TestCase.objects.filter(question="Refunds?").exists()


# ---- reaper, permissions --------------------------------------------------------------


def test_an_exchange_no_worker_answers_is_failed_with_a_message(alice, knowledge_agent, settings):
    exchange = Exchange.objects.create(
        agent=knowledge_agent, version=knowledge_agent.current_version, created_by=alice, message="Hello?"
    )
    Exchange.objects.filter(pk=exchange.pk).update(
        created_at=timezone.now() - timedelta(seconds=settings.EVALSITE_PLAYGROUND_TIMEOUT + 1)
    )
    fresh = Exchange.objects.create(
        agent=knowledge_agent, version=knowledge_agent.current_version, created_by=alice, message="Now"
    )

    assert services.exchange_reap() == 1

    exchange.refresh_from_db()
    fresh.refresh_from_db()
    assert exchange.status == Exchange.Status.FAILED and "no worker took the message" in exchange.error
    assert fresh.status == Exchange.Status.QUEUED
    services.exchange_answer(exchange_id=exchange.pk)  # a late delivery changes nothing
    exchange.refresh_from_db()
    assert exchange.status == Exchange.Status.FAILED


def test_a_chat_is_its_authors_only(client_bob, client_charlie, alice, knowledge_agent):
    exchange = Exchange.objects.create(
        agent=knowledge_agent, version=knowledge_agent.current_version, created_by=alice, message="Private?"
    )
    for client, status in ((client_bob, 404), (client_charlie, 404)):
        assert client.get(reverse("playground:exchange", args=[knowledge_agent.pk, exchange.pk])).status_code == status
        assert client.get(reverse("playground:save_case", args=[knowledge_agent.pk, exchange.pk])).status_code == status
    page = client_bob.get(reverse("playground:page", args=[knowledge_agent.pk]) + f"?chat={exchange.chat}")
    assert page.status_code == 200 and b"Private?" not in page.content
    assert client_charlie.get(reverse("playground:page", args=[knowledge_agent.pk])).status_code == 404


def test_the_page_lists_recent_chats_and_offers_every_version(client_alice, alice, knowledge_agent):
    knowledge_agent.versions.create(number=2, knowledge="More.", note="Second")
    Exchange.objects.create(
        agent=knowledge_agent, version=knowledge_agent.current_version, created_by=alice, message="First chat question"
    )
    page = client_alice.get(reverse("playground:page", args=[knowledge_agent.pk]))
    assert page.status_code == 200
    assert b"First chat question" in page.content
    assert b"v1 (current)" in page.content and b">v2<" in page.content
    assert Dataset.objects.count() == 0


def test_without_javascript_an_error_shows_the_whole_page(client_alice, knowledge_agent):
    response = _send(client_alice, knowledge_agent, "", htmx=False)
    assert response.status_code == 200
    assert b"Write a message to send." in response.content
    assert b"Recent chats" in response.content  # the page, not only the chat fragment

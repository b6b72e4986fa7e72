"""Agent adapters: llm (tool loop through the gateway), http (the JSON contract), knowledge (offline retrieval)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agents.adapters import (
    NO_ANSWER,
    AgentConfigError,
    AgentError,
    AgentRequest,
    DocumentRef,
    adapter_for,
    best_passages,
    split_passages,
    system_prompt,
)
from agents.models import Agent, AgentVersion
from tests.factories import AgentFactory

pytestmark = pytest.mark.django_db


class FakeAgentServer:
    """A team's HTTP agent: answers each POST from a script and records what it got."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, object, float]] = []  # (status, body, delay)
        self.received: list[dict] = []
        self.headers: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.received.append(body)
                server.headers.append(dict(self.headers.items()))
                status, reply, delay = server.replies.pop(0) if server.replies else (200, {"answer": "ok"}, 0)
                if delay:
                    threading.Event().wait(delay)
                payload = reply.encode() if isinstance(reply, str) else json.dumps(reply).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/agent"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def agent_server():
    server = FakeAgentServer()
    yield server
    server.stop()


def _version(kind: str, **fields) -> AgentVersion:
    agent = AgentFactory(kind=kind, **{f"version__{name}": value for name, value in fields.items()})
    return AgentVersion.objects.select_related("agent").get(pk=agent.current_version_id)


# ---- knowledge -------------------------------------------------------------------------


def test_knowledge_is_split_into_passages_by_blank_lines_and_headings():
    text = "# Refunds\nWithin 30 days.\nTo the card.\n\nSecond para.\n## Support\nOpen 9-17."
    assert split_passages(text) == [
        "Refunds: Within 30 days.\nTo the card.",
        "Refunds: Second para.",
        "Support: Open 9-17.",
    ]


def test_retrieval_picks_the_passage_sharing_the_question_terms():
    passages = ["Refunds are available within 30 days.", "Support is open 9-17 CET.", "We accept Visa."]
    assert best_passages("When is support open?", passages) == ["Support is open 9-17 CET."]
    assert best_passages("Can I get refunded?", passages) == ["Refunds are available within 30 days."]
    assert best_passages("Completely unrelated zebra", passages) == []


def test_the_knowledge_agent_answers_deterministically_with_its_retrieval_context():
    adapter = adapter_for(_version(Agent.Kind.KNOWLEDGE))
    reply = adapter.ask(AgentRequest(question="How long is the refund window?"))
    again = adapter.ask(AgentRequest(question="How long is the refund window?"))
    assert reply.answer == again.answer == "Refunds are available within 30 days of purchase."
    assert reply.retrieval_context == [reply.answer]
    assert reply.cost == 0


def test_the_knowledge_agent_says_so_when_it_knows_nothing_and_reads_documents():
    adapter = adapter_for(_version(Agent.Kind.KNOWLEDGE))
    assert adapter.ask(AgentRequest(question="What is the phone number?")).answer == NO_ANSWER
    document = DocumentRef(name="contacts.pdf", text="Phone support: call +1 555 0100 on weekdays.")
    assert adapter.ask(AgentRequest(question="What is the phone number?", documents=[document])).answer.startswith(
        "Phone support"
    )


def test_a_knowledge_agent_without_knowledge_cannot_run():
    with pytest.raises(AgentConfigError, match="no knowledge text"):
        adapter_for(_version(Agent.Kind.KNOWLEDGE, knowledge="")).check()


# ---- llm -----------------------------------------------------------------------------------


def test_the_system_prompt_is_composed_from_the_version_and_the_documents():
    version = _version(Agent.Kind.LLM, skills="Explain plans.", guardrails="Never promise refunds.")
    request = AgentRequest(
        question="Q",
        documents=[DocumentRef(name="policy.pdf", text="Refund policy text")],
        document_context="Page 2 excerpt",
    )
    prompt = system_prompt(version, request)
    assert prompt.startswith("You are the support assistant for Acme Cloud.")
    for part in (
        "## Skills\nExplain plans.",
        "## Knowledge\nRefunds are available",
        "## Guardrails\nNever promise refunds.",
        "### policy.pdf\nRefund policy text",
        "### Context\nPage 2 excerpt",
    ):
        assert part in prompt


def test_the_llm_agent_loops_over_tool_calls_with_canned_results(fake_llm):
    tools = [
        {"name": "lookup_order", "description": "Find an order", "parameters": {"type": "object"}, "result": "paid"}
    ]
    version = _version(Agent.Kind.LLM, tools=tools)
    fake_llm.add_rule(task="agent", tool_calls=[{"name": "lookup_order", "arguments": {"order_id": "A-1"}}], times=1)
    fake_llm.add_rule(task="agent", tool_calls=[{"name": "unknown_tool", "arguments": {}}], times=1)
    fake_llm.add_rule(task="agent", reply="It is paid.")

    reply = adapter_for(version).ask(AgentRequest(question="Is order A-1 paid?", trace={"run": 5, "case": 9}))

    assert reply.answer == "It is paid."
    assert reply.tool_calls == [
        {"name": "lookup_order", "args": {"order_id": "A-1"}},
        {"name": "unknown_tool", "args": {}},
    ]
    assert reply.tokens > 0
    calls = [r for r in fake_llm.requests if r.task == "agent"]
    assert len(calls) == 3
    assert calls[0].tools[0]["function"]["name"] == "lookup_order"
    assert calls[1].messages[-1]["content"] == "paid"
    assert calls[2].messages[-1]["content"] == "Error: there is no tool named 'unknown_tool'."
    assert fake_llm.count(task="agent", run=5, case=9) == 3


def test_a_model_that_never_stops_calling_tools_is_cut_off(fake_llm):
    version = _version(Agent.Kind.LLM, tools=[{"name": "t", "result": "r"}])
    fake_llm.add_rule(task="agent", tool_calls=[{"name": "t", "arguments": {}}])
    with pytest.raises(AgentError, match="still calling tools after 6 rounds"):
        adapter_for(version).ask(AgentRequest(question="Q"))


def test_model_errors_become_readable_agent_errors(fake_llm, settings):
    settings.EVALSITE_LLM_RETRIES = 0
    fake_llm.add_rule(task="agent", status=401)
    with pytest.raises(AgentError, match=r"rejected the API key \(401\)"):
        adapter_for(_version(Agent.Kind.LLM)).ask(AgentRequest(question="Q"))


def test_an_llm_agent_without_a_model_cannot_run(no_llm):
    with pytest.raises(AgentConfigError, match="no model"):
        adapter_for(_version(Agent.Kind.LLM)).check()


# ---- http --------------------------------------------------------------------------------------


def test_the_http_agent_gets_the_json_contract_and_its_answer_is_read(agent_server):
    version = _version(Agent.Kind.HTTP, http_url=agent_server.url, http_headers={"X-Api-Key": "s3cret"})
    agent_server.replies.append(
        (
            200,
            {
                "output": "30 days",
                "tool_calls": [{"function": {"name": "kb", "arguments": '{"q": "refund"}'}}],
                "retrieval_context": [{"text": "Refunds within 30 days"}],
                "trace_id": "tr-1",
            },
            0,
        )
    )
    request = AgentRequest(
        question="Refund window?",
        conversation=[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
        documents=[DocumentRef(name="policy.pdf", url="https://evalsite.example/doc/abc")],
        document_context="Page 2",
        case_id="refund-1",
        run_id=7,
    )

    reply = adapter_for(version).ask(request)

    assert agent_server.received[0] == {
        "question": "Refund window?",
        "conversation": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
        "documents": [{"name": "policy.pdf", "url": "https://evalsite.example/doc/abc", "context": "Page 2"}],
        "case_id": "refund-1",
        "run_id": 7,
    }
    assert agent_server.headers[0]["X-Api-Key"] == "s3cret"
    assert reply.answer == "30 days"
    assert reply.tool_calls == [{"name": "kb", "args": {"q": "refund"}}]
    assert reply.retrieval_context == ["Refunds within 30 days"]
    assert reply.trace_id == "tr-1"


def test_a_non_2xx_answer_is_an_error_without_retry(agent_server):
    agent_server.replies.append((400, {"error": "bad question"}, 0))
    with pytest.raises(AgentError, match='The agent answered HTTP 400: {"error": "bad question"}'):
        adapter_for(_version(Agent.Kind.HTTP, http_url=agent_server.url)).ask(AgentRequest(question="Q"))
    assert len(agent_server.received) == 1


def test_transient_failures_are_retried(agent_server, settings):
    settings.EVALSITE_LLM_BACKOFF = 0.01
    agent_server.replies += [(503, "busy", 0), (429, "slow down", 0), (200, {"answer": "fine"}, 0)]
    reply = adapter_for(_version(Agent.Kind.HTTP, http_url=agent_server.url)).ask(AgentRequest(question="Q"))
    assert reply.answer == "fine"
    assert len(agent_server.received) == 3


def test_a_timeout_is_not_asked_again_by_default(agent_server, settings):
    # The agent may still be working on it (and have side effects): a second request repeats
    # the expensive part, so only EVALSITE_LLM_RETRY_TIMEOUTS asks again.
    settings.EVALSITE_LLM_RETRIES = 1
    settings.EVALSITE_LLM_BACKOFF = 0.01
    agent_server.replies += [(200, {"answer": "late"}, 3), (200, {"answer": "late"}, 3)]
    with pytest.raises(AgentError, match=r"The agent did not answer within 1 s\.$"):
        adapter_for(_version(Agent.Kind.HTTP, http_url=agent_server.url, http_timeout=1)).ask(
            AgentRequest(question="Q")
        )
    assert len(agent_server.received) == 1


def test_a_timeout_is_an_error_after_the_retries_when_timeouts_are_retried(agent_server, settings):
    settings.EVALSITE_LLM_RETRY_TIMEOUTS = True
    settings.EVALSITE_LLM_RETRIES = 1
    settings.EVALSITE_LLM_BACKOFF = 0.01
    agent_server.replies += [(200, {"answer": "late"}, 3), (200, {"answer": "late"}, 3)]
    with pytest.raises(AgentError, match=r"The agent did not answer within 1 s after 2 attempts\."):
        adapter_for(_version(Agent.Kind.HTTP, http_url=agent_server.url, http_timeout=1)).ask(
            AgentRequest(question="Q")
        )


@pytest.mark.parametrize(
    ("body", "message"),
    [("not json", "not JSON"), ([1, 2], "must be a JSON object"), ({"text": "hi"}, "no 'answer'")],
)
def test_a_response_without_an_answer_is_an_error(agent_server, body, message):
    agent_server.replies.append((200, body, 0))
    with pytest.raises(AgentError, match=message):
        adapter_for(_version(Agent.Kind.HTTP, http_url=agent_server.url)).ask(AgentRequest(question="Q"))


def test_an_http_agent_without_a_url_cannot_run():
    with pytest.raises(AgentConfigError, match="no endpoint URL"):
        adapter_for(_version(Agent.Kind.HTTP, http_url="")).check()


def test_the_llm_agent_passes_its_own_timeout_to_the_gateway(fake_llm):
    fake_llm.add_rule(task="agent", reply="late", delay=1.5)
    with pytest.raises(AgentError, match=r"^The model did not answer within 1 s\.$") as caught:
        adapter_for(_version(Agent.Kind.LLM, llm_timeout=1)).ask(AgentRequest(question="Q"))
    assert caught.value.retryable
    assert fake_llm.count(task="agent") == 1  # a timeout is not retried (EVALSITE_LLM_RETRY_TIMEOUTS off)

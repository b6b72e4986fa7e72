"""Real clients no one here wrote: an app using the openai SDK, instrumented by the official
opentelemetry-instrumentation-openai-v2 or by openinference-instrumentation-openai, exporting with
the SDK's own OTLP/HTTP exporter to a running console (live_server). Every message, the tool call
and every token count the app sent must be on the stored trace exactly."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

from accounts.services import api_token_create
from monitoring.models import Span, Trace
from monitoring.services import service_mapping_create

pytestmark = pytest.mark.django_db(transaction=True)
CLIENT = Path(__file__).parent / "clients" / "chat_client.py"
ARGUMENTS = {"order_id": "A-1042"}


def run_client(*, instrumentation, fake_llm, live_server, key, header="authorization", session="session-1", env=None):
    fake_llm.add_rule(
        contains="Where is my order", tool_calls=[{"name": "get_order_status", "arguments": ARGUMENTS}], times=1
    )
    fake_llm.add_rule(contains="shipped", reply="Your order A-1042 has shipped and arrives in 2 days.")
    command = [
        sys.executable,
        str(CLIENT),
        f"--instrumentation={instrumentation}",
        f"--llm-url={fake_llm.url}",
        f"--endpoint={live_server.url}/v1/traces",
        f"--key={key}",
        f"--header={header}",
        f"--session={session}",
    ]
    environment = {**os.environ, **(env or {})}
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False, env=environment)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Failed to export" not in done.stderr, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def assert_trace_has_what_was_sent(trace: Trace, sent: dict) -> None:
    system, user, assistant_call, tool = sent["messages"]
    assert trace.question == user["content"] == "Where is my order A-1042?"
    assert trace.answer == sent["answer"] == "Your order A-1042 has shipped and arrives in 2 days."
    stored = trace.messages
    assert [m["role"] for m in stored] == ["system", "user", "assistant", "tool", "assistant"]
    assert [m["content"] for m in stored] == [system["content"], user["content"], "", tool["content"], sent["answer"]]
    call = sent["tool_call"]
    assert stored[2]["tool_calls"] == [{"id": call["id"], "name": call["name"], "arguments": ARGUMENTS}]
    assert stored[3]["tool_call_id"] == call["id"]
    assert trace.tool_calls == [
        {"id": call["id"], "name": "get_order_status", "arguments": ARGUMENTS, "result": tool["content"]}
    ]
    assert trace.input_tokens == sum(prompt for prompt, _ in sent["usage"])
    assert trace.output_tokens == sum(completion for _, completion in sent["usage"])
    assert trace.model == "fake-agent" or trace.model.startswith("fake")
    assert trace.user_id == "customer-7"
    assert trace.conversation is not None and trace.conversation.session_id == "session-1"
    # The app's span, the two model calls, kept with every attribute.
    assert trace.span_count == Span.objects.filter(trace=trace).count() >= 3
    assert trace.name == "support turn"


@pytest.mark.parametrize("instrumentation", ["openai-v2", "openinference"])
def test_a_real_instrumented_client_exports_its_conversation_exactly(
    instrumentation, fake_llm, live_server, ingestion_key, team, agent, alice
):
    service_mapping_create(team=team, service_name="support-bot", agent=agent)

    sent = run_client(instrumentation=instrumentation, fake_llm=fake_llm, live_server=live_server, key=ingestion_key)

    trace = Trace.objects.get(team=team, otel_trace_id=sent["trace_id"])
    assert trace.agent == agent
    assert_trace_has_what_was_sent(trace, sent)
    # And the same on the trace API.
    token = api_token_create(user=alice, name="reader")[1]
    shown = Client().get(f"/api/agents/{agent.pk}/traces/{trace.pk}", headers={"Authorization": f"Bearer {token}"})
    assert shown.status_code == 200
    body = shown.json()
    assert body["messages"] == trace.messages and body["tool_calls"] == trace.tool_calls
    assert (body["question"], body["answer"]) == (trace.question, trace.answer)
    assert (body["input_tokens"], body["output_tokens"]) == (trace.input_tokens, trace.output_tokens)
    assert body["session_id"] == "session-1" and len(body["spans"]) == trace.span_count


def test_the_exporter_with_the_evalsite_header_gzip_and_a_bad_key(fake_llm, live_server, ingestion_key, team):
    # The SDK's exporter gzips its bodies when told to by the standard variable.
    sent = run_client(
        env={"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "gzip"},
        instrumentation="openai-v2",
        fake_llm=fake_llm,
        live_server=live_server,
        key=ingestion_key,
        header="x-evalsite-key",
    )
    assert Trace.objects.filter(team=team, otel_trace_id=sent["trace_id"]).exists()

    fake_llm.reset()
    command = [
        sys.executable,
        str(CLIENT),
        "--instrumentation=openai-v2",
        f"--llm-url={fake_llm.url}",
        f"--endpoint={live_server.url}/v1/traces",
        "--key=evi_not-a-key",
    ]
    fake_llm.add_rule(
        contains="Where is my order", tool_calls=[{"name": "get_order_status", "arguments": ARGUMENTS}], times=1
    )
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert "401" in done.stderr and Trace.objects.count() == 1

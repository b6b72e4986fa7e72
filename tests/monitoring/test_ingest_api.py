"""POST /api/traces (plain JSON) and POST /api/feedback, with an ingestion key."""

import pytest

from monitoring.models import Feedback, Trace

pytestmark = pytest.mark.django_db
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"


def send(client, path, body, key):
    return client.post(path, body, content_type="application/json", headers={"Authorization": f"Bearer {key}"})


PLAIN = {
    "trace_id": TRACE_ID,
    "session_id": "chat-77",
    "service": "support-bot",
    "user_id": "customer-7",
    "model": "gpt-4o-mini",
    "messages": [
        {"role": "system", "content": "You are the support bot."},
        {"role": "user", "content": "Where is my order A-1042?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "call_1", "name": "get_order_status", "arguments": {"order_id": "A-1042"}}],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"status": "shipped"}'},
    ],
    "answer": "It has shipped.",
    "tool_calls": [
        {
            "id": "call_1",
            "name": "get_order_status",
            "arguments": {"order_id": "A-1042"},
            "result": {"status": "shipped"},
        }
    ],
    "documents": [{"id": "kb-3", "content": "Orders ship in 2 days.", "score": 0.82}],
    "tokens": {"input": 120, "output": 14},
    "cost": 0.0012,
    "timings": {"started_at": "2026-12-07T10:00:00Z", "duration_ms": 850},
    "tags": ["vip"],
    "attributes": {"deployment.environment": "prod", "app.build": 42},
}


def test_a_plain_trace_is_stored_like_an_otlp_one(client, ingestion_key, team, agent):
    from monitoring.services import service_mapping_create

    service_mapping_create(team=team, service_name="support-bot", agent=agent)

    response = send(client, "/api/traces", PLAIN, ingestion_key)

    assert response.status_code == 200, response.content
    assert response.json()["trace_id"] == TRACE_ID and response.json()["spans_stored"] == 2
    trace = Trace.objects.get(team=team, otel_trace_id=TRACE_ID)
    assert trace.agent == agent and trace.conversation.session_id == "chat-77"
    assert trace.question == "Where is my order A-1042?" and trace.answer == "It has shipped."
    assert [m["role"] for m in trace.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert trace.messages[2]["tool_calls"] == [
        {"id": "call_1", "name": "get_order_status", "arguments": {"order_id": "A-1042"}}
    ]
    assert trace.tool_calls == [
        {
            "id": "call_1",
            "name": "get_order_status",
            "arguments": {"order_id": "A-1042"},
            "result": '{"status": "shipped"}',
        }
    ]
    assert trace.retrieval_documents == [{"id": "kb-3", "content": "Orders ship in 2 days.", "score": 0.82}]
    assert (trace.input_tokens, trace.output_tokens, float(trace.cost)) == (120, 14, 0.0012)
    assert (trace.duration_ms, trace.started_at.isoformat(), trace.tags) == (850, "2026-12-07T10:00:00+00:00", ["vip"])
    assert trace.attributes["deployment.environment"] == "prod" and trace.attributes["app.build"] == 42
    assert trace.user_id == "customer-7" and trace.model == "gpt-4o-mini"


def test_a_plain_trace_sent_twice_is_kept_once(client, ingestion_key):
    send(client, "/api/traces", PLAIN, ingestion_key)
    send(client, "/api/traces", PLAIN, ingestion_key)

    assert Trace.objects.get(otel_trace_id=TRACE_ID).span_count == 2


def test_a_plain_trace_is_masked(client, ingestion_key):
    body = {"messages": [{"role": "user", "content": "I am ann@example.com, +44 20 7946 0958"}], "answer": "ok"}

    response = send(client, "/api/traces", body, ingestion_key)

    trace = Trace.objects.get(otel_trace_id=response.json()["trace_id"])
    assert trace.question == "I am [masked:email], [masked:phone]" and trace.masked == {"email": 1, "phone": 1}


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"trace_id": "xyz", "answer": "a"}, "trace_id"),
        ({"trace_id": "0" * 32, "answer": "a"}, "trace_id"),
        ({}, "messages"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages"),
        ({"answer": "a", "tokens": {"input": -1}}, "tokens"),
        ({"answer": "a", "timings": {"started_at": "yesterday"}}, "timings"),
    ],
)
def test_a_bad_plain_trace_is_422_naming_the_field(client, ingestion_key, body, where):
    response = send(client, "/api/traces", body, ingestion_key)

    assert response.status_code == 422
    assert where in response.json()["detail"][0]["loc"]


def test_the_ingestion_endpoints_want_an_ingestion_key(client, alice):
    from accounts.services import api_token_create

    user_token = api_token_create(user=alice, name="me")[1]
    for path in ("/api/traces", "/api/feedback"):
        assert send(client, path, {"answer": "a"}, "evi_nope").status_code == 401
        assert send(client, path, {"answer": "a"}, user_token).status_code == 401
        assert client.post(path, {}, content_type="application/json").status_code == 401


def test_feedback_thumbs_and_score_before_and_after_the_trace(client, ingestion_key, team):
    early = send(client, "/api/feedback", {"trace_id": TRACE_ID, "thumbs": "down", "comment": "wrong"}, ingestion_key)
    send(client, "/api/traces", PLAIN, ingestion_key)
    late = client.post(
        "/api/feedback",
        {"trace_id": TRACE_ID.upper(), "score": 7.5, "user_id": "u1"},
        content_type="application/json",
        headers={"x-evalsite-key": ingestion_key},
    )

    assert early.status_code == 201 and early.json()["linked"] is False
    assert late.status_code == 201 and late.json()["linked"] is True
    trace = Trace.objects.get(otel_trace_id=TRACE_ID)
    assert sorted(trace.feedback.values_list("kind", "value")) == [("score", 7.5), ("thumbs", 0.0)]


@pytest.mark.parametrize(
    "body",
    [
        {"trace_id": TRACE_ID},
        {"trace_id": TRACE_ID, "thumbs": "up", "score": 3},
        {"trace_id": TRACE_ID, "score": 11},
        {"trace_id": TRACE_ID, "thumbs": "sideways"},
        {"trace_id": "nope", "thumbs": "up"},
    ],
)
def test_bad_feedback_is_422(client, ingestion_key, body):
    assert send(client, "/api/feedback", body, ingestion_key).status_code == 422
    assert not Feedback.objects.exists()


def test_the_endpoints_are_in_the_openapi_schema_with_their_security(client):
    schema = client.get("/api/openapi.json").json()

    for path in ("/api/traces", "/api/feedback"):
        operation = schema["paths"][path]["post"]
        assert {name for item in operation["security"] for name in item} == {"IngestionBearer", "IngestionHeader"}


def test_an_unknown_field_is_refused_not_dropped(client, ingestion_key):
    response = send(client, "/api/traces", {"answer": "a", "answr": "typo"}, ingestion_key)

    assert response.status_code == 422 and "answr" in response.json()["detail"][0]["loc"]

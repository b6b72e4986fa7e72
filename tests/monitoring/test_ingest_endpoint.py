"""POST /v1/traces with exact OTLP bodies: what is stored, merging across requests, conversations,
agents, masking, early feedback, the errors a sender reads and the number of queries."""

import gzip
import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from monitoring.ingest.services import feedback_record
from monitoring.models import Conversation, Feedback, IngestionKey, Span, Trace
from monitoring.services import agent_monitoring_update, ingestion_key_revoke, service_mapping_create
from tests.monitoring import otlp_builders as build

pytestmark = pytest.mark.django_db
PROTOBUF = "application/x-protobuf"


def post(client, message, key, *, content_type=PROTOBUF, **headers):
    body = message if isinstance(message, bytes) else message.SerializeToString()
    return client.post(
        "/v1/traces", body, content_type=content_type, headers={"Authorization": f"Bearer {key}", **headers}
    )


def test_a_trace_is_stored_with_its_summary_and_every_attribute(client, ingestion_key, team):
    trace_id = build.trace_id()
    attributes = {**build.chat_attributes("Where is order A-1042?", "It shipped."), "custom.flag": "kept"}
    message = build.request([build.span(trace_id, attributes=attributes)], resource={"deployment.environment": "prod"})

    response = post(client, message, ingestion_key)

    assert response.status_code == 200
    assert response["Content-Type"] == PROTOBUF
    assert not ExportTraceServiceResponse.FromString(response.content).HasField("partial_success")
    trace = Trace.objects.get(team=team, otel_trace_id=trace_id)
    assert trace.question == "Where is order A-1042?" and trace.answer == "It shipped."
    assert (trace.input_tokens, trace.output_tokens, trace.model, trace.span_count) == (12, 5, "fake-agent", 1)
    assert trace.service_name == "support-bot" and trace.agent is None
    assert trace.attributes["deployment.environment"] == "prod" and trace.attributes["custom.flag"] == "kept"
    assert Span.objects.get(trace=trace).attributes["custom.flag"] == "kept"


def test_spans_of_one_trace_in_two_requests_merge(client, ingestion_key, team):
    trace_id, root_id = build.trace_id(), "a1" * 8
    child = build.span(trace_id, parent=root_id, attributes=build.chat_attributes("Hi?", "Hello."), start_ms=10)
    root = build.span(trace_id, name="support turn", span_id=root_id, attributes={"session.id": "s-9"}, duration_ms=500)

    post(client, build.request([child]), ingestion_key)
    post(client, build.request([root]), ingestion_key)
    post(client, build.request([root]), ingestion_key)  # an exporter's retry: kept once

    trace = Trace.objects.get(team=team, otel_trace_id=trace_id)
    assert (trace.span_count, trace.name, trace.duration_ms, trace.answer) == (2, "support turn", 500, "Hello.")
    assert trace.spans.count() == 2
    assert trace.conversation.session_id == "s-9" and trace.conversation.trace_count == 1


def test_traces_of_a_session_make_one_conversation(client, ingestion_key, team):
    spans = [build.span(build.trace_id(), attributes={"gen_ai.conversation.id": "c-1"}, start_ms=i) for i in range(3)]

    post(client, build.request(spans[:2]), ingestion_key)
    post(client, build.request(spans[2:]), ingestion_key)

    conversation = Conversation.objects.get(team=team, session_id="c-1")
    assert conversation.trace_count == 3 and conversation.traces.count() == 3
    traces = Trace.objects.filter(conversation=conversation)
    assert conversation.started_at == min(t.started_at for t in traces)
    assert conversation.last_activity_at == max(t.ended_at for t in traces)


def test_a_service_maps_to_its_agent_and_an_explicit_attribute_wins(client, ingestion_key, team, agent):
    from tests.factories import AgentFactory

    other = AgentFactory(team=team, name="Billing bot")
    service_mapping_create(team=team, service_name="support-bot", agent=agent)
    mapped, explicit, by_name = build.trace_id(), build.trace_id(), build.trace_id()
    message = build.request(
        [
            build.span(mapped),
            build.span(explicit, attributes={"evalsite.agent": str(other.pk)}),
            build.span(by_name, attributes={"evalsite.agent": "Billing bot"}),
        ]
    )

    post(client, message, ingestion_key)

    agents = dict(Trace.objects.values_list("otel_trace_id", "agent_id"))
    assert agents == {mapped: agent.pk, explicit: other.pk, by_name: other.pk}


def test_personal_data_is_masked_unless_the_agent_turned_it_off(client, ingestion_key, team, agent):
    service_mapping_create(team=team, service_name="support-bot", agent=agent)
    attributes = build.chat_attributes("Mail me at ann@example.com", "Card 4111 1111 1111 1111 noted.")
    masked_id, plain_id = build.trace_id(), build.trace_id()

    post(client, build.request([build.span(masked_id, attributes=attributes)]), ingestion_key)
    agent_monitoring_update(agent=agent, mask_personal_data=False)
    post(client, build.request([build.span(plain_id, attributes=attributes)]), ingestion_key)

    masked = Trace.objects.get(otel_trace_id=masked_id)
    assert masked.question == "Mail me at [masked:email]" and masked.answer == "Card [masked:card] noted."
    assert masked.masked == {"email": 1, "card": 1}
    assert "ann@example.com" not in json.dumps(list(masked.spans.values("attributes")))
    plain = Trace.objects.get(otel_trace_id=plain_id)
    assert plain.question == "Mail me at ann@example.com" and plain.masked == {}


def test_feedback_before_its_trace_is_linked_when_the_trace_comes(client, ingestion_key, team):
    trace_id = build.trace_id()
    early = feedback_record(team=team, otel_trace_id=trace_id, kind="thumbs", value=0, comment="wrong")

    post(client, build.request([build.span(trace_id)]), ingestion_key)

    early.refresh_from_db()
    assert early.trace == Trace.objects.get(otel_trace_id=trace_id)
    late = feedback_record(team=team, otel_trace_id=trace_id, kind="score", value=7)
    assert late.trace_id == early.trace_id and Feedback.objects.filter(trace=early.trace).count() == 2


def test_queries_do_not_grow_with_the_spans(client, ingestion_key, agent, team):
    service_mapping_create(team=team, service_name="support-bot", agent=agent)

    def queries(count: int) -> int:
        spans = []
        for _ in range(count):
            trace_id = build.trace_id()
            spans += [build.span(trace_id, attributes={**build.chat_attributes("q", "a"), "session.id": trace_id})]
            spans += [build.span(trace_id, name="tool", attributes={"gen_ai.tool.name": "x"})]
        with CaptureQueriesContext(connection) as captured:
            assert post(client, build.request(spans), ingestion_key).status_code == 200
        return len(captured)

    small, large = queries(2), queries(200)

    assert Span.objects.count() == 404
    # SQLite takes at most 999 parameters a statement, so its inserts go in batches of about 70
    # rows (PostgreSQL's in 500): only those grow.
    inserts = -(-404 // 70) * 2
    assert small <= 20 and large <= small + inserts, (small, large)


# ---- errors ----------------------------------------------------------------------------


def status_of(response) -> dict:
    from google.rpc.status_pb2 import Status

    if response["Content-Type"] == PROTOBUF:
        return json_format.MessageToDict(Status.FromString(response.content))
    return response.json()


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer evi_nope"}, {"Authorization": "Basic abc"}])
def test_a_missing_or_unknown_key_is_401_with_a_status(client, headers):
    response = client.post("/v1/traces", b"", content_type=PROTOBUF, headers=headers)

    assert response.status_code == 401
    assert "ingestion key" in status_of(response)["message"]


def test_a_revoked_key_is_401_and_the_header_form_works(client, team, ingestion_key):
    message = build.request([build.span(build.trace_id())]).SerializeToString()
    ok = client.post("/v1/traces", message, content_type=PROTOBUF, headers={"x-evalsite-key": ingestion_key})
    ingestion_key_revoke(key=IngestionKey.objects.get(team=team))
    refused = client.post("/v1/traces", message, content_type=PROTOBUF, headers={"x-evalsite-key": ingestion_key})

    assert (ok.status_code, refused.status_code) == (200, 401)


def test_last_used_is_written_at_most_once_a_minute(client, team, ingestion_key):
    message = build.request([build.span(build.trace_id())])
    post(client, message, ingestion_key)
    first = IngestionKey.objects.get(team=team).last_used_at

    with CaptureQueriesContext(connection) as captured:
        post(client, build.request([build.span(build.trace_id())]), ingestion_key)

    assert first is not None and IngestionKey.objects.get(team=team).last_used_at == first
    assert not [q for q in captured.captured_queries if "ingestionkey" in q["sql"].lower() and "UPDATE" in q["sql"]]


def test_a_malformed_protobuf_is_400_with_a_message(client, ingestion_key):
    response = post(client, b"\x0a\xff\xff\xff\xff\x0f garbage", ingestion_key)

    assert response.status_code == 400
    assert "not a valid ExportTraceServiceRequest" in status_of(response)["message"]


def test_malformed_json_is_400_in_json(client, ingestion_key):
    response = post(client, b'{"resourceSpans": 7', ingestion_key, content_type="application/json")

    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert "OTLP-JSON" in response.json()["message"]


def test_an_oversized_body_and_a_gzip_bomb_are_413(client, ingestion_key, settings):
    settings.INGEST_MAX_BYTES = 10_000
    big = post(client, b"\x00" * 20_000, ingestion_key)
    bomb = post(client, gzip.compress(b"\x00" * 5_000_000), ingestion_key, **{"Content-Encoding": "gzip"})

    assert (big.status_code, bomb.status_code) == (413, 413)
    assert "limit of 10000 bytes" in status_of(bomb)["message"]


def test_gzip_is_read(client, ingestion_key, team):
    trace_id = build.trace_id()
    body = gzip.compress(build.request([build.span(trace_id)]).SerializeToString())

    assert post(client, body, ingestion_key, **{"Content-Encoding": "gzip"}).status_code == 200
    assert Trace.objects.filter(otel_trace_id=trace_id).exists()


def test_another_content_type_or_encoding_is_415(client, ingestion_key):
    assert post(client, b"x", ingestion_key, content_type="text/plain").status_code == 415
    assert post(client, b"x", ingestion_key, **{"Content-Encoding": "br"}).status_code == 415


def test_spans_with_bad_ids_are_counted_in_partial_success_and_the_rest_kept(client, ingestion_key):
    good = build.trace_id()
    bad = build.span(good)
    bad.trace_id = b"\x00" * 16
    short = build.span(good)
    short.span_id = b"\x01\x02"
    message = build.request([build.span(good), bad, short])

    response = post(client, message, ingestion_key)

    partial = ExportTraceServiceResponse.FromString(response.content).partial_success
    assert response.status_code == 200 and partial.rejected_spans == 2
    assert "trace_id must be 16 bytes" in partial.error_message
    assert Trace.objects.get(otel_trace_id=good).span_count == 1


def test_otlp_json_with_hex_ids_is_read_and_answered_in_json(client, ingestion_key):
    trace_id = build.trace_id()
    document = json_format.MessageToDict(build.request([build.span(trace_id, span_id="ab" * 8)]))
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][0].update(traceId=trace_id, spanId="ab" * 8)

    response = post(client, json.dumps(document).encode(), ingestion_key, content_type="application/json")

    assert response.status_code == 200 and response.json() == {}
    assert Span.objects.get(trace__otel_trace_id=trace_id).span_id == "ab" * 8


def test_the_online_selection_is_sent_after_commit_with_the_trace_ids(
    client, ingestion_key, team, agent, monkeypatch, django_capture_on_commit_callbacks
):
    from monitoring import tasks
    from tests.monitoring.factories import OnlineEvaluatorFactory

    OnlineEvaluatorFactory(agent=agent)
    service_mapping_create(team=team, service_name="support-bot", agent=agent)
    sent = []
    monkeypatch.setattr(tasks.online_traces_select, "delay", lambda ids: sent.append(ids))
    first, second = build.trace_id(), build.trace_id()

    with django_capture_on_commit_callbacks(execute=True):
        response = post(client, build.request([build.span(first), build.span(second)]), ingestion_key)

    assert response.status_code == 200
    assert sent == [sorted(Trace.objects.filter(otel_trace_id__in=[first, second]).values_list("pk", flat=True))]


def test_feedback_comments_are_masked(team):
    feedback = feedback_record(
        team=team, otel_trace_id=build.trace_id(), kind="thumbs", value=0, comment="ann@example.com"
    )

    assert feedback.comment == "[masked:email]"


def test_absurd_figures_and_long_names_are_capped_not_refused_forever(client, ingestion_key):
    trace_id = build.trace_id()
    attributes = {
        **build.chat_attributes("q", "a", input_tokens=2**40),
        "gen_ai.usage.cost": 1e14,
        "gen_ai.response.model": "m" * 5000,
        "session.id": "s" * 5000,
        "user.id": "u" * 5000,
    }

    response = post(client, build.request([build.span(trace_id, attributes=attributes)]), ingestion_key)

    trace = Trace.objects.get(otel_trace_id=trace_id)
    assert response.status_code == 200 and float(trace.cost) == 999_999 and trace.input_tokens == 2**31 - 1
    assert (len(trace.model), len(trace.user_id), len(trace.conversation.session_id)) == (200, 200, 200)

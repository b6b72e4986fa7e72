"""Fuzzing POST /v1/traces: random bytes, random JSON, OTLP-JSON with random values, truncated
protobuf, wrong content types and encodings. Whatever comes, the answer is a 2xx or a 4xx with a
Status body, never a 5xx, never an exception."""

import gzip
import json

import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.monitoring import otlp_builders as build

pytestmark = pytest.mark.django_db
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
CONTENT_TYPES = st.sampled_from(
    [
        "application/x-protobuf",
        "application/json",
        "application/json; charset=utf-8",
        "text/plain",
        "",
        "application/x-protobuf; x=1",
    ]
)
ENCODINGS = st.sampled_from(["", "gzip", "identity", "br", "GZIP", "deflate"])
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=25,
)


def _valid_request() -> bytes:
    trace = build.trace_id()
    spans = [build.span(trace, attributes=build.chat_attributes("q", "a")), build.span(trace, name="tool")]
    return build.request(spans).SerializeToString()


VALID = _valid_request()


def post(client, key, body: bytes, content_type: str, encoding: str = ""):
    headers = {"Authorization": f"Bearer {key}"}
    if encoding:
        headers["Content-Encoding"] = encoding
    response = client.post("/v1/traces", body, content_type=content_type, headers=headers)
    assert response.status_code < 500, (response.status_code, response.content[:300])
    if response.status_code >= 400:
        assert response.content  # a Status with its message
    return response


@FUZZ
@given(body=st.binary(max_size=2000), content_type=CONTENT_TYPES, encoding=ENCODINGS)
def test_random_bytes(client, ingestion_key, body, content_type, encoding):
    post(client, ingestion_key, body, content_type, encoding)


@FUZZ
@given(cut=st.integers(min_value=0, max_value=len(VALID)), flip=st.integers(min_value=0, max_value=len(VALID) - 1))
def test_truncated_and_flipped_protobuf(client, ingestion_key, cut, flip):
    post(client, ingestion_key, VALID[:cut], "application/x-protobuf")
    flipped = bytearray(VALID)
    flipped[flip] ^= 0xFF
    post(client, ingestion_key, bytes(flipped), "application/x-protobuf")
    post(client, ingestion_key, gzip.compress(bytes(flipped))[: cut or None], "application/x-protobuf", "gzip")


@FUZZ
@given(document=JSON_VALUES)
def test_random_json(client, ingestion_key, document):
    post(client, ingestion_key, json.dumps(document).encode(), "application/json")


@FUZZ
@given(
    value=JSON_VALUES,
    where=st.sampled_from(
        ["attributes", "name", "traceId", "spanId", "startTimeUnixNano", "events", "status", "kind", "links"]
    ),
)
def test_otlp_json_with_random_values(client, ingestion_key, value, where):
    document = json_format.MessageToDict(build.request([build.span(build.trace_id())]))
    span = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["traceId"], span["spanId"] = build.trace_id(), "ab" * 8
    span[where] = value
    post(client, ingestion_key, json.dumps(document).encode(), "application/json")


@FUZZ
@given(text=st.text(max_size=200), number=st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_odd_attribute_values_are_stored(client, ingestion_key, text, number):
    trace = build.trace_id()
    attributes = {text or "k": text, "n": number, "nested": [text, number, 1.5], "gen_ai.input.messages": text}
    spans = [build.span(trace, name=text, attributes=attributes, error=text)]
    response = post(
        client, ingestion_key, build.request(spans, service=text).SerializeToString(), "application/x-protobuf"
    )
    assert response.status_code == 200


@FUZZ
@given(
    document=JSON_VALUES,
    field=st.sampled_from(
        ["trace_id", "messages", "answer", "tool_calls", "documents", "tokens", "timings", "attributes", "tags", "cost"]
    ),
    value=JSON_VALUES,
)
def test_the_plain_json_endpoints_with_random_bodies(client, ingestion_key, document, field, value):
    headers = {"Authorization": f"Bearer {ingestion_key}"}
    shaped = {"answer": "a", "messages": [{"role": "user", "content": "q"}], field: value}
    for body, path in ((document, "/api/traces"), (shaped, "/api/traces"), (document, "/api/feedback")):
        response = client.post(path, json.dumps(body), content_type="application/json", headers=headers)
        assert response.status_code < 500, (path, body, response.content[:300])

"""The personal-data rules (monitoring/ingest/masking.py): what they mask and, as much, what they
must leave alone (order numbers, dates, versions, ids, amounts)."""

import json

import pytest

from monitoring.ingest.masking import mask, mask_span
from monitoring.models import Span

TRUE_POSITIVES = [
    ("Write to jane.doe@example.com please", "email"),
    ("contact: j_smith+shop@mail.co.uk", "email"),
    ("MAIL:BOB@EXAMPLE.ORG", "email"),
    ("card 4111 1111 1111 1111 exp 12/28", "card"),
    ("4111111111111111", "card"),
    ("my mastercard is 5555-5555-5555-4444", "card"),
    ("amex 378282246310005.", "card"),
    ("discover 6011111111111117", "card"),
    ("call me on +1 415 555 2671", "phone"),
    ("+44 20 7946 0958", "phone"),
    ("+33612345678", "phone"),
    ("(415) 555-2671", "phone"),
    ("ring 415-555-2671 after 5", "phone"),
    ("415.555.2671", "phone"),
    ("020 7946 0958", "phone"),
    ("06 12 34 56 78", "phone"),
    ("key sk-proj-AbC123dEf456GhI789jKl012", "key"),
    ("OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwxyz123456", "key"),
    ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", "key"),
    ("evi_Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg", "key"),
    ("evs_Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MGFiY2RlZg", "key"),
    ("aws AKIAIOSFODNN7EXAMPLE here", "key"),
    ("ghp_16C7e42F292c6912E7710c838347Ae178B4a", "key"),
    ("xoxb-123456789012-abcdefABCDEF", "key"),
    ("AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "key"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "key"),
    ("Authorization: Bearer abcdefghijklmnop.qrstuvwxyz", "key"),
    ("token=Q7xR2mK9pL4vN8wZ3tY6uB1cD5fG0hJ2", "key"),
]

TRUE_NEGATIVES = [
    "Where is my order A-1042?",
    "Order #123456 and ORD-2026-000123",
    "order 12345678901234",  # 14 digits that fail Luhn
    "ticket 4111111111111112",  # a card's length, fails Luhn
    "reference 1733580000000000000",  # a nano timestamp
    "Delivered on 2026-12-07 at 10:00:00",
    "2026-12-07T10:00:00.123456Z",
    "07/12/2026 and 12.07.2026",
    "version 1.2.3, v10.4.12, python 3.12.1",
    "trace 4bf92f3577b34da6a3ce929d0e0e4736 span 00f067aa0ba902b7",
    "uuid 123e4567-e89b-12d3-a456-426614174000",
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "session-1 customer-7 user_42",
    "Total: $1,234.56 for 3 items, 20% off",
    "ip 192.168.1.1 port 8080",
    "call the get_order_status tool",
    "getCustomerOrderHistoryForAccount2024",
    "ThisIsAVeryLongClassNameUsedInProductionCode",
    "ISBN 978-3-16-148410-0",
    "unix 1733580000",
    "the package foo@1.2.3",
    "pip install opentelemetry-instrumentation-openai-v2==2.4b0",
    "/usr/lib/python3.12/site-packages/openai/_base_client.py",
    "Bearer",
    "",
]


@pytest.mark.parametrize(("text", "kind"), TRUE_POSITIVES)
def test_a_rule_masks_what_it_is_for(text, kind):
    masked, counts = mask(text)

    assert f"[masked:{kind}]" in masked
    assert counts.get(kind) == 1, (masked, counts)


@pytest.mark.parametrize("text", TRUE_NEGATIVES)
def test_what_is_not_personal_data_is_left_alone(text):
    assert mask(text) == (text, {})


def test_the_bearer_keyword_stays_and_only_the_token_goes():
    masked, _ = mask("Authorization: Bearer abcdefghijklmnop.qrstuvwxyz")

    assert masked == "Authorization: Bearer [masked:key]"


def test_json_text_is_masked_inside_and_stays_valid_json():
    document = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "I am\nann@example.com"}]}])

    masked, counts = mask(document)

    assert json.loads(masked)[0]["parts"][0]["content"] == "I am\n[masked:email]"
    assert counts == {"email": 1}


def test_json_text_with_nothing_to_mask_is_kept_byte_for_byte():
    document = '{"a":  1, "order": "A-1042"}'

    assert mask(document) == (document, {})


def test_nested_values_are_masked_and_counted_and_keys_kept():
    value = {"ann@example.com": ["ann@example.com", {"card": "4111 1111 1111 1111"}], "n": 4111111111111111}

    masked, counts = mask(value)

    assert masked == {"ann@example.com": ["[masked:email]", {"card": "[masked:card]"}], "n": 4111111111111111}
    assert counts == {"email": 1, "card": 1}


def test_several_kinds_in_one_text_are_each_counted():
    masked, counts = mask("ann@example.com, bob@example.com, +1 415 555 2671, sk-abcdefghijklmnopqrstuvwx")

    assert counts == {"email": 2, "phone": 1, "key": 1}
    assert "example.com" not in masked and "415" not in masked


def test_a_span_is_masked_in_its_attributes_events_links_and_status():
    span = Span(
        span_id="1" * 16,
        name="reply to bob@example.com",
        start_time_unix_nano=1,
        end_time_unix_nano=2,
        status_message="failed for ann@example.com",
        attributes={"input.value": "my card is 4111111111111111", "order": "A-1042"},
        events=[{"name": "gen_ai.user.message", "attributes": {"content": "+44 20 7946 0958"}}],
        links=[{"trace_id": "a" * 32, "span_id": "b" * 16, "attributes": {"by": "bob@example.com"}}],
    )

    counts = mask_span(span)

    assert counts == {"email": 3, "card": 1, "phone": 1}
    assert span.name == "reply to [masked:email]"
    assert span.attributes == {"input.value": "my card is [masked:card]", "order": "A-1042"}
    assert span.events[0]["attributes"]["content"] == "[masked:phone]"
    assert span.links[0] == {"trace_id": "a" * 32, "span_id": "b" * 16, "attributes": {"by": "[masked:email]"}}
    assert span.status_message == "failed for [masked:email]"

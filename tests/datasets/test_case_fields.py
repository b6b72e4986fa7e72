"""case_fields_clean: the one normaliser every source of test cases goes through."""

import pytest
from django.core.exceptions import ValidationError

from datasets.fields import case_fields_clean


def test_a_question_is_required():
    with pytest.raises(ValidationError) as exc:
        case_fields_clean({"question": "   ", "expected_answer": "x"})

    assert exc.value.message_dict == {"question": ["Write the question the agent should answer."]}


def test_partial_cleaning_needs_no_question_but_rejects_an_empty_one():
    assert case_fields_clean({"tags": "a"}, partial=True) == {"tags": ["a"]}
    with pytest.raises(ValidationError):
        case_fields_clean({"question": ""}, partial=True)


def test_text_is_stripped_and_line_endings_normalised():
    cleaned = case_fields_clean({"question": "  Line one\r\nLine two  ", "expected_answer": None})

    assert cleaned == {"question": "Line one\nLine two", "expected_answer": ""}


def test_tags_accept_a_list_or_comma_separated_text_without_duplicates():
    assert case_fields_clean({"question": "q", "tags": " refunds,  edge  case ,refunds,"})["tags"] == [
        "refunds",
        "edge case",
    ]
    assert case_fields_clean({"question": "q", "tags": ["a", "b", "a"]})["tags"] == ["a", "b"]
    with pytest.raises(ValidationError):
        case_fields_clean({"question": "q", "tags": ["a,b"]})


def test_expected_tools_accept_names_objects_adk_spellings_and_json_text():
    assert case_fields_clean({"question": "q", "expected_tools": "search_kb, create_ticket"})["expected_tools"] == [
        {"name": "search_kb", "args": {}},
        {"name": "create_ticket", "args": {}},
    ]
    assert case_fields_clean(
        {"question": "q", "expected_tools": [{"tool_name": "lookup", "tool_input": {"id": 1}}, "ping"]}
    )["expected_tools"] == [{"name": "lookup", "args": {"id": 1}}, {"name": "ping", "args": {}}]
    assert case_fields_clean({"question": "q", "expected_tools": '[{"name": "t", "args": "{\\"a\\": 2}"}]'})[
        "expected_tools"
    ] == [{"name": "t", "args": {"a": 2}}]


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ([{"name": ""}], "Tool 1: the tool name is empty."),
        ([{"name": "ok"}, {"name": "t", "args": "[1]"}], "Tool 2: the arguments must be a JSON object"),
        ([{"name": "t", "args": "{bad"}], "Tool 1: the arguments are not valid JSON"),
        ("[{", "This is not valid JSON"),
    ],
)
def test_bad_tools_name_the_tool(tools, message):
    with pytest.raises(ValidationError) as exc:
        case_fields_clean({"question": "q", "expected_tools": tools})

    assert exc.value.message_dict["expected_tools"][0].startswith(message)


def test_turns_are_user_turns_with_optional_expected_replies():
    cleaned = case_fields_clean({"question": "q", "turns": ["Hi", {"user": "Order A-1", "expected": "Found it"}]})

    assert cleaned["turns"] == [{"user": "Hi", "expected": ""}, {"user": "Order A-1", "expected": "Found it"}]
    with pytest.raises(ValidationError) as exc:
        case_fields_clean({"question": "q", "turns": [{"user": " ", "expected": "reply"}]})
    assert exc.value.message_dict["turns"] == ["Turn 1: the user message is empty."]


def test_expected_context_accepts_one_chunk_or_a_list_and_drops_blanks():
    assert case_fields_clean({"question": "q", "expected_context": "One chunk"})["expected_context"] == ["One chunk"]
    assert case_fields_clean({"question": "q", "expected_context": ["a", " ", "b"]})["expected_context"] == ["a", "b"]


@pytest.mark.parametrize(("value", "expected"), [("", None), (None, None), ("1", 1), (10, 10)])
def test_smoke_count_is_empty_or_1_to_10(value, expected):
    assert case_fields_clean({"question": "q", "smoke_count": value})["smoke_count"] == expected


@pytest.mark.parametrize("value", ["0", "11", "three"])
def test_smoke_count_outside_1_to_10_is_refused(value):
    with pytest.raises(ValidationError) as exc:
        case_fields_clean({"question": "q", "smoke_count": value})

    assert "smoke_count" in exc.value.message_dict


def test_trajectory_mode_and_args_switch():
    cleaned = case_fields_clean({"question": "q", "trajectory_mode": "SUBSET", "check_tool_args": "yes"})

    assert cleaned["trajectory_mode"] == "subset" and cleaned["check_tool_args"] is True
    with pytest.raises(ValidationError):
        case_fields_clean({"question": "q", "trajectory_mode": "fuzzy"})


def test_case_id_is_one_line_of_at_most_100_characters():
    assert case_fields_clean({"question": "q", "case_id": " refund-001 "})["case_id"] == "refund-001"
    with pytest.raises(ValidationError):
        case_fields_clean({"question": "q", "case_id": "x" * 101})
    with pytest.raises(ValidationError):
        case_fields_clean({"question": "q", "case_id": "a\nb"})


def test_every_bad_field_is_reported_at_once_and_unknown_fields_are_refused():
    with pytest.raises(ValidationError) as exc:
        case_fields_clean({"question": "", "smoke_count": "99", "colour": "red"})

    assert set(exc.value.message_dict) == {"question", "smoke_count", "colour"}

"""EvalSet JSON import (ADK / 10xgraph shapes) via datasets.services.dataset_import_json."""

import json

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile

from datasets.services import dataset_import_json
from tests.factories import DatasetFactory


def _file(document) -> SimpleUploadedFile:
    data = document if isinstance(document, bytes) else json.dumps(document).encode()
    return SimpleUploadedFile("set.evalset.json", data)


def _text(role: str, text: str) -> dict:
    return {"role": role, "parts": [{"text": text}]}


@pytest.fixture
def dataset(agent):
    return DatasetFactory(agent=agent)


ADK_MULTI_TURN = {
    "eval_set_id": "home_automation",
    "name": "Home automation",
    "description": "",
    "eval_cases": [
        {
            "eval_id": "lights_off",
            "conversation": [
                {
                    "invocation_id": "i-1",
                    "user_content": _text("user", "Which devices are in the bedroom?"),
                    "final_response": _text("model", "device_2 and device_3."),
                    "intermediate_data": {
                        "tool_uses": [{"id": "c1", "name": "list_devices", "args": {"location": "Bedroom"}}],
                        "intermediate_responses": [],
                    },
                },
                {
                    "invocation_id": "i-2",
                    "user_content": {"role": "user", "parts": [{"text": "Turn off device_2"}, {"text": "please."}]},
                    "final_response": _text("model", "I have set the device_2 status to off."),
                    "intermediate_data": {
                        "tool_uses": [
                            {"name": "set_device_info", "args": {"device_id": "device_2", "status": "OFF"}},
                            {"name": "get_device_info", "args": {"device_id": "device_2"}},
                        ]
                    },
                },
            ],
            "session_input": {"app_name": "home_automation_agent", "user_id": "test_user", "state": {}},
            "creation_timestamp": 1747337309.23,
        }
    ],
    "creation_timestamp": 1747337309.24,
}


@pytest.mark.django_db
def test_a_multi_turn_case_with_tool_uses(dataset):
    result = dataset_import_json(dataset=dataset, file=_file(ADK_MULTI_TURN))

    case = dataset.cases.get()
    assert result.created == 1
    assert case.case_id == "lights_off"
    assert case.turns == [{"user": "Which devices are in the bedroom?", "expected": "device_2 and device_3."}]
    assert case.question == "Turn off device_2\nplease."
    assert case.expected_answer == "I have set the device_2 status to off."
    assert case.expected_tools == [
        {"name": "list_devices", "args": {"location": "Bedroom"}},
        {"name": "set_device_info", "args": {"device_id": "device_2", "status": "OFF"}},
        {"name": "get_device_info", "args": {"device_id": "device_2"}},
    ]
    assert case.extra == {
        "session_input": {"app_name": "home_automation_agent", "user_id": "test_user", "state": {}},
        "invocation_ids": ["i-1", "i-2"],  # written back on export
    }


@pytest.mark.django_db
def test_camel_case_aliases_are_accepted(dataset):
    document = {
        "evalSetId": "s",
        "evalCases": [
            {
                "evalId": "c1",
                "conversation": [
                    {
                        "userContent": _text("user", "Hi"),
                        "finalResponse": _text("model", "Hello"),
                        "intermediateData": {"toolUses": [{"name": "greet", "args": {}}]},
                    }
                ],
            }
        ],
    }

    dataset_import_json(dataset=dataset, file=_file(document))

    case = dataset.cases.get()
    assert (case.case_id, case.question, case.expected_answer) == ("c1", "Hi", "Hello")
    assert case.expected_tools == [{"name": "greet", "args": {}}]


@pytest.mark.django_db
def test_10xgraph_expectation_keys_tags_and_node_order(dataset):
    document = {
        "eval_set_id": "graph",
        "eval_cases": [
            {
                "eval_id": "route-1",
                "conversation": [{"user_content": _text("user", "Cancel order A-7")}],
                "expected_final_response": "Order A-7 is cancelled.",
                "expected_tool_trajectory": [{"tool_name": "cancel_order", "tool_input": {"order_id": "A-7"}}],
                "expected_node_order": ["router", "orders", "respond"],
                "tags": ["orders", "cancel"],
            },
            {
                "eval_id": "route-2",
                "conversation": [
                    {
                        "user_content": "Plain string question",
                        "expected_final_response": {"parts": [{"text": "Per-invocation expectation"}]},
                        "expected_tool_trajectory": [{"name": "search", "args": {"q": "x"}}],
                    }
                ],
            },
        ],
    }

    dataset_import_json(dataset=dataset, file=_file(document))

    first, second = dataset.cases.order_by("position")
    assert first.expected_answer == "Order A-7 is cancelled."
    assert first.expected_tools == [{"name": "cancel_order", "args": {"order_id": "A-7"}}]
    assert first.tags == ["orders", "cancel"]
    assert first.extra == {"expected_node_order": ["router", "orders", "respond"]}
    assert second.question == "Plain string question"
    assert second.expected_answer == "Per-invocation expectation"
    assert second.expected_tools == [{"name": "search", "args": {"q": "x"}}]


@pytest.mark.django_db
def test_the_older_adk_test_file_list_is_accepted(dataset):
    document = [
        {
            "query": "Turn off device_2 in the Bedroom.",
            "expected_tool_use": [{"tool_name": "set_device_info", "tool_input": {"device_id": "device_2"}}],
            "reference": "I have set the device_2 status to off.",
        }
    ]

    dataset_import_json(dataset=dataset, file=_file(document))

    case = dataset.cases.get()
    assert case.question == "Turn off device_2 in the Bedroom."
    assert case.expected_answer == "I have set the device_2 status to off."
    assert case.expected_tools == [{"name": "set_device_info", "args": {"device_id": "device_2"}}]


@pytest.mark.django_db
def test_reimport_by_eval_id_updates_the_case(dataset):
    dataset_import_json(dataset=dataset, file=_file(ADK_MULTI_TURN))
    changed = json.loads(json.dumps(ADK_MULTI_TURN))
    changed["eval_cases"][0]["conversation"][1]["final_response"] = _text("model", "Done.")

    result = dataset_import_json(dataset=dataset, file=_file(changed))

    assert (result.created, result.updated) == (0, 1)
    assert dataset.cases.get().expected_answer == "Done."


@pytest.mark.django_db
def test_a_bad_eval_case_rejects_the_file_and_names_the_case(dataset):
    document = {
        "eval_cases": [
            {"eval_id": "ok", "conversation": [{"user_content": _text("user", "Fine")}]},
            {"eval_id": "empty", "conversation": [{"user_content": _text("user", "  ")}]},
            {"eval_id": "ok", "conversation": [{"user_content": _text("user", "Duplicate id")}]},
            {"eval_id": "weird", "conversation": [{"user_content": {"parts": "nope"}}]},
        ]
    }

    with pytest.raises(ValidationError) as exc:
        dataset_import_json(dataset=dataset, file=_file(document))

    assert exc.value.messages == [
        "Eval case 2 (empty): Question: Write the question the agent should answer.",
        "Eval case 3 (ok): eval_id “ok” is already used by eval case 1.",
        "Eval case 4 (weird): expected text or a content object with parts[].text.",
    ]
    assert not dataset.cases.exists()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"eval_cases": [}', "The file is not valid JSON (Expecting value at line 1, column 17)."),
        (b'{"name": "no cases"}', "This JSON is not an eval set"),
        (b'{"eval_cases": []}', "The file has no test cases."),
        (
            b'{"eval_cases": [{"query": "q"}], "evalsite": {"scoring": {"pass_threshold": 42}}}',
            "evalsite.scoring.pass_threshold: Enter a whole number from 0 to 10.",
        ),
        (b'{"eval_cases": [' + b"[" * 50_000 + b"]}", "The JSON is nested too deeply to read."),
    ],
)
@pytest.mark.django_db
def test_unreadable_files_get_a_clear_message(dataset, data, message):
    with pytest.raises(ValidationError) as exc:
        dataset_import_json(dataset=dataset, file=_file(data))

    assert exc.value.messages[0].startswith(message)


# ---- user-simulator scenarios (conversation_scenario) ------------------------------

WITH_SCENARIOS = {
    "eval_set_id": "mixed",
    "eval_cases": [
        {
            "eval_id": "scripted",
            "conversation": [
                {"user_content": _text("user", "Turn off the lights"), "final_response": _text("model", "Done.")}
            ],
        },
        {
            "eval_id": "angry_customer",
            "conversation_scenario": {
                "starting_prompt": "My order never arrived.",
                "conversation_plan": "Insist on a refund; accept a voucher only after two refusals.",
            },
        },
    ],
}


@pytest.mark.django_db
def test_scenario_cases_are_imported_with_their_starting_prompt_and_plan(dataset):
    result = dataset_import_json(dataset=dataset, file=_file(WITH_SCENARIOS))

    assert list(dataset.cases.values_list("case_id", flat=True)) == ["scripted", "angry_customer"]
    assert result.created == 2 and result.skipped == [] and result.level == "success"
    scripted, scenario = dataset.cases.order_by("position")
    assert scripted.scenario == {}
    assert scenario.question == "My order never arrived."
    assert scenario.scenario == {
        "goal": "",
        "plan": "Insist on a refund; accept a voucher only after two refusals.",
        "persona": "",
        "success_criteria": "",
        "max_turns": 10,
    }
    assert scenario.turns == [] and scenario.expected_answer == ""


@pytest.mark.django_db
def test_a_scenarios_other_keys_are_kept_in_extra(dataset):
    case = {
        "eval_id": "persona",
        "conversation_scenario": {
            "starting_prompt": "Hi",
            "conversation_plan": "Ask for the price twice.",
            "user_persona": {"id": "novice"},
        },
    }
    dataset_import_json(dataset=dataset, file=_file({"eval_cases": [case]}))

    imported = dataset.cases.get()
    assert imported.extra == {"conversation_scenario": {"user_persona": {"id": "novice"}}}


@pytest.mark.django_db
def test_a_scenario_that_is_not_an_object_is_refused_with_its_case_named(dataset):
    with pytest.raises(ValidationError, match=r"Eval case 1 \(bad\): conversation_scenario must be an object"):
        dataset_import_json(
            dataset=dataset, file=_file({"eval_cases": [{"eval_id": "bad", "conversation_scenario": "x"}]})
        )
    assert dataset.cases.count() == 0

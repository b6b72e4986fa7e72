"""EvalSet JSON export: the ADK shape, and export -> import gives the same cases."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from datasets.models import Document
from datasets.services import dataset_export_json, dataset_import_json
from tests.factories import DatasetFactory, TestCaseFactory

FIELDS = (
    "case_id", "question", "expected_answer", "document_context", "turns", "expected_tools", "trajectory_mode",
    "check_tool_args", "expected_context", "judge_guideline", "tags", "smoke_count", "smoke_guidance",
    "tests_rule", "source_file", "source_location", "source_span", "extra",
)  # fmt: skip


@pytest.fixture
def dataset(agent):
    dataset = DatasetFactory(agent=agent, name="Support set", description="Smoke tests", pass_threshold=8)
    TestCaseFactory(
        dataset=dataset,
        case_id="lights_off",
        question="Turn off device_2",
        expected_answer="Done: device_2 is off.",
        turns=[
            {"user": "Which devices are in the bedroom?", "expected": "device_2 and device_3."},
            {"user": "Thanks", "expected": ""},
        ],
        expected_tools=[
            {"name": "list_devices", "args": {"location": "Bedroom"}},
            {"name": "set_device_info", "args": {}},
        ],
        trajectory_mode="unordered",
        check_tool_args=True,
        expected_context=["device_2 is a lamp"],
        judge_guideline="Must confirm the device id.",
        tags=["devices"],
        smoke_count=2,
        smoke_guidance="terse",
        document_context="Floor plan",
        tests_rule="Device control",
        source_file="plan.xlsx",
        source_location="Sheet1 row 3",
        source_span="Turn off device_2",
        extra={"session_input": {"app_name": "home", "user_id": "u", "state": {}}, "expected_node_order": ["a", "b"]},
    )
    TestCaseFactory(dataset=dataset, case_id="", question="No stable id", expected_answer="")
    return dataset


@pytest.mark.django_db
def test_export_has_the_adk_eval_set_shape(dataset):
    exported = dataset_export_json(dataset=dataset)

    assert exported["eval_set_id"] == "support-set" and exported["name"] == "Support set"
    first, second = exported["eval_cases"]
    assert first["eval_id"] == "lights_off"
    assert [turn["user_content"]["parts"][0]["text"] for turn in first["conversation"]] == [
        "Which devices are in the bedroom?",
        "Thanks",
        "Turn off device_2",
    ]
    assert first["conversation"][0]["final_response"] == {
        "role": "model",
        "parts": [{"text": "device_2 and device_3."}],
    }
    assert first["conversation"][1]["final_response"] is None
    assert first["conversation"][-1]["intermediate_data"]["tool_uses"] == [
        {"name": "list_devices", "args": {"location": "Bedroom"}},
        {"name": "set_device_info", "args": {}},
    ]
    assert first["session_input"] == {"app_name": "home", "user_id": "u", "state": {}}
    assert first["expected_node_order"] == ["a", "b"]
    assert first["tags"] == ["devices"]
    assert second["eval_id"] == "case-2"
    assert exported["evalsite"]["scoring"]["pass_threshold"] == 8


@pytest.mark.django_db
def test_export_then_import_gives_the_same_cases(dataset, agent):
    target = DatasetFactory(agent=agent)
    exported = json.dumps(dataset_export_json(dataset=dataset)).encode()

    dataset_import_json(dataset=target, file=SimpleUploadedFile("set.json", exported))

    assert list(target.cases.order_by("position").values(*FIELDS)) == list(
        dataset.cases.order_by("position").values(*FIELDS)
    )


@pytest.mark.django_db
def test_reimporting_an_export_into_its_own_dataset_updates_every_case_and_adds_none(dataset):
    exported = json.dumps(dataset_export_json(dataset=dataset)).encode()
    before = list(dataset.cases.order_by("position").values(*FIELDS))

    result = dataset_import_json(dataset=dataset, file=SimpleUploadedFile("set.json", exported))

    # The id-less case got a stable id on export, so it is updated too, not added again.
    assert result.updated == 2 and result.created == 0
    assert list(dataset.cases.order_by("position").values(*FIELDS)) == before


# ---- the download view ------------------------------------------------------------


def _url(dataset) -> str:
    return reverse("datasets:export_json", args=[dataset.agent_id, dataset.pk])


@pytest.mark.django_db
def test_download_is_a_json_attachment_listing_document_names(client_alice, dataset, agent):
    document = Document.objects.create(team=agent.team, dataset=dataset, original_name="plan.pdf", file_type="pdf")
    dataset.cases.get(case_id="lights_off").documents.add(document)

    response = client_alice.get(_url(dataset))

    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == 'attachment; filename="support-set.json"'
    body = json.loads(response.content)
    assert body["eval_cases"][0]["evalsite"]["documents"] == ["plan.pdf"]


@pytest.mark.django_db
def test_download_is_404_for_outsiders_405_for_post_and_needs_login(client_charlie, client_alice, client, dataset):
    assert client_charlie.get(_url(dataset)).status_code == 404
    assert client_alice.post(_url(dataset)).status_code == 405
    assert client.get(_url(dataset)).status_code == 302


# ---- identities: export then import is the identity -------------------------------


def _without_timestamps(value):
    if isinstance(value, dict):
        return {k: _without_timestamps(v) for k, v in value.items() if k != "creation_timestamp"}
    if isinstance(value, list):
        return [_without_timestamps(v) for v in value]
    return value


@pytest.mark.django_db
def test_export_gives_an_id_less_case_a_stable_id_kept_on_the_case(dataset):
    first = dataset_export_json(dataset=dataset)
    case = dataset.cases.get(question="No stable id")
    assert case.case_id == "case-2" == first["eval_cases"][1]["eval_id"]
    assert first["eval_cases"][1]["evalsite"]["case_id"] == "case-2"
    # Moving the case does not change its id.
    dataset.cases.exclude(pk=case.pk).update(position=5)
    dataset.cases.filter(pk=case.pk).update(position=0)
    again = dataset_export_json(dataset=dataset)
    assert again["eval_cases"][0]["eval_id"] == "case-2"
    dataset.refresh_from_db()
    assert dataset.eval_set_id == "support-set"


@pytest.mark.django_db
def test_a_generated_id_never_takes_one_a_person_typed(agent):
    dataset = DatasetFactory(agent=agent)
    TestCaseFactory(dataset=dataset, position=0, case_id="")
    TestCaseFactory(dataset=dataset, position=1, case_id="case-1")
    ids = [case["eval_id"] for case in dataset_export_json(dataset=dataset)["eval_cases"]]
    assert ids == ["case-1-2", "case-1"]


@pytest.mark.django_db
def test_export_import_export_is_the_identity(dataset, agent):
    from datasets.services import dataset_create_from_file
    from tests.factories import AgentFactory

    exported = dataset_export_json(dataset=dataset)
    other_agent = AgentFactory(team=agent.team)
    copy, _ = dataset_create_from_file(
        agent=other_agent, user=None, name="", file=SimpleUploadedFile("set.json", json.dumps(exported).encode())
    )
    assert copy.eval_set_id == "support-set"
    assert _without_timestamps(dataset_export_json(dataset=copy)) == _without_timestamps(exported)


@pytest.mark.django_db
def test_a_files_own_eval_set_id_and_invocation_ids_survive_the_round_trip(agent):
    from datasets.services import dataset_create_from_file

    original = {
        "eval_set_id": "home_automation_v3",
        "name": "Home automation",
        "eval_cases": [
            {
                "eval_id": "lights",
                "conversation": [
                    {
                        "invocation_id": "e-7f3a",
                        "user_content": {"role": "user", "parts": [{"text": "Which devices?"}]},
                        "final_response": {"role": "model", "parts": [{"text": "device_2"}]},
                    },
                    {
                        "invocation_id": "e-91bc",
                        "user_content": {"role": "user", "parts": [{"text": "Turn it off"}]},
                        "final_response": {"role": "model", "parts": [{"text": "Done."}]},
                    },
                ],
            }
        ],
    }
    dataset, _ = dataset_create_from_file(
        agent=agent, user=None, name="", file=SimpleUploadedFile("set.json", json.dumps(original).encode())
    )
    exported = dataset_export_json(dataset=dataset)
    assert exported["eval_set_id"] == "home_automation_v3"
    (case,) = exported["eval_cases"]
    assert case["eval_id"] == "lights"
    assert [invocation["invocation_id"] for invocation in case["conversation"]] == ["e-7f3a", "e-91bc"]

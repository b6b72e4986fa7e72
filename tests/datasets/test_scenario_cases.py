"""Scenario cases (a simulated user with a goal): the field, the case form, CSV and EvalSet round trips."""

import json

import pytest
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from datasets.exporters import dataset_export_csv
from datasets.fields import case_fields_clean
from datasets.models import TestCase
from datasets.services import dataset_create_from_file, dataset_export_json, dataset_import_csv
from tests.factories import AgentFactory, DatasetFactory, TestCaseFactory

HTMX = {"HTTP_HX_REQUEST": "true"}
SCENARIO = {
    "goal": "Get a refund for order A-1001",
    "plan": "Ask for a refund; if offered a voucher, refuse once, then accept.",
    "persona": "An impatient customer who types short messages.",
    "max_turns": 6,
    "success_criteria": "The agent offers a refund or a voucher and never promises both.",
}


@pytest.fixture
def dataset(agent):
    return DatasetFactory(agent=agent)


# ---- the field ---------------------------------------------------------------------


def test_a_scenario_gets_ten_turns_by_default():
    cleaned = case_fields_clean({"question": "Hi", "scenario": {"goal": "Get a refund"}})
    assert cleaned["scenario"] == {
        "goal": "Get a refund",
        "plan": "",
        "persona": "",
        "success_criteria": "",
        "max_turns": 10,
    }


@pytest.mark.parametrize("turns", [0, 31, "many"])
def test_max_turns_must_be_1_to_30(turns):
    with pytest.raises(ValidationError) as caught:
        case_fields_clean({"question": "Hi", "scenario": {"goal": "Refund", "max_turns": turns}})
    assert caught.value.message_dict == {"scenario": ["Maximum turns: enter a whole number from 1 to 30."]}


def test_a_scenario_without_goal_or_plan_is_refused():
    with pytest.raises(ValidationError) as caught:
        case_fields_clean({"question": "Hi", "scenario": {"persona": "A pirate"}})
    assert caught.value.message_dict == {
        "scenario": ["Describe the simulated user's goal or plan, or clear the scenario."]
    }


def test_unknown_scenario_keys_are_named():
    with pytest.raises(ValidationError, match="Unknown scenario key: mood"):
        case_fields_clean({"question": "Hi", "scenario": {"goal": "Refund", "mood": "sad"}})


def test_an_empty_scenario_is_a_scripted_case():
    assert case_fields_clean({"question": "Hi", "scenario": ""})["scenario"] == {}


# ---- the case form -------------------------------------------------------------------


def _form_data(**overrides):
    data = {
        "question": "My order A-1001 never arrived.",
        "scenario_goal": SCENARIO["goal"],
        "scenario_plan": SCENARIO["plan"],
        "scenario_persona": SCENARIO["persona"],
        "scenario_max_turns": "6",
        "scenario_success_criteria": SCENARIO["success_criteria"],
    }
    return {**data, **overrides}


@pytest.mark.django_db
def test_the_case_form_creates_a_scenario_case(client_alice, dataset):
    url = reverse("datasets:case_create", args=[dataset.agent_id, dataset.pk])
    html = client_alice.get(url, **HTMX).content.decode()
    assert "<legend>Scenario (simulated user)</legend>" in html
    assert 'name="scenario_goal"' in html and 'name="scenario_max_turns"' in html

    response = client_alice.post(url, _form_data(), **HTMX)

    assert response.status_code == 200
    case = TestCase.objects.get(dataset=dataset)
    assert case.question == "My order A-1001 never arrived."
    assert case.scenario == SCENARIO


@pytest.mark.django_db
def test_a_bad_turn_limit_is_shown_in_the_form_and_nothing_is_saved(client_alice, dataset):
    url = reverse("datasets:case_create", args=[dataset.agent_id, dataset.pk])

    response = client_alice.post(url, _form_data(scenario_max_turns="40"), **HTMX)

    html = response.content.decode()
    assert "Maximum turns: Enter a whole number from 1 to 30, or leave it empty." in html
    assert SCENARIO["plan"] in html  # what was typed is kept
    assert not TestCase.objects.filter(dataset=dataset).exists()


@pytest.mark.django_db
def test_a_persona_without_goal_or_plan_is_an_error_on_the_form(client_alice, dataset):
    url = reverse("datasets:case_create", args=[dataset.agent_id, dataset.pk])

    response = client_alice.post(url, _form_data(scenario_goal="", scenario_plan=""), **HTMX)

    assert "Describe the simulated user&#x27;s goal or plan, or clear the scenario." in response.content.decode()
    assert not TestCase.objects.filter(dataset=dataset).exists()


@pytest.mark.django_db
def test_the_edit_form_shows_the_scenario_and_can_clear_it(client_alice, dataset):
    case = TestCaseFactory(dataset=dataset, scenario=SCENARIO)
    url = reverse("datasets:case_edit", args=[dataset.agent_id, dataset.pk, case.pk])
    html = client_alice.get(url, **HTMX).content.decode()
    assert SCENARIO["persona"] in html and 'value="6"' in html

    # Clearing the texts removes the scenario, even with the saved turn limit still in its box.
    client_alice.post(url, {"question": case.question, "scenario_max_turns": "6"}, **HTMX)

    case.refresh_from_db()
    assert case.scenario == {}


@pytest.mark.django_db
def test_the_dataset_page_shows_a_scenario_badge_and_its_goal(client_alice, dataset):
    TestCaseFactory(dataset=dataset, scenario=SCENARIO)
    html = client_alice.get(reverse("datasets:detail", args=[dataset.agent_id, dataset.pk])).content.decode()
    assert '<span class="badge badge-info">Scenario</span>' in html
    assert "Get a refund for order A-1001" in html
    assert "up to 6 turns" in html


# ---- round trips ---------------------------------------------------------------------


@pytest.mark.django_db
def test_an_evalset_export_writes_adks_conversation_scenario(dataset):
    TestCaseFactory(dataset=dataset, case_id="refund", question="Where is my refund?", scenario=SCENARIO)

    (case,) = dataset_export_json(dataset=dataset)["eval_cases"]

    assert "conversation" not in case
    assert case["conversation_scenario"] == {
        "starting_prompt": "Where is my refund?",
        "conversation_plan": SCENARIO["plan"],
    }
    assert case["evalsite"]["scenario"] == SCENARIO


@pytest.mark.django_db
def test_an_evalset_round_trip_keeps_the_whole_scenario_and_adks_other_keys(agent, team):
    original = {
        "eval_set_id": "sim",
        "eval_cases": [
            {
                "eval_id": "novice",
                "conversation_scenario": {
                    "starting_prompt": "How do I reset my password?",
                    "conversation_plan": "Ask step by step; say the email never came.",
                    "user_persona": {"id": "novice"},
                },
            }
        ],
    }
    first, _ = dataset_create_from_file(
        agent=agent, user=None, name="", file=SimpleUploadedFile("a.json", json.dumps(original).encode())
    )
    exported = dataset_export_json(dataset=first)
    assert exported["eval_cases"][0]["conversation_scenario"] == original["eval_cases"][0]["conversation_scenario"]

    other = AgentFactory(team=team)
    second, _ = dataset_create_from_file(
        agent=other, user=None, name="", file=SimpleUploadedFile("b.json", json.dumps(exported).encode())
    )
    copy = second.cases.get()
    assert copy.question == "How do I reset my password?"
    assert copy.scenario == first.cases.get().scenario
    assert copy.extra == {"conversation_scenario": {"user_persona": {"id": "novice"}}}


@pytest.mark.django_db
def test_a_csv_round_trip_keeps_the_scenario(dataset, agent):
    TestCaseFactory(dataset=dataset, question="Where is my refund?", scenario=SCENARIO)
    text = dataset_export_csv(dataset=dataset)
    target = DatasetFactory(agent=agent)

    dataset_import_csv(dataset=target, file=SimpleUploadedFile("cases.csv", text.encode()))

    assert target.cases.get().scenario == SCENARIO


# ---- the JSON API ------------------------------------------------------------------


@pytest.mark.django_db
def test_the_items_api_creates_reads_and_clears_a_scenario(alice, dataset):
    from django.test import Client

    from accounts.services import api_token_create

    _, raw = api_token_create(user=alice, name="ci")
    api = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    url = f"/api/agents/{dataset.agent_id}/eval/datasets/{dataset.pk}/items"

    created = api.post(
        url, {"question": "Refund?", "scenario": {"goal": "Get a refund"}}, content_type="application/json"
    )
    scripted = api.post(url, {"question": "Plain"}, content_type="application/json")
    refused = api.post(
        url, {"question": "x", "scenario": {"goal": "y", "max_turns": 31}}, content_type="application/json"
    )

    assert created.status_code == 201 and scripted.status_code == 201
    assert created.json()["scenario"] == {
        "goal": "Get a refund",
        "plan": "",
        "persona": "",
        "max_turns": 10,
        "success_criteria": "",
    }
    assert scripted.json()["scenario"] is None
    assert refused.status_code == 422
    item_url = f"{url}/{created.json()['id']}"
    cleared = api.patch(item_url, {"scenario": None}, content_type="application/json")
    assert cleared.json()["scenario"] is None
    assert TestCase.objects.get(pk=created.json()["id"]).scenario == {}

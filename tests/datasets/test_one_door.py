"""One door for every file: "New dataset or import" sends each supported file to its flow,
`dataset_import` takes EvalSet JSON as the UI does, and a document only a model could read is
refused at upload, with the way to connect one, when no model is connected."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from datasets.extraction.services import dataset_extract
from datasets.models import Dataset
from tests.datasets import files
from tests.datasets.extraction_helpers import media_root  # noqa: F401

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
PLAN = [
    ["TC ID", "Scenario", "Steps", "Expected Result"],
    ["TC-1", "Refund window", "1. Open chat 2. Ask: 'How long do I have to ask for a refund?'", "14 days"],
    ["TC-2", "Support hours", "1. Open chat 2. Ask: 'When is phone support open?'", "Weekdays 9-17"],
]
PROSE = [
    "Refund policy",
    "Customers on a monthly plan may cancel at any time. Annual plans are refundable within",
    "fourteen days of purchase; after that the remaining months are credited to the account.",
]
EVAL_SET = {
    "eval_set_id": "refunds",
    "name": "Refund questions",
    "eval_cases": [
        {
            "eval_id": "r-1",
            "conversation": [
                {
                    "invocation_id": "i-1",
                    "user_content": {"role": "user", "parts": [{"text": "Can I get a refund?"}]},
                    "final_response": {"role": "model", "parts": [{"text": "Within 14 days."}]},
                }
            ],
        }
    ],
}


@pytest.fixture(autouse=True)
def _no_model(no_llm):
    """A fresh install: no model connected."""


def _create(client, agent, name: str, data: bytes, **extra):
    url = reverse("datasets:create", args=[agent.pk])
    return client.post(url, {"name": "", "file": SimpleUploadedFile(name, data)}, **extra)


def test_new_dataset_takes_an_xlsx_test_plan_to_the_mapping_step(client_alice, agent):
    response = _create(client_alice, agent, "plan.xlsx", files.xlsx_bytes({"Plan": PLAN}), **HTMX)

    dataset = Dataset.objects.get(agent=agent)
    assert response.status_code == 200
    assert response["HX-Redirect"] == reverse("datasets:detail", args=[agent.pk, dataset.pk])
    assert dataset.name == "plan" and dataset.source == Dataset.Source.UPLOAD
    assert dataset.status == Dataset.Status.EXTRACTING
    dataset_extract(dataset_id=dataset.pk)
    dataset.refresh_from_db()
    assert dataset.status == Dataset.Status.REVIEW  # nothing created before the mapping is confirmed


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("plan.csv", files.csv_bytes(PLAN)),  # a CSV whose header is not our columns
        ("plan.xls", files.xls_bytes({"Plan": PLAN})),
        ("plan.docx", files.docx_bytes(["Plan", PLAN])),
        ("plan.md", b"| TC ID | Steps | Expected Result |\n|---|---|---|\n| 1 | Ask: 'Hours?' | 9-17 |\n"),
    ],
)
def test_new_dataset_reads_every_test_plan_format_like_an_upload(client_alice, agent, name, data):
    response = _create(client_alice, agent, name, data)

    dataset = Dataset.objects.get(agent=agent)
    assert response.status_code == 302
    assert dataset.source == Dataset.Source.UPLOAD and dataset.documents.count() == 1


def test_new_dataset_still_imports_our_own_csv_at_once(client_alice, agent):
    response = _create(client_alice, agent, "cases.csv", b"question,expected_answer\nWhere is my order?,Tracking\n")

    dataset = Dataset.objects.get(agent=agent)
    assert response.status_code == 302
    assert dataset.source == Dataset.Source.IMPORT and dataset.cases.count() == 1


def test_new_dataset_refuses_a_file_type_nothing_reads(client_alice, agent):
    response = _create(client_alice, agent, "notes.pages", b"binary", **HTMX)

    assert "Choose a" in response.content.decode()
    assert not Dataset.objects.exists()


@pytest.mark.parametrize("route", ["create", "upload"])
def test_a_prose_document_with_no_model_is_refused_at_upload_with_the_way_to_connect_one(client_alice, agent, route):
    url = reverse(f"datasets:{route}", args=[agent.pk])
    upload = SimpleUploadedFile("policy.pdf", files.pdf_bytes([PROSE]))

    response = client_alice.post(url, {"name": "Policy", "file": upload}, **HTMX)

    html = response.content.decode()
    assert response.status_code == 200
    assert "only a model could read test cases from its text, and no model is connected" in html
    assert reverse("accounts:settings") + "#model" in html
    assert not Dataset.objects.exists()


def test_a_prose_document_is_accepted_when_a_model_is_connected(client_alice, agent, settings):
    settings.EVALSITE_LLM_MODEL = "openai/any-model"
    upload = SimpleUploadedFile("policy.docx", files.docx_bytes(PROSE))

    response = client_alice.post(reverse("datasets:upload", args=[agent.pk]), {"name": "Policy", "file": upload})

    assert response.status_code == 302
    assert Dataset.objects.get().status == Dataset.Status.EXTRACTING


def test_a_document_with_labelled_cases_needs_no_model(client_alice, agent):
    lines = ["Question: Can I get a refund?", "Expected answer: Within 14 days.", ""] * 2
    lines[3] = "Question: When is support open?"
    upload = SimpleUploadedFile("cases.pdf", files.pdf_bytes([lines]))

    response = client_alice.post(reverse("datasets:upload", args=[agent.pk]), {"name": "Cases", "file": upload})

    assert response.status_code == 302
    assert Dataset.objects.filter(name="Cases").exists()


# ---- manage.py dataset_import ----------------------------------------------------------


def _import(*args: str) -> dict:
    out = io.StringIO()
    call_command("dataset_import", *args, "--json", stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue())


def test_dataset_import_takes_an_eval_set_json_as_the_ui_does(tmp_path: Path, agent):
    path = tmp_path / "refunds.json"
    path.write_text(json.dumps(EVAL_SET))

    dry = _import(str(path), "--agent", str(agent.pk), "--dry-run")
    assert dry["ok"] and dry["dataset"] is None and dry["mapping"] == []
    assert [(c["question"], c["expected_answer"], c["case_id"]) for c in dry["cases"]] == [
        ("Can I get a refund?", "Within 14 days.", "r-1")
    ]
    assert not Dataset.objects.exists()

    done = _import(str(path), "--agent", str(agent.pk))
    dataset = Dataset.objects.get(pk=done["dataset"]["id"])
    assert dataset.name == "Refund questions" and dataset.eval_set_id == "refunds"
    assert list(dataset.cases.values_list("question", flat=True)) == ["Can I get a refund?"]

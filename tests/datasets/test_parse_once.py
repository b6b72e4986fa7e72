"""One parse of an upload (issue 39): the sandbox reads the file once, from the upload through
the mapping step to the confirmed cases; the mapping applies to what was read, with the same
cases and warnings as the child's own parse with that mapping.

`reads` wraps the real sandbox.run and records the mode of every request it runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.urls import reverse

from datasets.extraction import reading, sandbox
from datasets.extraction.file_import import dataset_file_import
from datasets.extraction.mapping import suggested_choice
from datasets.extraction.services import file_warnings, mapped, read_path
from datasets.models import Dataset, Document
from tests.datasets import files
from tests.datasets.extraction_helpers import confirm_mapping, extract, media_root  # noqa: F401

pytestmark = pytest.mark.django_db

PLAN_HEADER = ["ID", "Scenario", "Priority", "Question", "Expected", "Notes"]
# Scenario as the question; the suggested question column left out; the glossary skipped.
SCENARIO_MAPPING = {
    "tables": {
        "0": {
            "skip": False,
            "columns": {"1": "case_id", "2": "question", "3": "metadata", "4": "ignore", "5": "expected_answer"}
            | {"6": "metadata"},
        },
        "1": {"skip": True, "columns": {"1": "metadata", "2": "metadata"}},
    }
}


@pytest.fixture(autouse=True)
def _no_model(no_llm):
    """Tables and labelled blocks are read without a model."""


@pytest.fixture
def reads(monkeypatch) -> list[str]:
    """The mode of every sandbox.run request, the real sandbox answering each."""
    modes: list[str] = []
    real = sandbox.run

    def spy(request: dict[str, Any], **limits: Any) -> dict[str, Any]:
        modes.append(request.get("mode", ""))
        return real(request, **limits)

    monkeypatch.setattr(sandbox, "run", spy)
    return modes


def _plan_workbook() -> bytes:
    """A test plan with what a mapping must keep: a title block, a merged expected answer, a
    row with no question, a row pasted twice, an empty cell, and a glossary sheet."""
    rows = [
        ["TC-1", "Refunds", "High", "Can I get a refund 40 days after purchase?", "No, only within 30 days.", "p2"],
        ["TC-2", "Refunds", "Low", "How do I ask for a refund?", "Use the form under Billing.", ""],
        ["TC-3", "Support hours", "High", "When is phone support open?", "Weekdays 9-17 CET.", "holidays"],
        ["TC-4", "Weekend support", "High", "Is chat open on Sunday?", "", ""],
        ["TC-5", "", "Low", "", "", "an unfinished row"],
        ["TC-1", "Refunds", "High", "Can I get a refund 40 days after purchase?", "No, only within 30 days.", "p2"],
    ]
    return files.xlsx_bytes(
        {
            "Test plan": [["Acme support bot: regression plan"], ["Owner: QA team"], [], PLAN_HEADER, *rows],
            "Glossary": [["Term", "Definition"], ["SLA", "Service level agreement"]],
        },
        merges={"Test plan": ["E7:E8"]},
    )


def _upload(client, agent, name: str, data: bytes, capture) -> Dataset:  # type: ignore[no-untyped-def]
    """The upload page's POST, then the job it queues on commit, run here (tasks_run_here)."""
    with capture(execute=True):
        client.post(reverse("datasets:upload", args=[agent.pk]), {"name": "Plan", "file": files.upload(name, data)})
    return Dataset.objects.get()


def _mapping_url(dataset: Dataset) -> str:
    return reverse("datasets:mapping", args=[dataset.agent_id, dataset.pk])


def _child_answer(path: Path, file_type: str, mapping: dict[str, Any] | None) -> dict[str, Any]:
    """The child's own parse with `mapping`, as the job ran it before an upload was read once."""
    answer = sandbox.run(
        {
            "mode": "extract",
            "path": str(path),
            "file_type": file_type,
            "max_cases": settings.EVALSITE_MAX_CASES_PER_DOCUMENT,
            "mapping": mapping,
        },
        timeout=settings.EVALSITE_PARSE_TIMEOUT,
        memory_mb=settings.EVALSITE_PARSE_MEMORY_MB,
    )
    answer.pop("peak_kb")
    return answer


# ---- one read -----------------------------------------------------------------------


def test_an_upload_is_read_once_from_the_upload_page_to_its_cases(
    client_alice, agent, reads, django_capture_on_commit_callbacks, tasks_run_here
):
    dataset = _upload(client_alice, agent, "plan.xlsx", _plan_workbook(), django_capture_on_commit_callbacks)
    assert dataset.status == Dataset.Status.REVIEW
    assert client_alice.get(_mapping_url(dataset)).status_code == 200
    form = {f"t0_c{n}": "metadata" for n in range(1, 7)} | {f"t1_c{n}": "metadata" for n in (1, 2)}
    form.update(t0_include="on", t0_c2="question", t0_c5="expected_answer", t0_c4="ignore")

    with django_capture_on_commit_callbacks(execute=True):
        response = client_alice.post(_mapping_url(dataset), form)

    assert response.status_code == 302
    dataset.refresh_from_db()
    assert dataset.status == Dataset.Status.READY
    assert list(dataset.cases.order_by("position").values_list("question", flat=True)[:2]) == ["Refunds", "Refunds"]
    assert reads == ["read"]


def test_the_mapping_applies_to_what_was_read_with_the_stored_file_gone(agent, media_root, reads):  # noqa: F811
    data = _plan_workbook()
    dataset = extract(agent, "plan.xlsx", data, confirm=False)
    assert dataset.status == Dataset.Status.REVIEW
    for path in media_root.rglob("*"):
        if path.is_file():
            path.unlink()  # nothing can open the file any more

    dataset = confirm_mapping(dataset, SCENARIO_MAPPING)

    assert dataset.status == Dataset.Status.READY, dataset.failure_reason
    assert reads == ["read"]
    copy = media_root / "copy.xlsx"
    copy.write_bytes(data)
    before = _child_answer(copy, "xlsx", SCENARIO_MAPPING)
    cases = dataset.cases.order_by("position")
    assert [
        (c.question, c.expected_answer, c.case_id, c.source_location, c.metadata, c.import_warnings) for c in cases
    ] == [
        (c["question"], c["expected_answer"], c["case_id"], c["location"], c["metadata"], c["warnings"])
        for c in before["cases"]
    ]
    assert dataset.warnings == file_warnings(before["warnings"], "plan.xlsx")
    assert any("merged cells E7:E8" in w for c in before["cases"] for w in c["warnings"])
    assert any("repeat an earlier case" in w["message"] for w in dataset.warnings)


def test_a_prose_upload_checked_without_a_model_is_not_read_again_by_the_job(
    client_alice, agent, reads, django_capture_on_commit_callbacks, tasks_run_here
):
    text = (
        "# Plan\n\nQuestion: Can I get a refund after 40 days?\nExpected answer: No, within 30 days only.\n\n"
        "Question: Is phone support open on Sunday?\nExpected answer: No, weekdays only.\n"
    )

    dataset = _upload(client_alice, agent, "plan.md", text.encode(), django_capture_on_commit_callbacks)

    assert dataset.status == Dataset.Status.READY
    assert list(dataset.cases.order_by("position").values_list("question", "expected_answer", "source_location")) == [
        ("Can I get a refund after 40 days?", "No, within 30 days only.", "line 3"),
        ("Is phone support open on Sunday?", "No, weekdays only.", "line 6"),
    ]
    assert reads == ["read"]
    assert dataset.documents.get().reading is None  # settled: nothing left to map


def test_a_file_the_upload_check_could_not_read_fails_with_its_reason_without_a_second_read(
    client_alice, agent, reads, django_capture_on_commit_callbacks, tasks_run_here
):
    dataset = _upload(client_alice, agent, "scan.pdf", files.image_only_pdf(), django_capture_on_commit_callbacks)

    assert dataset.status == Dataset.Status.FAILED
    assert "no text layer" in dataset.failure_reason and "OCR" in dataset.failure_reason
    assert reads == ["read"]
    assert dataset.documents.get().reading is None


def test_the_case_limit_is_asked_and_answered_from_one_read(agent, settings, reads):
    settings.EVALSITE_MAX_CASES_PER_DOCUMENT = 2
    dataset = extract(agent, "cases.csv", files.csv_bytes([["Question", "Answer"], *files.qa_rows(4)]), confirm=False)
    assert dataset.status == Dataset.Status.REVIEW and dataset.mapping["total"] == 4

    dataset = confirm_mapping(dataset, keep_first=True)

    assert dataset.cases.count() == 2
    assert dataset.notice == "The document has 4 test cases; the limit is 2 per document, so the first 2 were kept."
    assert reads == ["read"]


def test_the_import_command_reads_a_file_once_for_its_json_mapping(agent, tmp_path, reads):
    path = tmp_path / "plan.xlsx"
    path.write_bytes(_plan_workbook())

    result = dataset_file_import(
        agent=agent, user=None, path=path, mapping={"Test plan": {"Scenario": "question"}}, dry_run=True
    )

    assert [case["question"] for case in result.cases][:2] == ["Refunds", "Refunds"]
    assert reads == ["read"]


# ---- what was read, kept -------------------------------------------------------------


def test_the_reading_is_kept_while_the_mapping_waits_and_dropped_with_the_cases(agent):
    dataset = extract(agent, "plan.xlsx", _plan_workbook(), confirm=False)
    document = Document.objects.get(dataset=dataset)
    assert document.reading is not None and len(document.reading["tables"]) == 2

    confirm_mapping(dataset)

    document.refresh_from_db()
    assert document.reading is None


def test_a_reading_keeps_its_cells_in_order_through_the_database(agent, tmp_path):
    # JSONB sorts an object's keys: cells written in column order 10, 2 must come back so.
    path = tmp_path / "cases.csv"
    path.write_bytes(files.csv_bytes([["Question", "Answer"], ["Hi?", "Hello"]]))
    read = read_path(str(path), "csv")
    parsed = reading.load(read)
    parsed.tables[0].rows.append((3, {10: "late", 2: "early"}))
    parsed.tables[0].spread[(3, 10)] = "J3:J4"
    document = Document.objects.create(team=agent.team, original_name="cases.csv", file_type="csv")

    Document.objects.filter(pk=document.pk).update(reading=reading.dump(parsed))

    document.refresh_from_db()
    assert reading.dump(reading.load(document.reading)) == reading.dump(parsed)
    assert list(reading.load(document.reading).tables[0].rows[-1][1]) == [10, 2]


# ---- the same cases as the child's parse ------------------------------------------------


SAMPLES = {
    "plan.xlsx": _plan_workbook,
    "plan.xls": lambda: files.xls_bytes(
        {"Cases": [["Question", "Answer", "Area"], ["Hi?", "Hello", "Greeting"], ["Bye?", "", "Greeting"]]},
        merges={"Cases": [(1, 2, 2, 2)]},
    ),
    "cases.csv": lambda: (
        b"ID,Question,Answer\n1, =SUM(A1),Ten\n2,Too many,fields,here\n3,Nul\x00 byte?,Yes\n3,Nul byte?,Yes\n"
    ),
    "plan.docx": lambda: files.docx_bytes(
        [
            "Acme support test plan",
            [["Question", "Expected answer"], ["Can I pay by card?", "Yes."], ["Do you ship abroad?", ""]],
            "Question: Where is my order?",
            "Expected answer: Under Orders in your account.",
            "Question: Can I change my address?",
            "Expected answer: Yes, before the order ships.",
        ]
    ),
    "plan.md": lambda: (
        b"# Plan\n\n| Scenario | User says | Expected |\n|---|---|---|\n| Refund | Can I get a refund? | No. |\n"
        b"| Login | I can't log in | Reset it. |\n\nQuestion: Are you open on Sunday?\nExpected answer: No.\n\n"
        b"Question: Are you open on Monday?\nExpected answer: Yes.\n"
    ),
    "plan.pdf": lambda: files.pdf_bytes(
        [
            ["Test plan", "Q1: Can I return a gift?", "Expected answer: Yes, with the receipt."],
            ["Q2: Can I return a sale item?", "Expected answer: Within 14 days.", "Closing words."],
        ]
    ),
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_mapping_applied_to_what_was_read_gives_the_childs_cases_and_warnings(name, tmp_path):
    path = tmp_path / name
    path.write_bytes(SAMPLES[name]())
    file_type = name.rsplit(".", 1)[1]
    read = json.loads(json.dumps(read_path(str(path), file_type)))  # as a JSON column gives it back
    suggested = suggested_choice(_child_answer(path, file_type, None)["tables"])
    choices: list[dict[str, Any] | None] = [None, suggested]
    if suggested["tables"]:
        key, first = next(iter(suggested["tables"].items()))
        columns = dict.fromkeys(first["columns"], "metadata") | {next(iter(first["columns"])): "question"}
        choices.append({"tables": {**suggested["tables"], key: {"skip": False, "columns": columns}}})

    for chosen in choices:
        answer = json.loads(json.dumps(mapped(read, file_type, chosen=chosen)))

        assert answer == _child_answer(path, file_type, chosen), chosen
    assert answer["cases"]

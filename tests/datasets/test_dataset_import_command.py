"""`manage.py dataset_import`: the upload's pipeline from the command line, its JSON and exit codes."""

import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from datasets.models import Dataset
from tests.datasets import files
from tests.datasets.extraction_helpers import media_root  # noqa: F401
from tests.datasets.test_extraction_mapping import _plan_workbook

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_model(no_llm):
    """The command needs no model for tables."""


def _run(*args: str) -> tuple[int, str]:
    import io

    out = io.StringIO()
    try:
        call_command("dataset_import", *args, stdout=out, stderr=io.StringIO())
    except CommandError as exc:
        return exc.returncode, out.getvalue()
    return 0, out.getvalue()


def _file(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def test_dry_run_json_prints_mapping_warnings_and_cases_without_saving(tmp_path, agent):
    path = _file(tmp_path, "plan.xlsx", _plan_workbook())

    code, out = _run(path, "--agent", str(agent.pk), "--dry-run", "--json")

    assert code == 0
    result = json.loads(out)
    assert result["ok"] and result["dry_run"] and result["dataset"] is None
    plan, glossary = result["mapping"]
    assert plan["table"] == "Test plan" and plan["header_row"] == 4
    assert plan["columns"]["Question"] == "question" and plan["columns"]["Scenario"] == "metadata"
    assert glossary["skipped"]
    assert result["cases"][0] == {
        "question": "Can I get a refund 40 days after purchase?",
        "expected_answer": "No, only within 30 days.",
        "case_id": "TC-1",
        "source": {"file": "plan.xlsx", "location": "Test plan row 5"},
        "attachments": [],
        "metadata": {"Scenario": "Refunds", "Priority": "High", "Notes": "policy 2"},
        "question_from": "",
        "warnings": [],
    }
    assert not Dataset.objects.exists()


def test_the_peer_bench_csv_maps_id_and_expected(tmp_path, agent):
    path = _file(tmp_path, "bench.csv", b"id,question,expected\nq-1,What is 2+2?,4\nq-2,Capital of France?,Paris\n")

    code, out = _run(path, "--agent", agent.name, "--dry-run", "--json")

    cases = json.loads(out)["cases"]
    assert code == 0
    assert [(c["case_id"], c["question"], c["expected_answer"]) for c in cases] == [
        ("q-1", "What is 2+2?", "4"),
        ("q-2", "Capital of France?", "Paris"),
    ]


def test_an_import_creates_a_ready_dataset_with_the_given_mapping_and_warnings(tmp_path, agent):
    data = files.csv_bytes([["Title", "Prompt", "Answer"], ["Refunds", "How do refunds work?", ""]])
    path = _file(tmp_path, "plan.csv", data)
    mapping = json.dumps({"Title": "question", "Prompt": "document_context"})

    code, out = _run(path, "--agent", str(agent.pk), "--dataset", "Nightly plan", "--mapping", mapping, "--json")

    assert code == 0
    result = json.loads(out)
    dataset = Dataset.objects.get(pk=result["dataset"]["id"])
    assert dataset.name == "Nightly plan" and dataset.status == "ready" and dataset.source == "upload"
    case = dataset.cases.get()
    assert case.question == "Refunds" and case.document_context == "How do refunds work?"
    assert dataset.warnings and dataset.warnings[0]["where"].startswith("plan.csv, row 2")
    assert dataset.documents.get().original_name == "plan.csv"
    # The file is the case's source, never an attachment: the agent under test must not read it.
    assert case.source_document == dataset.documents.get()
    assert not case.documents.exists()


def test_a_file_without_cases_exits_1_with_the_reason(tmp_path, agent):
    path = _file(tmp_path, "budget.csv", b"Item,Cost\nLaptops,12000\n")

    code, out = _run(path, "--agent", str(agent.pk), "--json")

    assert code == 1
    assert json.loads(out) == {"ok": False, "error": json.loads(out)["error"], "exit_code": 1}
    assert "no question column" in json.loads(out)["error"]
    assert not Dataset.objects.exists()


def test_a_refused_file_exits_1(tmp_path, agent):
    path = _file(tmp_path, "renamed.pdf", b"MZ\x90\x00" + b"\x00" * 200)

    code, _ = _run(path, "--agent", str(agent.pk))

    assert code == 1


def test_over_the_limit_exits_1_unless_keep_first(tmp_path, agent):
    data = files.csv_bytes([["question", "expected"], *files.qa_rows(501)])
    path = _file(tmp_path, "big.csv", data)

    assert _run(path, "--agent", str(agent.pk), "--dry-run")[0] == 1
    code, out = _run(path, "--agent", str(agent.pk), "--dry-run", "--json", "--keep-first")
    assert code == 0 and len(json.loads(out)["cases"]) == 500 and "501" in json.loads(out)["notice"]


@pytest.mark.parametrize(
    "args",
    [
        ["--agent", "no such agent"],
        ["--agent", "{agent}", "--mapping", "{not json"],
        ["--agent", "{agent}", "--mapping", '{"Cases": {"Question": "question"}}'],
        ["--agent", "{agent}", "--mapping", '{"Question": "answerr"}'],
    ],
)
def test_bad_arguments_exit_2(tmp_path, agent, args):
    path = _file(tmp_path, "plan.xlsx", _plan_workbook())

    code, _ = _run(path, *[arg.replace("{agent}", str(agent.pk)) for arg in args])

    assert code == 2


def test_a_missing_file_or_a_name_in_use_exits_2(tmp_path, agent):
    assert _run(str(tmp_path / "nope.csv"), "--agent", str(agent.pk))[0] == 2
    path = _file(tmp_path, "c.csv", b"question\nQ?\n")
    assert _run(path, "--agent", str(agent.pk), "--dataset", "Same")[0] == 0
    assert _run(path, "--agent", str(agent.pk), "--dataset", "Same")[0] == 2

"""A run as JSON, CSV, XLSX and a standalone HTML report (runs.exporters)."""

import csv
import io
import json

import pytest
from openpyxl import load_workbook

from runs import exporters
from runs.models import Result, Run
from tests.factories import DatasetFactory
from tests.runs.review_helpers import XSS, CaseSpec, build_run

pytestmark = pytest.mark.django_db

FORMULAS = ['=HYPERLINK("http://evil","x")', "+1+1", "-2+3", "@SUM(A1)", "\tTAB", "\rCR", "\nLF"]


@pytest.fixture
def run(agent):
    dataset = DatasetFactory(agent=agent, name="Refund policy")
    run = build_run(
        agent=agent,
        dataset=dataset,
        scoring={"number_of_requests": 2},
        cases=[
            CaseSpec(
                question="Refund window?", repeats=[("pass", 9.0), ("pass", 8.0)], tags=["refunds"], case_id="R-1"
            ),
            CaseSpec(question="SLA credit?", repeats=[("fail", 2.0), ("error", None)], variants=[("pass", 8.0)]),
        ],
    )
    Result.objects.filter(run=run).update(tool_calls=[{"name": "lookup", "args": {"id": 7}}], trace_id="tr-1")
    Run.objects.filter(pk=run.pk).update(summary="Mostly fine.")
    run.refresh_from_db()
    return run


def test_json_has_every_field_of_every_result_and_the_summary(run):
    data = json.loads(exporters.run_export_json(run))
    assert data["format"] == "evalsite.run" and data["version"] == 1
    summary = data["run"]
    assert summary["id"] == run.pk
    assert summary["dataset"]["name"] == "Refund policy"
    assert summary["agent"]["name"] == run.agent.name and summary["agent_version"] == 1
    assert (summary["passed"], summary["failed"], summary["errored"]) == (2, 1, 1)
    assert summary["pass_rate"] == 0.5
    assert summary["scorer"] == "offline" and summary["scorer_label"] == "Offline reference scorer"
    assert summary["summary"] == "Mostly fine."
    assert summary["scoring"]["number_of_requests"] == 2
    assert summary["url"].endswith(f"/agents/{run.agent_id}/runs/{run.pk}/")

    results = data["results"]
    assert len(results) == 5
    expected_fields = {f.name for f in Result._meta.concrete_fields} - exporters.RESULT_FIELDS_OMITTED
    for result in results:
        assert expected_fields <= set(result), expected_fields - set(result)
        assert {"position", "number", "case_id", "question", "expected_answer", "tags", "documents"} <= set(
            result["case"]
        )
    first = results[0]
    assert first["case"]["case_id"] == "R-1" and first["case"]["tags"] == ["refunds"]
    assert first["tool_calls"] == [{"name": "lookup", "args": {"id": 7}}]
    assert first["scorers"][0]["label"] == "ROUGE-L"
    assert first["agent_cost"] == 0.001 and isinstance(first["finished_at"], str)
    assert [(r["repeat"], r["variant"]) for r in results] == [(1, 0), (2, 0), (1, 0), (1, 1), (2, 0)]
    assert "token" not in first


def test_csv_has_a_row_per_result(run):
    rows = list(csv.reader(io.StringIO(exporters.run_export_csv(run))))
    assert rows[0] == list(exporters.CSV_COLUMNS)
    assert len(rows) == 6
    first = dict(zip(rows[0], rows[1], strict=True))
    assert (first["case_number"], first["case_id"], first["repeat"], first["status"], first["score"]) == (
        "1",
        "R-1",
        "1",
        "Pass",
        "9.0",
    )
    assert first["tags"] == "refunds"
    assert first["scorers"] == "ROUGE-L: 0.5"


def test_csv_and_xlsx_neutralise_formulas(agent):
    cases = [CaseSpec(question=text, answer=text, expected=text, case_id=text[:20]) for text in FORMULAS]
    run = build_run(agent=agent, dataset=DatasetFactory(agent=agent, name="=cmd|' /C calc'!A0"), cases=cases)
    rows = list(csv.reader(io.StringIO(exporters.run_export_csv(run))))
    for row in rows[1:]:
        for cell in row:
            assert not cell or cell[0] not in "=+-@\t\r\n", repr(cell)
    assert rows[1][rows[0].index("question")] == "'" + FORMULAS[0]

    workbook = load_workbook(io.BytesIO(exporters.run_export_xlsx(run)))
    for sheet in workbook.worksheets:
        for row in sheet.iter_rows():
            for cell in row:
                assert cell.data_type != "f", (sheet.title, cell.coordinate, cell.value)
                if isinstance(cell.value, str) and cell.value:
                    assert cell.value[0] not in "=+-@\t\r\n", (sheet.title, cell.coordinate, cell.value)


def test_xlsx_has_a_results_sheet_and_a_summary_sheet(run):
    workbook = load_workbook(io.BytesIO(exporters.run_export_xlsx(run)))
    assert workbook.sheetnames == ["Results", "Summary"]
    results = list(workbook["Results"].iter_rows(values_only=True))
    assert results[0] == exporters.CSV_COLUMNS
    assert len(results) == 6
    assert results[1][exporters.CSV_COLUMNS.index("score")] == 9
    summary = {row[0]: row[1] for row in workbook["Summary"].iter_rows(values_only=True)}
    assert summary["Dataset"] == "Refund policy"
    assert summary["Passed"] == 2 and summary["Errors"] == 1
    assert summary["Pass rate"] == 0.5
    assert summary["Summary"] == "Mostly fine."


def test_xlsx_drops_characters_xml_forbids(agent):
    # Not NUL: PostgreSQL text cannot hold it, so it never reaches an export.
    answer = "bell\x07 and tab\x0b end"
    run = build_run(agent=agent, dataset=DatasetFactory(agent=agent), cases=[CaseSpec(answer=answer)])
    workbook = load_workbook(io.BytesIO(exporters.run_export_xlsx(run)))
    values = [cell for row in workbook["Results"].iter_rows(values_only=True) for cell in row]
    assert "bell and tab end" in values


def test_the_html_report_stands_alone(run):
    html = exporters.run_export_html(run)
    assert html.startswith("<!doctype html>")
    assert "<style>" in html
    assert "<script" not in html and "<link" not in html and 'src="http' not in html
    assert "Refund policy" in html
    assert "50%" in html  # cases passed: 1 of 2
    assert "Score distribution" in html
    assert "Refund window?" in html and "SLA credit?" in html
    assert "Mostly fine." in html
    assert "Offline reference scorer" in html
    assert 'id="case-1"' in html


def test_the_html_report_escapes_untrusted_text(agent):
    run = build_run(
        agent=agent, dataset=DatasetFactory(agent=agent), cases=[CaseSpec(question=XSS, answer=XSS, tags=[XSS])]
    )
    html = exporters.run_export_html(run)
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html


def test_a_run_with_no_results_exports(agent):
    run = build_run(
        agent=agent, dataset=DatasetFactory(agent=agent), status=Run.Status.FAILED, error="Broken.", cases=[]
    )
    assert json.loads(exporters.run_export_json(run))["results"] == []
    assert "The run failed:</strong> Broken." in exporters.run_export_html(run)
    load_workbook(io.BytesIO(exporters.run_export_xlsx(run)))

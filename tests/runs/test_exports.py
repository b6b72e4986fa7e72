"""A run as JSON, CSV, XLSX and a standalone HTML report (runs.reports.exporters)."""

import csv
import io
import json

import pytest
from openpyxl import load_workbook

from runs.models import Result, Run
from runs.reports import exporters, xlsx_export
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
    assert rows[0] == list(exporters.export_columns())
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

    workbook = load_workbook(io.BytesIO(xlsx_export.run_export_xlsx(run)))
    for sheet in workbook.worksheets:
        for row in sheet.iter_rows():
            for cell in row:
                assert cell.data_type != "f", (sheet.title, cell.coordinate, cell.value)
                if isinstance(cell.value, str) and cell.value:
                    assert cell.value[0] not in "=+-@\t\r\n", (sheet.title, cell.coordinate, cell.value)


def test_xlsx_has_a_results_sheet_and_a_summary_sheet(run):
    workbook = load_workbook(io.BytesIO(xlsx_export.run_export_xlsx(run)))
    assert workbook.sheetnames == ["Summary", "Results"]
    results = list(workbook["Results"].iter_rows(values_only=True))
    assert results[0] == exporters.export_columns()
    assert len(results) == 6
    assert results[1][exporters.CSV_COLUMNS.index("score")] == 9
    summary = {row[0]: row[1] for row in workbook["Summary"].iter_rows(values_only=True)}
    assert summary["Dataset"] == "Refund policy"
    assert summary["Passed"] == 2 and summary["Errors"] == 1
    assert summary["Pass rate"] == 0.5
    assert summary["Summary"] == "Mostly fine."


def test_xlsx_is_ready_to_read_in_a_spreadsheet(run):
    """Summary first; a frozen, filterable header; sized and wrapped columns; real dates and percentages."""
    from datetime import datetime

    workbook = load_workbook(io.BytesIO(xlsx_export.run_export_xlsx(run)))
    assert workbook.sheetnames[0] == "Summary"
    results = workbook["Results"]
    assert results.freeze_panes == "A2"
    last_column = results.cell(row=1, column=len(exporters.export_columns())).column_letter
    assert results.auto_filter.ref == f"A1:{last_column}6"
    assert all(cell.font.bold for cell in results[1])

    def column(name):
        return results.cell(row=1, column=exporters.CSV_COLUMNS.index(name) + 1).column_letter

    assert results.column_dimensions[column("question")].width >= 40
    assert results.column_dimensions[column("run_id")].width <= 10
    assert results[f"{column('actual_answer')}2"].alignment.wrap_text
    finished = results[f"{column('finished_at')}2"]
    assert isinstance(finished.value, datetime) and finished.is_date
    assert "%" not in results[f"{column('score')}2"].number_format

    summary = workbook["Summary"]
    rows = {row[0].value: row[1] for row in summary.iter_rows()}
    assert rows["Pass rate"].value == 0.5 and rows["Pass rate"].number_format == "0.0%"
    assert isinstance(rows["Started"].value, datetime) and rows["Started"].is_date
    assert rows["Summary"].alignment.wrap_text
    assert summary.column_dimensions["B"].width >= 60


def test_xlsx_drops_characters_xml_forbids(agent):
    # Not NUL: PostgreSQL text cannot hold it, so it never reaches an export.
    answer = "bell\x07 and tab\x0b end"
    run = build_run(agent=agent, dataset=DatasetFactory(agent=agent), cases=[CaseSpec(answer=answer)])
    workbook = load_workbook(io.BytesIO(xlsx_export.run_export_xlsx(run)))
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
    load_workbook(io.BytesIO(xlsx_export.run_export_xlsx(run)))


def test_repeats_are_counted_the_same_way_on_the_page_in_the_report_and_the_exports(agent, client_alice):
    """Per request everywhere (10 results: 7 passed, 3 failed), the per-case figures as a detail."""
    import re

    from django.urls import reverse

    dataset = DatasetFactory(agent=agent, name="Repeats")
    run = build_run(
        agent=agent,
        dataset=dataset,
        scoring={"number_of_requests": 5},
        cases=[
            CaseSpec(question="Always right?", repeats=[("pass", 9.0)] * 5),
            CaseSpec(
                question="Sometimes right?", repeats=[("pass", 9.0), ("pass", 8.0), ("fail", 2.0)] + [("fail", 3.0)] * 2
            ),
        ],
    )
    detail = (
        "Per case (a case passes only when every repeat passed): 1 passed · 1 failed · 0 errors · 1 flaky, of 2 cases."
    )

    page = client_alice.get(reverse("runs:detail", args=[agent.pk, run.pk])).content.decode()
    assert re.search(r"Passed</dt><dd class=\"green-text\">7<", page)
    assert re.search(r"Failed</dt><dd class=\"red-text\">3<", page)
    assert detail in page

    report = exporters.run_export_html(run)
    assert '<div class="rate bad">70%</div>' in report
    assert "of 10 results passed (2 cases × 5 repeats)" in report
    assert '<dt>Passed</dt><dd class="green">7</dd>' in report
    assert '<dt>Failed</dt><dd class="red">3</dd>' in report
    assert detail in report

    data = json.loads(exporters.run_export_json(run))["run"]
    assert (data["passed"], data["failed"], data["pass_rate"]) == (7, 3, 0.7)
    assert data["cases"] == {
        "total": 2,
        "passed": 1,
        "failed": 1,
        "errored": 0,
        "abstained": 0,
        "skipped": 0,
        "flaky": 1,
        "pass_rate": 0.5,
    }

    summary = dict(load_workbook(io.BytesIO(xlsx_export.run_export_xlsx(run)))["Summary"].values)
    assert summary["Passed"] == 7 and summary["Cases passed (every repeat passed)"] == 1


def test_the_html_report_names_the_check_that_failed_a_case(agent):
    run = build_run(agent=agent, dataset=DatasetFactory(agent=agent), cases=[CaseSpec(repeats=[("fail", 10.0)])])
    detail = "Expected lookup_order; the agent called no tools."
    Result.objects.filter(run=run).update(
        scorers=[
            {"name": "trajectory", "label": "Trajectory (strict)", "score": 0.0, "passed": False, "detail": detail}
        ]
    )
    report = exporters.run_export_html(run)
    assert "✗ Trajectory (strict) check failed</span>" in report
    assert f"<strong>Failed on the Trajectory (strict) check:</strong> {detail}" in report

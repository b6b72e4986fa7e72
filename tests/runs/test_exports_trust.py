"""Exports name what a run's figures leave out: results that need a judge model (out of the pass
rate), unusable judge answers, answers cut at their token limit, a judge that failed preflight."""

import csv
import io
import json

import pytest
from openpyxl import load_workbook

from runs.models import Run
from runs.reports import exporters, xlsx_export
from tests.factories import DatasetFactory
from tests.runs.review_helpers import CaseSpec, build_run

pytestmark = pytest.mark.django_db
CUT = [{"call": "agent", "limit": 256}]
REASON = "The reasoning repeats the prompt's instructions."


@pytest.fixture
def run(agent):
    return build_run(
        agent=agent,
        dataset=DatasetFactory(agent=agent, name="Refund plan"),
        cases=[
            CaseSpec(repeats=[("pass", 9.0)]),
            CaseSpec(repeats=[("fail", 2.0)], cut=CUT),
            CaseSpec(repeats=[("abstained", None)]),
            CaseSpec(repeats=[("error", None)], error_kind="judge_unusable", error=REASON),
        ],
        scorer=Run.Scorer.LLM,
        judge_failed_preflight=True,
    )


def test_json_counts_abstentions_apart_and_carries_the_new_fields(run):
    data = json.loads(exporters.run_export_json(run))
    summary = data["run"]
    assert summary["abstained"] == 1
    assert summary["pass_rate"] == round(1 / 3, 4)  # pass, fail and error count; the abstention does not
    assert summary["judge_failed_preflight"] is True
    assert summary["trust"]["judge_unusable"] == 1
    assert summary["trust"]["cut"] == [
        {"call": "agent", "limit": 256, "count": 1, "setting": "EVALSITE_LLM_MAX_TOKENS_AGENT"}
    ]
    assert "1 agent answer was cut at 256 tokens: raise EVALSITE_LLM_MAX_TOKENS_AGENT." in summary["trust"]["notes"]
    results = data["results"]
    assert [r["status"] for r in results] == ["pass", "fail", "abstained", "error"]
    assert results[1]["cut"] == CUT and results[3]["error_kind"] == "judge_unusable"


def test_csv_has_the_status_label_the_error_kind_and_the_cut_columns(run):
    rows = list(csv.DictReader(io.StringIO(exporters.run_export_csv(run))))
    assert [row["status"] for row in rows] == ["Pass", "Fail", "Needs a judge model", "Error"]
    assert rows[1]["cut"] == "Answer cut at 256 tokens"
    assert rows[3]["error_kind"] == "Judge answer unusable" and rows[3]["error"] == REASON


def test_xlsx_summary_warns_about_preflight_first_and_counts_the_rest(run):
    sheet = load_workbook(io.BytesIO(xlsx_export.run_export_xlsx(run)))["Summary"]
    rows = {row[0].value: row[1].value for row in sheet.iter_rows()}
    assert next(sheet.iter_rows())[1].value == "The judge failed preflight: its scores are not trustworthy."
    assert rows["Need a judge model (left out of the pass rate)"] == 1
    assert rows["Judge answers unusable (counted as errors)"] == 1
    assert rows["Answers cut at their token limit"] == 1


def test_the_html_report_shows_every_mark(run):
    report = exporters.run_export_html(run)
    assert "The judge failed preflight: its scores are not trustworthy." in report
    assert "33%</div>" in report and "of 3 results passed; 1 more needs a judge model and is left out" in report
    assert '<span class="badge badge-abstained">Needs a judge model</span>' in report
    assert "✂ Answer cut at 256 tokens" in report
    assert "<strong>Judge answer unusable:</strong> " + REASON in report.replace("&#x27;", "'")

"""runs/reports/tools.py: tool-use diagnostics per result and precision/recall per tool for a run."""

import random

import pytest
from django.urls import reverse

from runs.judging.scoring import trajectory_row
from runs.judging.trajectory import trajectory_match
from runs.models import Result, Run, RunCase
from runs.reports import exporters
from runs.reports.tools import run_tool_table, tool_diagnosis

pytestmark = pytest.mark.django_db


def _call(name, **args):
    return {"name": name, "args": args}


def test_a_result_with_a_wrong_argument_a_missing_and_an_extra_call():
    expected = [_call("lookup_order", order_id="A-1"), _call("refund", amount=10), _call("notify")]
    actual = [_call("lookup_order", order_id="B-2"), _call("notify"), _call("search", q="x")]

    diagnosis = tool_diagnosis(actual, expected, check_args=True)

    assert diagnosis.as_dict() == {
        "matched": ["notify"],
        "missing": ["refund"],
        "extra": ["search"],
        "wrong_args": ["lookup_order"],
    }


def test_without_argument_checks_a_call_by_name_is_a_match():
    diagnosis = tool_diagnosis([_call("lookup_order", order_id="B-2")], [_call("lookup_order", order_id="A-1")], False)
    assert (diagnosis.as_dict()["matched"], diagnosis.wrong_args) == (["lookup_order"], [])


def _tool_run(agent):
    run = Run.objects.create(agent=agent, agent_version=agent.current_version, dataset_name="Tools", total=3)
    specs = [
        # expected, actual, status
        ([_call("lookup_order", order_id="A-1")], [_call("lookup_order", order_id="A-1")], "pass"),
        ([_call("lookup_order", order_id="A-2"), _call("refund")], [_call("lookup_order", order_id="B")], "fail"),
        ([_call("refund")], [_call("refund"), _call("search")], "fail"),
    ]
    for position, (expected, actual, status) in enumerate(specs):
        case = RunCase.objects.create(
            run=run,
            position=position,
            question=f"Q{position}",
            data={"expected_tools": expected, "check_tool_args": True},
        )
        Result.objects.create(run=run, case=case, status=status, tool_calls=actual)
    return run


def test_precision_recall_and_argument_match_per_tool(agent):
    run = _tool_run(agent)

    rows = {row.name: row for row in run_tool_table(run=run)}

    lookup, refund, search = rows["lookup_order"], rows["refund"], rows["search"]
    # lookup_order: expected twice, called twice, both by name; arguments right once.
    assert (lookup.precision, lookup.recall, lookup.arg_match_rate) == (1.0, 1.0, 0.5)
    # refund: expected twice, called once (missing in case 2).
    assert (refund.precision, refund.recall, refund.arg_match_rate) == (1.0, 0.5, 1.0)
    # search: never expected, called once.
    assert (search.precision, search.recall, search.arg_match_rate) == (0.0, None, None)


def test_the_run_page_loads_the_tool_table(client_alice, agent):
    run = _tool_run(agent)
    url = reverse("runs:tools", args=[agent.pk, run.pk])

    page = client_alice.get(reverse("runs:detail", args=[agent.pk, run.pk]), {"tab": "charts"}).content.decode()
    fragment = client_alice.get(url, HTTP_HX_REQUEST="true").content.decode()

    assert f'hx-get="{url}"' in page
    assert fragment.lstrip().startswith('<section id="tool-diagnostics"')
    assert "lookup_order" in fragment and "50%" in fragment
    assert "<html" in client_alice.get(url).content.decode()


def test_a_run_without_expected_tools_has_no_table(client_alice, agent):
    run = Run.objects.create(agent=agent, agent_version=agent.current_version, dataset_name="Plain")
    url = reverse("runs:tools", args=[agent.pk, run.pk])
    assert "tool-diagnostics" not in client_alice.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert "No case of this run expects tools." in client_alice.get(url).content.decode()


def test_exports_carry_the_diagnosis_and_the_table(agent):
    run = _tool_run(agent)
    data = exporters.run_export_data(run)
    assert data["results"][1]["tool_diagnosis"] == {
        "matched": [],
        "missing": ["refund"],
        "extra": [],
        "wrong_args": ["lookup_order"],
    }
    assert {row["tool"]: row["recall"] for row in data["run"]["tools"]} == {
        "lookup_order": 1.0,
        "refund": 0.5,
        "search": None,
    }
    csv_text = exporters.run_export_csv(run)
    header = csv_text.splitlines()[0]
    assert '"tools_missing"' in header and '"tools_wrong_args"' in header
    assert '"refund"' in csv_text.splitlines()[2]


# ---- one diagnosis: the card, the exports and the API agree, in the case's trajectory mode --------

MODES = ("strict", "unordered", "superset", "subset")


def test_a_wrong_argument_in_superset_mode_reads_the_same_on_the_card_and_in_the_exports(agent):
    expected, actual = [_call("lookup_order", order_id="A-1042")], [_call("lookup_order", order_id="C-3")]
    run = Run.objects.create(agent=agent, agent_version=agent.current_version, dataset_name="Tools", total=1)
    case = RunCase.objects.create(
        run=run,
        position=0,
        question="Where is my order?",
        data={"expected_tools": expected, "check_tool_args": True, "trajectory_mode": "superset"},
    )
    row = trajectory_row(actual, expected, "superset", True)
    Result.objects.create(run=run, case=case, status="fail", tool_calls=actual, scorers=[row.as_dict()])

    assert row.passed is False
    assert row.detail == (
        "Expected at least the expected tools with matching arguments; the agent called "
        'lookup_order(order_id="C-3"). Called with other arguments: lookup_order(order_id="C-3") '
        'where lookup_order(order_id="A-1042") was expected.'
    )
    assert "Missing" not in row.detail and "Not expected" not in row.detail
    assert exporters.run_export_data(run)["results"][0]["tool_diagnosis"] == {
        "matched": [],
        "missing": [],
        "extra": [],
        "wrong_args": ["lookup_order"],
    }
    row = dict(zip(exporters.CSV_COLUMNS, exporters.result_row(run, Result.objects.get(run=run)), strict=True))
    assert [row[name] for name in ("tools_missing", "tools_extra", "tools_wrong_args")] == ["", "", "lookup_order"]


def test_an_extra_call_in_superset_mode_is_shown_as_allowed():
    row = trajectory_row([_call("lookup_order"), _call("search")], [_call("lookup_order")], "superset", False)
    assert row.passed is True
    assert row.detail.endswith("Also called (allowed, superset mode): search().")


def test_a_missing_call_in_subset_mode_is_shown_as_allowed():
    row = trajectory_row([_call("lookup_order")], [_call("lookup_order"), _call("refund")], "subset", False)
    assert row.passed is True
    assert row.detail.endswith("Not called (allowed, subset mode): refund().")


def test_strict_mode_names_an_order_that_differs():
    row = trajectory_row(
        [_call("refund"), _call("lookup_order")], [_call("lookup_order"), _call("refund")], "strict", False
    )
    assert row.passed is False
    assert row.detail.endswith("Every expected call was made, in another order.")


def _random_calls(rng):
    return [_call(rng.choice(["a", "b", "c"]), id=rng.choice([1, 2])) for _ in range(rng.randint(0, 3))]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("check_args", [True, False])
def test_the_diagnosis_finds_a_problem_exactly_when_the_check_fails(mode, check_args):
    rng = random.Random(f"{mode}-{check_args}")
    for _ in range(400):
        actual, expected = _random_calls(rng), _random_calls(rng)
        passed, _problem = trajectory_match(actual, expected, mode, check_args)
        diagnosis = tool_diagnosis(actual, expected, check_args, mode)
        assert (not diagnosis.problems()) is passed, (mode, check_args, actual, expected, diagnosis.problems())


def test_the_api_gives_each_result_its_tool_diagnosis(client, agent, alice):
    from accounts.services import api_token_create

    run = _tool_run(agent)
    _, raw = api_token_create(user=alice, name="ci")

    body = client.get(f"/api/runs/{run.pk}/results", HTTP_AUTHORIZATION=f"Bearer {raw}").json()

    assert [r["tool_diagnosis"] for r in body["items"]] == [
        {"matched": ["lookup_order"], "missing": [], "extra": [], "wrong_args": []},
        {"matched": [], "missing": ["refund"], "extra": [], "wrong_args": ["lookup_order"]},
        {"matched": ["refund"], "missing": [], "extra": ["search"], "wrong_args": []},
    ]


def test_a_result_failed_by_its_tool_check_never_reads_correct_anywhere(make_dataset, alice, fake_llm, client_alice):
    """The judge's 9 says "Comprehensive", the trajectory check fails the case: the result's verdict,
    stored once, says why it failed, on the card, in the CSV and in the XLSX."""
    import io

    import openpyxl

    from agents.models import Agent
    from runs import services
    from runs.reports import xlsx_export
    from tests.runs.conftest import drive

    fake_llm.add_rule(task="judge", json={"score": 9, "reasoning": "Right: the refund window is 30 days."})
    dataset = make_dataset(1, kind=Agent.Kind.LLM, expected_tools=[_call("lookup_order", order_id="A-1")])

    run = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))

    result = run.results.get()
    assert (result.status, result.verdict) == ("fail", "Wrong tool calls")
    row = dict(zip(exporters.CSV_COLUMNS, exporters.result_row(run, result), strict=True))
    assert (row["status"], row["verdict"]) == ("Fail", "Wrong tool calls")
    sheet = openpyxl.load_workbook(io.BytesIO(xlsx_export.run_export_xlsx(run)))["Results"]
    header = [cell.value for cell in sheet[1]]
    assert sheet.cell(row=2, column=header.index("verdict") + 1).value == "Wrong tool calls"
    page = client_alice.get(reverse("runs:detail", args=[dataset.agent.pk, run.pk])).content.decode()
    assert "Wrong tool calls" in page and "Comprehensive" not in page

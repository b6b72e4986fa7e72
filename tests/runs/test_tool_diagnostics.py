"""runs/tools.py: tool-use diagnostics per result and precision/recall per tool for a run."""

import pytest
from django.urls import reverse

from runs import exporters
from runs.models import Result, Run, RunCase
from runs.tools import run_tool_table, tool_diagnosis

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
    assert (diagnosis.matched, diagnosis.wrong_args) == (["lookup_order"], [])


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

    page = client_alice.get(reverse("runs:detail", args=[agent.pk, run.pk])).content.decode()
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

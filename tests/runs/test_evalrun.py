"""`manage.py evalrun`, the CI gate: exit codes, progress, reports."""

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command

from datasets.models import Dataset
from runs.models import Run
from tests.factories import AgentFactory, DatasetFactory, TestCaseFactory
from tests.runs.review_helpers import CaseSpec, build_run

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def dataset(agent):
    dataset = DatasetFactory(agent=agent, name="Refund policy")
    TestCaseFactory(dataset=dataset)
    return dataset


def _finished(agent, dataset, outcomes, status=Run.Status.COMPLETED, key="ci-42"):
    """A run the command attaches to through its request key (as a retried CI job would)."""
    cases = [CaseSpec(question=f"Q{n}", repeats=[outcome]) for n, outcome in enumerate(outcomes)]
    return build_run(agent=agent, dataset=dataset, cases=cases, status=status, request_key=key)


def _evalrun(*args, **kwargs):
    """(exit code, stdout, stderr) of the command."""
    import io

    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("evalrun", *args, stdout=out, stderr=err, **kwargs)
        code = 0
    except SystemExit as exit:
        code = exit.code
    except CommandError as error:
        code = error.returncode
        err.write(str(error))
    return code, out.getvalue(), err.getvalue()


@pytest.mark.django_db
def test_a_pass_rate_at_the_threshold_exits_0_and_writes_the_reports(agent, dataset, tmp_path):
    run = _finished(agent, dataset, [("pass", 9.0)] * 4 + [("fail", 2.0)])
    code, out, _ = _evalrun(
        "--agent", str(agent.pk), "--dataset", dataset.name, "--threshold", "0.8", "--wait",
        "--output", str(tmp_path / "reports"), "--request-key", "ci-42",
    )  # fmt: skip
    assert code == 0
    assert f"Attached to run #{run.pk}" in out
    assert "Results: 4/5 passed (80.0%)" in out
    assert "meets the threshold of 80.0%" in out
    report = json.loads((tmp_path / "reports" / f"run-{run.pk}.json").read_text())
    assert report["run"]["id"] == run.pk and len(report["results"]) == 5
    assert "Refund policy" in (tmp_path / "reports" / f"run-{run.pk}.html").read_text()


@pytest.mark.django_db
def test_a_pass_rate_below_the_threshold_exits_1(agent, dataset):
    _finished(agent, dataset, [("pass", 9.0)] * 4 + [("fail", 2.0)])
    code, out, _ = _evalrun(
        "--agent", agent.name, "--dataset", str(dataset.pk), "--threshold", "0.9", "--wait", "--request-key", "ci-42"
    )
    assert code == 1
    assert "Results: 4/5 passed (80.0%)" in out
    assert "Below the threshold: 80.0% < 90.0%." in out


@pytest.mark.django_db
def test_the_default_threshold_wants_every_case_to_pass(agent, dataset):
    _finished(agent, dataset, [("pass", 9.0), ("error", None)])
    code, out, _ = _evalrun("--agent", agent.name, "--dataset", dataset.name, "--wait", "--request-key", "ci-42")
    assert code == 1
    assert "Results: 1/2 passed (50.0%)" in out


@pytest.mark.django_db
def test_a_failed_run_exits_2(agent, dataset):
    _finished(agent, dataset, [], status=Run.Status.FAILED)
    Run.objects.update(error="This knowledge agent has no knowledge text.")
    code, out, _ = _evalrun(
        "--agent", agent.name, "--dataset", dataset.name, "--wait", "--threshold", "0", "--request-key", "ci-42"
    )
    assert code == 2
    assert "The run failed: This knowledge agent has no knowledge text." in out


@pytest.mark.django_db
def test_a_stopped_run_never_passes_the_gate(agent, dataset):
    """Stopped from the UI with every finished case passing: still exit 2, with the reason."""
    run = _finished(agent, dataset, [("pass", 9.0), ("pass", 9.0), ("skipped", None)], status=Run.Status.STOPPED)
    code, out, _ = _evalrun(
        "--agent", agent.name, "--dataset", dataset.name, "--wait", "--threshold", "0.5", "--request-key", "ci-42"
    )
    assert code == 2
    assert f"Run #{run.pk} was stopped before it finished: 1 of 3 cases were not run." in out
    assert "meets the threshold" not in out


@pytest.mark.django_db
def test_a_stopped_or_failed_run_is_not_ok_in_json(agent, dataset):
    _finished(agent, dataset, [("pass", 9.0), ("skipped", None)], status=Run.Status.STOPPED)
    args = (
        "--agent",
        agent.name,
        "--dataset",
        dataset.name,
        "--wait",
        "--json",
        "--threshold",
        "0",
        "--request-key",
        "ci-42",
    )
    code, out, _ = _evalrun(*args)
    data = json.loads(out)
    assert code == 2
    assert data["ok"] is False and data["exit_code"] == 2 and data["status"] == "stopped"
    assert "stopped before it finished" in data["reason"]
    Run.objects.update(status=Run.Status.FAILED, error="The agent has no model.")
    code, out, _ = _evalrun(*args)
    data = json.loads(out)
    assert code == 2 and data["ok"] is False
    assert data["reason"] == "The run failed: The agent has no model."


@pytest.mark.django_db
def test_json_output_is_machine_readable(agent, dataset, tmp_path):
    run = _finished(agent, dataset, [("pass", 9.0), ("fail", 1.0)])
    code, out, err = _evalrun(
        "--agent", agent.name, "--dataset", dataset.name, "--wait", "--json", "--threshold", "0.5",
        "--output", str(tmp_path), "--request-key", "ci-42",
    )  # fmt: skip
    result = json.loads(out)
    assert code == 0
    assert result == {
        "run_id": run.pk,
        "status": "completed",
        "passed": 1,
        "failed": 1,
        "errored": 0,
        "abstained": 0,
        "judge_failed_preflight": False,
        "judge_unusable": 0,
        "cut": [],
        "total": 2,
        "pass_rate": 0.5,
        "threshold": 0.5,
        "average_score": 5.0,
        "ok": True,
        "exit_code": 0,
        "reason": "Passed: 50.0% meets the threshold of 50.0%.",
        "url": f"{settings.SITE_URL}/agents/{agent.pk}/runs/{run.pk}/",
        "reports": {"json": str(tmp_path / f"run-{run.pk}.json"), "html": str(tmp_path / f"run-{run.pk}.html")},
    }
    assert "Attached to run" in err and "Wrote" in err


@pytest.mark.django_db
def test_without_wait_it_starts_a_run_and_prints_its_id(agent, dataset, no_llm):
    code, out, _ = _evalrun("--agent", agent.name, "--dataset", dataset.name)
    run = Run.objects.get()
    assert code == 0
    assert f"Run id: {run.pk}" in out
    assert run.status == Run.Status.PENDING and run.created_by is None
    assert run.total == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    "args, message",
    [
        (["--agent", "No such agent", "--dataset", "Refund policy"], "No agent “No such agent”"),
        (["--agent", "Support bot", "--dataset", "No such dataset"], "has no dataset “No such dataset”"),
        (["--agent", "Support bot", "--dataset", "Refund policy", "--threshold", "80"], "between 0 and 1"),
    ],
)
def test_bad_arguments_exit_2(agent, dataset, args, message):
    code, _, err = _evalrun(*args)
    assert code == 2
    assert message in err
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_a_dataset_that_is_not_ready_exits_2(agent, dataset):
    Dataset.objects.filter(pk=dataset.pk).update(status=Dataset.Status.EXTRACTING)
    code, _, err = _evalrun("--agent", agent.name, "--dataset", dataset.name, "--wait")
    assert code == 2
    assert "still being prepared" in err


@pytest.mark.django_db
def test_an_ambiguous_agent_name_exits_2(agent, dataset, other_team):
    AgentFactory(team=other_team, name=agent.name)
    code, _, err = _evalrun("--agent", agent.name, "--dataset", dataset.name)
    assert code == 2
    assert "use the id" in err


def test_a_missing_argument_exits_2_from_the_command_line():
    completed = subprocess.run(
        [sys.executable, "manage.py", "evalrun", "--dataset", "x"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 2
    assert "--agent" in completed.stderr


@pytest.mark.worker
def test_a_real_run_through_a_worker(celery_worker, make_dataset, agent, no_llm, tmp_path):
    """End to end: the command starts the run, a real worker scores it offline, the gate decides."""
    dataset = make_dataset(4, agent=agent)
    dataset.cases.create(
        position=9, question="What is the SLA credit?", expected_answer="The SLA credit is 10% per hour."
    )
    worker = celery_worker(concurrency=2)

    code, out, _ = _evalrun(
        "--agent", str(agent.pk), "--dataset", str(dataset.pk), "--threshold", "0.8", "--wait",
        "--output", str(tmp_path), "--interval", "0.3",
    )  # fmt: skip

    run = Run.objects.get()
    assert run.status == Run.Status.COMPLETED, worker.read_log()[-3000:]
    assert code == 0
    assert "Results: 4/5 passed (80.0%)" in out
    assert "Running:" in out or "Pending:" in out  # progress lines while waiting
    assert json.loads((tmp_path / f"run-{run.pk}.json").read_text())["run"]["scorer"] == "offline"
    assert (tmp_path / f"run-{run.pk}.html").exists()

    code, out, _ = _evalrun("--agent", str(agent.pk), "--dataset", str(dataset.pk), "--wait", "--interval", "0.3")
    assert code == 1  # the default threshold: every case
    assert "Results: 4/5 passed (80.0%)" in out


@pytest.mark.django_db
def test_a_run_stopped_at_its_budget_exits_2_with_the_reason(agent, dataset):
    from decimal import Decimal

    run = _finished(agent, dataset, [("pass", 9.0), ("skipped", None)], status=Run.Status.STOPPED)
    Run.objects.filter(pk=run.pk).update(
        stop_reason=Run.BUDGET_REACHED,
        budget_cap=Decimal("0.01"),
        agent_cost=Decimal("0.009"),
        judge_cost=Decimal("0.002"),
    )
    args = ("--agent", agent.name, "--dataset", dataset.name, "--wait", "--threshold", "0", "--request-key", "ci-42")

    code, out, _ = _evalrun(*args)
    assert code == 2
    assert f"Run #{run.pk} was stopped: budget reached ($0.0110 of its $0.0100 cap), before it finished" in out
    code, out, _ = _evalrun(*args, "--json")
    data = json.loads(out)
    assert (code, data["exit_code"], data["ok"]) == (2, 2, False)
    assert "budget reached" in data["reason"]


def test_wait_polls_with_one_small_query_at_most_every_half_second(agent, dataset, monkeypatch):
    """--wait returns within half a second of the run finishing (it polled every 2 s)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from runs.management.commands import evalrun

    run = _finished(agent, dataset, [("pass", 9.0)], status=Run.Status.RUNNING)
    naps: list[float] = []
    captured = CaptureQueriesContext(connection)

    def nap(seconds: float) -> None:  # stands in for the wait between polls: the worker finishes meanwhile
        naps.append(seconds)
        if len(naps) == 3:
            Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED, summary_note="No summary.")

    monkeypatch.setattr(evalrun.time, "sleep", nap)
    command = evalrun.Command(stdout=io.StringIO(), stderr=io.StringIO())
    command.as_json = False
    with captured:
        finished = command.wait(run, timeout=60, interval=evalrun.POLL_SECONDS)

    assert finished.status == Run.Status.COMPLETED and finished.summary_note == "No summary."
    assert naps == [evalrun.POLL_SECONDS] * 3 and evalrun.POLL_SECONDS <= 0.5
    assert command.create_parser("manage.py", "evalrun").get_default("interval") == evalrun.POLL_SECONDS
    polls = [q["sql"] for q in captured.captured_queries if q["sql"].startswith("SELECT")]
    assert len(polls) == 3 + 1 + 1  # three polls while running, the one that sees it finished, the final row
    assert '"summary_note"' in polls[0] and '"dataset_name"' not in polls[0]  # a poll reads the progress columns


@pytest.fixture
def served_elsewhere(settings, tmp_path, monkeypatch):
    """`make run PORT=8104` in another shell: the stack recorded its address; this shell has
    no HOST, PORT or SITE_URL of its own."""
    from evalsite import links

    settings.EVALSITE_SERVED_URL_FILE = tmp_path / "served-url"
    settings.SITE_URL, settings.SITE_URL_EXPLICIT = "http://127.0.0.1:8000", False
    monkeypatch.delenv("PORT", raising=False)
    monkeypatch.delenv("HOST", raising=False)
    links.served_url_record("http://127.0.0.1:8104")  # this process stands for the live stack
    return "http://127.0.0.1:8104"


@pytest.mark.django_db
def test_links_in_the_output_and_the_reports_use_the_port_the_stack_serves(agent, dataset, tmp_path, served_elsewhere):
    """Issue 34, item 7: not a hard-coded http://127.0.0.1:8000."""
    run = _finished(agent, dataset, [("pass", 9.0)])
    page = f"{served_elsewhere}/agents/{agent.pk}/runs/{run.pk}/"

    code, out, err = _evalrun(
        "--agent", str(agent.pk), "--dataset", dataset.name, "--wait", "--json",
        "--output", str(tmp_path / "reports"), "--request-key", "ci-42",
    )  # fmt: skip

    assert code == 0 and json.loads(out)["url"] == page
    assert f"Run page: {page}" in err
    assert json.loads((tmp_path / "reports" / f"run-{run.pk}.json").read_text())["run"]["url"] == page
    report = (tmp_path / "reports" / f"run-{run.pk}.html").read_text()
    assert page in report and ":8000" not in report


@pytest.mark.django_db
def test_an_own_port_or_a_stack_that_is_gone_is_not_overruled(agent, dataset, served_elsewhere, monkeypatch):
    from evalsite import links

    monkeypatch.setenv("PORT", "8000")  # this shell says where the console is: its word counts
    assert links.command_site_url() == "http://127.0.0.1:8000"
    monkeypatch.delenv("PORT")
    assert links.command_site_url() == served_elsewhere
    links.served_url_file().write_text("http://127.0.0.1:8104 999999999\n")  # no such process
    assert links.command_site_url() == "http://127.0.0.1:8000"
    links.served_url_forget()
    assert links.command_site_url() == "http://127.0.0.1:8000"

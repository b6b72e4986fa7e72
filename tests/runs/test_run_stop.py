import threading

import pytest
from django.core.exceptions import ValidationError

from runs import services
from runs.models import Result, Run
from tests.runs.conftest import drive, execute_one
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db


def test_stop_skips_what_has_not_started_and_keeps_what_finished(make_dataset, alice, no_llm):
    run = services.run_start(agent=(dataset := make_dataset(6)).agent, dataset=dataset, user=alice)
    execute_one(run)

    run = services.run_stop(run=run)

    assert run.status == Run.Status.STOPPED
    assert run.stop_requested_at is not None
    statuses = list(Result.objects.filter(run=run).order_by("id").values_list("status", flat=True))
    assert statuses == ["pass"] + ["skipped"] * 5
    # A task message still on its way finds its case skipped and does nothing.
    late = Result.objects.filter(run=run, status=Result.Status.SKIPPED).order_by("id").first()
    services.run_execute_case(result_id=late.pk, token=late.token)
    late.refresh_from_db()
    assert late.status == Result.Status.SKIPPED
    run = drive(run)
    assert (run.status, run.completed, run.passed) == (Run.Status.STOPPED, 1, 1)


def test_a_case_in_flight_at_stop_finishes_and_is_kept(make_dataset, alice, no_llm, django_capture_on_commit_callbacks):
    run = services.run_start(agent=(dataset := make_dataset(4)).agent, dataset=dataset, user=alice)
    running = Result.objects.filter(run=run, status=Result.Status.QUEUED).order_by("id").first()
    Result.objects.filter(pk=running.pk).update(status=Result.Status.RUNNING)  # claimed by a worker

    with django_capture_on_commit_callbacks() as callbacks:
        services.run_stop(run=run)
    assert callbacks == []  # no finishing while a case is still running

    services.run_execute_case(result_id=running.pk, token=running.token)

    running.refresh_from_db()
    assert running.status == Result.Status.PASS
    run.refresh_from_db()
    assert run.completed == 1
    assert Result.objects.filter(run=run, status=Result.Status.QUEUED).count() == 0  # nothing new started


def test_a_finished_run_cannot_be_stopped(make_dataset, alice, no_llm):
    run = drive(services.run_start(agent=(dataset := make_dataset(1)).agent, dataset=dataset, user=alice))
    with pytest.raises(ValidationError, match="already finished"):
        services.run_stop(run=run)


def test_a_stopped_runs_summary_never_says_its_figures_are_complete(make_dataset, alice, no_llm):
    run = services.run_start(agent=(dataset := make_dataset(4)).agent, dataset=dataset, user=alice)
    execute_one(run)
    run = drive(services.run_stop(run=run))
    assert "complete" not in run.summary_note
    assert run.summary_note == (
        "No summary: no model is configured. The run was stopped: 3 of its 4 results were not run, "
        "so the figures above cover only the 1 that finished."
    )


def test_a_stopped_runs_llm_summary_is_told_the_run_was_cut_short(make_dataset, alice, fake_llm):
    fake_llm.add_rule(task="summary", reply="Stopped early; one case passed.")
    run = services.run_start(agent=(dataset := make_dataset(3)).agent, dataset=dataset, user=alice)
    execute_one(run)
    drive(services.run_stop(run=run))
    prompt = [r for r in fake_llm.requests if r.task == "summary"][0].text
    assert "The run was stopped before it finished: 2 of its 3 results were not run" in prompt


@pytest.mark.django_db(transaction=True)
def test_a_lane_in_flight_at_stop_finishes_its_case_and_starts_no_other(make_dataset, alice, fake_llm):
    from agents.models import Agent

    fake_llm.add_rule(task="agent", reply="Refunds are available within 30 days.", delay=1.0)
    run = services.run_start(agent=(dataset := make_dataset(6, kind=Agent.Kind.LLM)).agent, dataset=dataset, user=alice)
    first = Result.objects.filter(run=run, status=Result.Status.QUEUED).order_by("id").first()
    lane = threading.Thread(target=services.run_execute_case, kwargs={"result_id": first.pk, "token": first.token})
    lane.start()
    wait_for(lambda: fake_llm.count("agent", run=run.pk) == 1, timeout=30, what="the lane's first agent call")

    services.run_stop(run=run)
    lane.join(timeout=60)

    statuses = list(Result.objects.filter(run=run).order_by("id").values_list("status", flat=True))
    assert statuses == ["pass"] + ["skipped"] * 5
    assert fake_llm.count("agent", run=run.pk) == 1  # the lane did not go on after the stop

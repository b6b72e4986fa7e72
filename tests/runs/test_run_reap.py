from datetime import timedelta

import pytest
from django.utils import timezone

from runs import services
from runs.models import Result, Run
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db


def _start(make_dataset, alice, cases=5):
    dataset = make_dataset(cases)
    return services.run_start(agent=dataset.agent, dataset=dataset, user=alice)


def test_it_requeues_a_stale_claim_with_a_new_token(
    make_dataset, alice, no_llm, settings, django_capture_on_commit_callbacks
):
    run = _start(make_dataset, alice)
    dead = Result.objects.filter(run=run, status=Result.Status.QUEUED).order_by("id").first()
    old = timezone.now() - timedelta(seconds=settings.EVALSITE_STALE_CLAIM_SECONDS + 1)
    Result.objects.filter(pk=dead.pk).update(status=Result.Status.RUNNING, claimed_at=old, attempts=1)

    with django_capture_on_commit_callbacks() as callbacks:
        assert services.run_reap() == 1
    assert len(callbacks) == 1

    dead_after = Result.objects.get(pk=dead.pk)
    assert dead_after.status == Result.Status.QUEUED
    assert dead_after.token != dead.token
    services.run_execute_case(result_id=dead.pk, token=dead.token)  # the dead worker's message
    assert Result.objects.get(pk=dead.pk).status == Result.Status.QUEUED
    assert drive(run).completed == 5


def test_a_live_claim_is_left_alone(make_dataset, alice, no_llm):
    run = _start(make_dataset, alice)
    live = Result.objects.filter(run=run, status=Result.Status.QUEUED).first()
    Result.objects.filter(pk=live.pk).update(status=Result.Status.RUNNING, claimed_at=timezone.now())
    assert services.run_reap() == 0
    assert Result.objects.get(pk=live.pk).token == live.token


def test_it_resends_queued_cases_whose_message_was_lost(make_dataset, alice, no_llm, settings):
    run = _start(make_dataset, alice)
    lost = timezone.now() - timedelta(seconds=settings.EVALSITE_STALE_QUEUE_SECONDS + 1)
    Result.objects.filter(run=run, status=Result.Status.QUEUED).update(queued_at=lost)  # Redis was flushed

    assert services.run_reap() == 3
    assert Result.objects.filter(run=run, status=Result.Status.QUEUED, queued_at__gt=lost).count() == 3


def test_it_fills_empty_window_slots(make_dataset, alice, no_llm):
    run = _start(make_dataset, alice)
    Result.objects.filter(run=run, status=Result.Status.QUEUED).update(status=Result.Status.PENDING, token="")

    assert services.run_reap() == 3
    assert Result.objects.filter(run=run, status=Result.Status.QUEUED).count() == 3


def test_it_never_overfills_the_window(make_dataset, alice, no_llm):
    run = _start(make_dataset, alice)
    services.run_reap()
    services.run_reap()
    assert Result.objects.filter(run=run, status__in=Result.IN_FLIGHT_STATUSES).count() == 3


def test_it_finishes_a_run_whose_finishing_step_was_lost(
    make_dataset, alice, no_llm, django_capture_on_commit_callbacks
):
    run = drive(_start(make_dataset, alice, cases=1))
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)

    with django_capture_on_commit_callbacks() as callbacks:
        services.run_reap()
    assert len(callbacks) == 1  # run_finish is sent again

    services.run_finish(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED


def test_it_lets_go_of_claims_orphaned_by_a_stopped_run(make_dataset, alice, no_llm, settings):
    run = _start(make_dataset, alice)
    stuck = Result.objects.filter(run=run, status=Result.Status.QUEUED).first()
    old = timezone.now() - timedelta(seconds=settings.EVALSITE_STALE_CLAIM_SECONDS + 1)
    Result.objects.filter(pk=stuck.pk).update(status=Result.Status.RUNNING, claimed_at=old)
    services.run_stop(run=run)

    services.run_reap()

    stuck.refresh_from_db()
    assert stuck.status == Result.Status.SKIPPED
    assert "worker was lost" in stuck.error


def test_a_summary_being_written_is_never_asked_for_twice(
    make_dataset, alice, no_llm, settings, django_capture_on_commit_callbacks
):
    run = drive(_start(make_dataset, alice, cases=1))
    # The summary was claimed, and its call may still be running: a slow model within its bounds.
    within = timezone.now() - timedelta(seconds=settings.EVALSITE_STALE_CLAIM_SECONDS + 5)
    Run.objects.filter(pk=run.pk).update(summary="", summary_note=Run.SUMMARY_PENDING_NOTE, finished_at=within)

    with django_capture_on_commit_callbacks() as callbacks:
        services.run_reap()

    assert callbacks == []  # no second finish, so no second summary and no second suggestion job
    assert Run.objects.get(pk=run.pk).summary_note == Run.SUMMARY_PENDING_NOTE


def test_a_summary_lost_past_its_call_bounds_is_noted_not_asked_again(
    make_dataset, alice, no_llm, settings, django_capture_on_commit_callbacks
):
    from evalsite import llm

    run = drive(_start(make_dataset, alice, cases=1))
    bound = llm.call_bound("agent") + llm.call_bound("judge") + llm.call_bound("summary")
    past = timezone.now() - timedelta(seconds=bound + settings.EVALSITE_STALE_CLAIM_SECONDS + 5)
    Run.objects.filter(pk=run.pk).update(summary="", summary_note=Run.SUMMARY_PENDING_NOTE, finished_at=past)

    with django_capture_on_commit_callbacks() as callbacks:
        services.run_reap()

    assert callbacks == []
    run.refresh_from_db()
    assert run.summary_note == "No summary: the worker writing it stopped. The figures above are complete."
    assert not run.summary_pending


def test_the_summary_window_follows_an_llm_agents_own_longer_timeout(
    make_dataset, alice, no_llm, settings, django_capture_on_commit_callbacks
):
    from evalsite import llm

    run = drive(_start(make_dataset, alice, cases=1))
    # The run's agent may take 600 s per answer: its last cases can finish long after the default bound.
    run.agent_version.__class__.objects.filter(pk=run.agent_version_id).update(llm_timeout=600)
    default = llm.call_bound("agent") + llm.call_bound("judge") + llm.call_bound("summary")
    past_default = timezone.now() - timedelta(seconds=default + settings.EVALSITE_STALE_CLAIM_SECONDS + 5)
    Run.objects.filter(pk=run.pk).update(summary="", summary_note=Run.SUMMARY_PENDING_NOTE, finished_at=past_default)

    with django_capture_on_commit_callbacks() as callbacks:
        services.run_reap()

    assert callbacks == []
    assert Run.objects.get(pk=run.pk).summary_note == Run.SUMMARY_PENDING_NOTE

    longer = llm.call_bound("agent", timeout=600) + llm.call_bound("judge") + llm.call_bound("summary")
    past_longer = timezone.now() - timedelta(seconds=longer + settings.EVALSITE_STALE_CLAIM_SECONDS + 5)
    Run.objects.filter(pk=run.pk).update(finished_at=past_longer)
    services.run_reap()
    assert Run.objects.get(pk=run.pk).summary_note.startswith("No summary: the worker writing it stopped.")

"""The run page says when a run with cases in flight has made no progress for 30 s, and why (issue 35)."""

import socket
from datetime import timedelta

import pytest
from django.utils import timezone

from evalsite.models import WorkerHeartbeat
from runs import services
from runs.engine.stall import run_stall
from runs.models import Result, Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def stuck_run(make_dataset, alice, no_llm):
    """A run started a minute ago whose queued cases never finished."""
    dataset = make_dataset(4)
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    a_minute_ago = timezone.now() - timedelta(seconds=60)
    Run.objects.filter(pk=run.pk).update(created_at=a_minute_ago)
    run.refresh_from_db()
    return run


def _worker_alive() -> None:
    now = timezone.now()
    WorkerHeartbeat.objects.create(name="alive:1", started_at=now, last_seen=now)


def test_no_worker_is_named(stuck_run, client_alice):
    stall = run_stall(run=stuck_run)
    assert stall is not None and stall.seconds >= 60
    assert "no worker is running" in stall.cause

    page = client_alice.get(f"/agents/{stuck_run.agent_id}/runs/{stuck_run.pk}/").content.decode()
    assert "No case has finished for 6" in page and "no worker is running" in page
    assert run_stall(run=stuck_run, now=timezone.now() + timedelta(minutes=5)).duration == "6 min"


def test_redis_out_of_reach_is_named(stuck_run, settings):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.REDIS_CLIENT_URL = f"redis://127.0.0.1:{port}/0"
    _worker_alive()
    assert "Redis, the queue that hands cases to workers, cannot be reached" in run_stall(run=stuck_run).cause


def test_a_model_that_does_not_answer_is_named(stuck_run):
    _worker_alive()
    Result.objects.filter(pk=Result.objects.filter(run=stuck_run).order_by("id").first().pk).update(
        status=Result.Status.RUNNING, claimed_at=timezone.now(), claimed_by="alive:1", attempts=1
    )
    cause = run_stall(run=stuck_run).cause
    assert "the model or agent is not answering (1 case is waiting for an answer)" in cause


def test_a_run_that_moves_says_nothing(stuck_run, client_alice):
    first = Result.objects.filter(run=stuck_run).order_by("id").first()
    Result.objects.filter(pk=first.pk).update(
        status=Result.Status.PASS, finished_at=timezone.now() - timedelta(seconds=5)
    )
    assert run_stall(run=stuck_run) is None
    assert run_stall(run=stuck_run, now=timezone.now() + timedelta(seconds=40)) is not None
    page = client_alice.get(f"/agents/{stuck_run.agent_id}/runs/{stuck_run.pk}/").content.decode()
    assert "No case has finished" not in page


def test_a_run_with_nothing_in_flight_or_over_says_nothing(stuck_run):
    Result.objects.filter(run=stuck_run).update(status=Result.Status.PENDING)
    assert run_stall(run=stuck_run) is None
    Run.objects.filter(pk=stuck_run.pk).update(status=Run.Status.STOPPED)
    stuck_run.refresh_from_db()
    assert run_stall(run=stuck_run) is None

"""A worker host cut off from the network comes back (issue 37): the reaper handed its claims on
meanwhile, so before a case's next model call its lane asks the database whether it still holds
the claim, and gives the case up if not. With its heartbeat fresh it asks nothing."""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agents.models import Agent
from evalsite import workers
from runs import services
from runs.engine import execution
from runs.models import Result, Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def in_a_worker(monkeypatch, settings):
    """This process as a worker's pool child: an identity, and its lease restored afterwards."""
    monkeypatch.setattr(workers, "WORKER_ID", "evs-w2:1:lease")
    saved = bytes(workers._lease)
    _last_beat(0)  # as worker_start leaves it
    workers._FORFEIT.pack_into(workers._lease, workers._LEASE.size, 0.0)
    yield settings.EVALSITE_WORKER_HEARTBEAT_TTL
    workers._lease[:] = saved


def _last_beat(seconds_ago: float) -> None:
    """The worker's last heartbeat that reached the database was taken this long ago."""
    workers._LEASE.pack_into(workers._lease, 0, time.time() - seconds_ago, 0.0)


def _cut_off_meanwhile(result, ttl, reply):
    """A fake model handler: as it answers, the worker's heartbeat has been away longer than the
    TTL, the reaper has handed the case to another lane, and the heartbeat comes back, late."""

    def handler(request):
        _last_beat(ttl + 15)
        try:
            Result.objects.filter(pk=result.pk).update(token="another-workers-lane")
            workers.beat_once()
        finally:
            connections.close_all()
        return {"reply": reply}

    return handler


def test_outside_a_worker_no_claim_is_in_doubt(monkeypatch):
    monkeypatch.setattr(workers, "WORKER_ID", "")
    assert workers.lease_doubtful(None) is False


def test_a_fresh_heartbeat_leaves_claims_alone(in_a_worker):
    workers.beat_once()
    assert workers.lease_doubtful(timezone.now()) is False
    assert workers.lease_doubtful(timezone.now() - timedelta(minutes=5)) is False


def test_a_heartbeat_older_than_the_lease_puts_every_claim_in_doubt(in_a_worker):
    _last_beat(in_a_worker)  # the TTL: the reaper may take the worker for dead now
    assert workers.lease_doubtful(timezone.now()) is True


def test_a_heartbeat_back_after_a_gap_puts_the_claims_made_before_it_in_doubt(in_a_worker):
    before = timezone.now()
    _last_beat(in_a_worker + 15)  # cut off, then back: the beat lands late
    workers.beat_once()
    assert workers.lease_doubtful(before) is True  # the reaper may have handed it on meanwhile
    assert workers.lease_doubtful(timezone.now()) is False  # claimed since: the reaper saw it alive
    workers.beat_once()
    assert workers.lease_doubtful(before) is True  # a later beat does not clear the doubt


def test_a_held_claim_in_doubt_is_confirmed_and_refreshed(make_dataset, alice, no_llm, in_a_worker):
    dataset = make_dataset(1)
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    Result.objects.filter(run=run).update(status=Result.Status.RUNNING, claimed_at=timezone.now())
    result = Result.objects.get(run=run)
    _last_beat(in_a_worker)

    assert execution._claim_held(result, result.token) is True
    assert execution._claim_held(result, "another-lane") is False


def test_with_a_fresh_lease_the_claim_is_not_asked_about(make_dataset, alice, no_llm, in_a_worker):
    workers.beat_once()
    dataset = make_dataset(1)
    result = Result.objects.get(run=services.run_start(agent=dataset.agent, dataset=dataset, user=alice))
    result.claimed_at = timezone.now()
    with CaptureQueriesContext(connection) as queries:
        assert execution._claim_held(result, result.token) is True
    assert len(queries) == 0


@pytest.mark.django_db(transaction=True)  # the reaper's change comes from the fake model's thread
def test_a_case_taken_back_while_its_worker_was_cut_off_is_not_judged_there(make_dataset, alice, fake_llm, in_a_worker):
    workers.beat_once()
    dataset = make_dataset(1, kind=Agent.Kind.LLM)
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    result = Result.objects.get(run=run)

    # While the agent's answer is on its way, the host is cut off long enough for the reaper to
    # hand the case to another worker's lane; then its heartbeat comes back, late.
    reply = "Refunds are available within 30 days of purchase."
    fake_llm.add_rule(task="agent", handler=_cut_off_meanwhile(result, in_a_worker, reply))

    services.run_execute_case(result_id=result.pk, token=result.token)

    assert [r.task for r in fake_llm.requests if r.trace.get("case") == str(result.pk)] == ["agent"]
    result.refresh_from_db()
    assert (result.status, result.token) == (Result.Status.RUNNING, "another-workers-lane")  # the other lane's now


@pytest.mark.django_db(transaction=True)  # two connections: the reaper's and the lane's
def test_a_claim_in_doubt_waits_for_a_reaper_pass_under_way_and_sees_what_it_did(
    make_dataset, alice, no_llm, in_a_worker
):
    dataset = make_dataset(1)
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    Result.objects.filter(run=run).update(status=Result.Status.RUNNING, claimed_at=timezone.now())
    result = Result.objects.get(run=run)
    _last_beat(in_a_worker)
    locked, release = threading.Event(), threading.Event()

    def reaper_pass():
        # A pass has listed the claim as lost and holds the run's row while it hands it on.
        try:
            with transaction.atomic():
                Run.objects.select_for_update().get(pk=run.pk)
                locked.set()
                release.wait(10)
                Result.objects.filter(pk=result.pk).update(token="handed-on")
        finally:
            connections.close_all()

    reaper = threading.Thread(target=reaper_pass)
    reaper.start()
    assert locked.wait(10)
    threading.Timer(0.5, release.set).start()
    try:
        assert execution._claim_held(result, result.token) is False  # not the stale read of before the hand-on
    finally:
        release.set()
        reaper.join(10)


def test_claims_made_before_the_broker_connection_was_lost_are_given_up_without_asking(
    make_dataset, alice, no_llm, in_a_worker
):
    workers.beat_once()
    dataset = make_dataset(1)
    result = Result.objects.get(run=services.run_start(agent=dataset.agent, dataset=dataset, user=alice))
    result.claimed_at = timezone.now()
    workers.broker_lost_mark()  # Celery is about to end the task running this case
    with CaptureQueriesContext(connection) as queries:
        assert execution._claim_held(result, result.token) is False
    assert len(queries) == 0
    assert workers.claim_forfeit(timezone.now() + timedelta(seconds=5)) is False  # claimed after the reconnect


@pytest.mark.django_db(transaction=True)  # the reaper's change comes from the fake model's thread
def test_a_call_waiting_to_go_out_is_not_sent_once_the_claim_was_handed_on(make_dataset, alice, fake_llm, in_a_worker):
    # A multi-turn case: the host is cut off while the agent answers the first turn, and the
    # reaper hands the case on. The second turn's call is checked just before it goes out
    # (after any wait for the model's slot), not only before the case and before its judge.
    workers.beat_once()
    dataset = make_dataset(1, kind=Agent.Kind.LLM, turns=[{"user": "I bought the Team plan.", "expected": ""}])
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    result = Result.objects.get(run=run)

    fake_llm.add_rule(task="agent", handler=_cut_off_meanwhile(result, in_a_worker, "Noted."), times=1)

    services.run_execute_case(result_id=result.pk, token=result.token)

    assert [r.task for r in fake_llm.requests if r.trace.get("case") == str(result.pk)] == ["agent"]
    result.refresh_from_db()
    assert (result.status, result.token) == (Result.Status.RUNNING, "another-workers-lane")


def test_a_refused_call_never_reaches_the_model(fake_llm):
    from evalsite import llm
    from evalsite.llm import client as llm_client

    with llm_client.guard_calls(lambda: False), pytest.raises(llm_client.CallRefused):
        llm.complete([{"role": "user", "content": "Hello"}], task="agent")
    assert fake_llm.requests == []
    llm.complete([{"role": "user", "content": "Hello"}], task="agent")  # the guard is gone
    assert len(fake_llm.requests) == 1

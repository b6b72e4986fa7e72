"""The reaper and worker heartbeats: a claim whose worker stopped beating is re-queued at once."""

import base64
import json
import time
from datetime import timedelta

import pytest
import redis
from django.utils import timezone

from evalsite import workers
from evalsite.models import WorkerHeartbeat
from runs import services
from runs.engine import claims, reaper
from runs.models import Result
from tests.broker import queue_keys

pytestmark = pytest.mark.django_db


def _claimed(make_dataset, alice, *, by: str, seconds_ago: float = 0) -> Result:
    """A case claimed `seconds_ago` (or its claim last refreshed then): far from the stale-claim
    timeout either way. A dead worker's claims are at least as old as its last heartbeat."""
    dataset = make_dataset(5)
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    result = Result.objects.filter(run=run, status=Result.Status.QUEUED).order_by("id").first()
    claimed_at = timezone.now() - timedelta(seconds=seconds_ago)
    Result.objects.filter(pk=result.pk).update(
        status=Result.Status.RUNNING, claimed_at=claimed_at, claimed_by=by, attempts=1
    )
    return result


def _queued_a_while_ago(make_dataset, alice, settings):
    """A run whose 3 queued cases were queued before a worker's last heartbeat (made after)."""
    dataset = make_dataset(5)
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    a_while_ago = timezone.now() - timedelta(seconds=settings.EVALSITE_WORKER_HEARTBEAT_TTL + 10)
    Result.objects.filter(run=run, status=Result.Status.QUEUED).update(queued_at=a_while_ago)
    return run


def _beat(name: str, seconds_ago: float) -> None:
    seen = timezone.now() - timedelta(seconds=seconds_ago)
    WorkerHeartbeat.objects.create(name=name, started_at=seen, last_seen=seen)


def test_a_claim_of_a_worker_that_stopped_beating_is_requeued_at_once(make_dataset, alice, no_llm, settings):
    _beat("killed:1", settings.EVALSITE_WORKER_HEARTBEAT_TTL + 1)
    result = _claimed(make_dataset, alice, by="killed:1", seconds_ago=settings.EVALSITE_WORKER_HEARTBEAT_TTL + 2)

    assert services.run_reap() == 1
    after = Result.objects.get(pk=result.pk)
    assert after.status == Result.Status.QUEUED and after.token != result.token


def test_a_claim_of_a_worker_with_no_heartbeat_row_is_requeued(make_dataset, alice, no_llm, settings):
    # Its row was pruned, or it died before it beat; it has claimed nothing for longer than the TTL.
    result = _claimed(make_dataset, alice, by="never-seen:1", seconds_ago=settings.EVALSITE_WORKER_HEARTBEAT_TTL + 1)
    assert services.run_reap() == 1
    assert Result.objects.get(pk=result.pk).status == Result.Status.QUEUED


def test_a_claim_of_a_live_worker_is_left_alone(make_dataset, alice, no_llm):
    _beat("alive:1", 1)
    result = _claimed(make_dataset, alice, by="alive:1")
    assert services.run_reap() == 0
    assert Result.objects.get(pk=result.pk).token == result.token


def test_a_worker_claiming_within_the_ttl_is_alive_whatever_its_heartbeat_row_says(
    make_dataset, alice, no_llm, settings
):
    # A worker host cut off from the network and back: the heartbeat it wrote during the cut
    # landed late with the time it was written, and a reaper elsewhere may already have pruned
    # its row; it claims anew meanwhile. Those claims (and its older ones) are not taken back.
    ttl = settings.EVALSITE_WORKER_HEARTBEAT_TTL
    _beat("back:1", ttl + 10)
    older = _claimed(make_dataset, alice, by="back:1", seconds_ago=ttl + 5)
    fresh = _claimed(make_dataset, alice, by="back:1")
    pruned = _claimed(make_dataset, alice, by="pruned:1")  # no heartbeat row at all

    assert services.run_reap() == 0
    for result in (older, fresh, pruned):
        after = Result.objects.get(pk=result.pk)
        assert (after.status, after.token, after.repeats) == (Result.Status.RUNNING, result.token, [])
    assert WorkerHeartbeat.objects.filter(name="back:1").exists()  # not taken for dead and pruned


def test_a_worker_its_supervisor_saw_die_is_gone_at_once(make_dataset, alice, no_llm):
    # runstack killed what the dead worker left and said so: its heartbeat and its claim are
    # seconds old, and neither is proof of life now.
    _beat("host:7:ab", 1)
    result = _claimed(make_dataset, alice, by="host:7:ab", seconds_ago=5)
    assert workers.workers_end(host="host", pid=7) == 1

    # Its claim, and the run's 2 queued cases sent again (it may have held their messages).
    assert services.run_reap() == 3
    after = Result.objects.get(pk=result.pk)
    assert after.status == Result.Status.QUEUED and after.token != result.token
    assert after.repeats == [{"cause": "worker_lost", "attempt": 2}]
    assert not WorkerHeartbeat.objects.filter(name="host:7:ab").exists()
    assert workers.last_heartbeat_age() is None  # and /healthz no longer counts it


def test_a_claim_made_after_the_pass_read_who_is_alive_is_left_alone(make_dataset, alice, no_llm, settings):
    # A pass reads who is alive, then goes through the runs one by one; a host back from a cut
    # (its heartbeat stale, no recent claim when the pass read) claims a case meanwhile.
    _beat("back:2", settings.EVALSITE_WORKER_HEARTBEAT_TTL + 10)
    read_at = timezone.now()
    live, _ = reaper._liveness(read_at)
    assert "back:2" not in live
    result = _claimed(make_dataset, alice, by="back:2")
    cutoff = read_at - timedelta(seconds=settings.EVALSITE_STALE_CLAIM_SECONDS)

    reaper._run_reconcile(result.run_id, cutoff, cutoff, cutoff, live, read_at=read_at)

    after = Result.objects.get(pk=result.pk)
    assert (after.status, after.token, after.repeats) == (Result.Status.RUNNING, result.token, [])


def test_a_claim_made_outside_a_worker_waits_for_its_timeout(make_dataset, alice, no_llm):
    result = _claimed(make_dataset, alice, by="")
    assert services.run_reap() == 0
    assert Result.objects.get(pk=result.pk).status == Result.Status.RUNNING


def test_a_reaper_whose_own_heartbeat_is_stale_judges_no_other_worker(
    make_dataset, alice, no_llm, settings, monkeypatch
):
    # The database was out of reach: every heartbeat, the reaper's own included, is old.
    stale = settings.EVALSITE_WORKER_HEARTBEAT_TTL + 5
    _beat("reaper:1", stale)
    _beat("other:1", stale)
    monkeypatch.setattr(workers, "WORKER_ID", "reaper:1")
    result = _claimed(make_dataset, alice, by="other:1")

    assert services.run_reap() == 0
    assert Result.objects.get(pk=result.pk).status == Result.Status.RUNNING


def test_claims_are_stamped_with_the_worker_identity(make_dataset, alice, no_llm, monkeypatch):
    monkeypatch.setattr(workers, "WORKER_ID", "host:42:abcd")
    dataset = make_dataset(1)
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    result = Result.objects.get(run=run)
    claimed, _ = claims.result_claim(result.pk, result.token)
    assert claimed.claimed_by == "host:42:abcd"


def test_cases_queued_before_a_worker_died_are_sent_again_once(
    make_dataset, alice, no_llm, settings, django_capture_on_commit_callbacks
):
    # The dead worker had taken these messages from Redis but not started them.
    _queued_a_while_ago(make_dataset, alice, settings)
    _beat("killed:2", settings.EVALSITE_WORKER_HEARTBEAT_TTL + 5)  # beat after they were queued, then died

    with django_capture_on_commit_callbacks(execute=False):
        assert services.run_reap() == 3
    assert not WorkerHeartbeat.objects.filter(name="killed:2").exists()  # dealt with once
    assert services.run_reap() == 0  # and not again: they were queued just now


def test_cases_queued_after_the_death_are_not_sent_again(make_dataset, alice, no_llm, settings):
    _beat("killed:3", settings.EVALSITE_WORKER_HEARTBEAT_TTL + 20)
    dataset = make_dataset(5)
    services.run_start(agent=dataset.agent, dataset=dataset, user=alice)  # queued now, long after the death
    assert services.run_reap() == 0


def test_a_lost_claim_goes_to_the_front_of_the_queue_and_the_copies_sent_after_a_death_do_not(
    make_dataset, alice, no_llm, settings, django_capture_on_commit_callbacks
):
    # Its run is a slot short until a worker runs the lost case; the cases queued before the
    # death mostly still wait their turn in Redis, and their copies must not jump it.
    run = _queued_a_while_ago(make_dataset, alice, settings)
    lost = Result.objects.filter(run=run, status=Result.Status.QUEUED).order_by("id").first()
    _beat("killed:4", settings.EVALSITE_WORKER_HEARTBEAT_TTL + 5)
    seen = WorkerHeartbeat.objects.get(name="killed:4").last_seen  # claimed before its last beat
    Result.objects.filter(pk=lost.pk).update(
        status=Result.Status.RUNNING, claimed_at=seen, claimed_by="killed:4", attempts=1
    )
    client = redis.Redis.from_url(settings.REDIS_CLIENT_URL)
    client.delete(*queue_keys())

    with django_capture_on_commit_callbacks(execute=True):
        assert services.run_reap() == 3

    urgent, *later = queue_keys()
    assert [_case_of(raw) for raw in client.lrange(urgent, 0, -1)] == [lost.pk]
    assert sorted(_case_of(raw) for key in later for raw in client.lrange(key, 0, -1)) == sorted(
        Result.objects.filter(run=run, status=Result.Status.QUEUED).exclude(pk=lost.pk).values_list("pk", flat=True)
    )
    client.delete(*queue_keys())
    client.close()


def _case_of(raw: bytes) -> int:
    """The result id a run_execute_case message carries (kombu's JSON envelope, base64 body)."""
    return json.loads(base64.b64decode(json.loads(raw)["body"]))[0][0]


def test_a_dead_lane_holding_a_case_claimed_ahead_gets_one_slot_back_not_two(make_dataset, alice, no_llm, settings):
    # A lane claims its next case while the case in hand calls its model: killed then, it
    # leaves two claims under one token. One goes out again; the other waits its turn, or
    # the run would have one lane too many for good.
    stale = settings.EVALSITE_WORKER_HEARTBEAT_TTL + 1
    _beat("killed:1", stale)
    result = _claimed(make_dataset, alice, by="killed:1", seconds_ago=stale)
    ahead = Result.objects.filter(run=result.run, status=Result.Status.PENDING).order_by("id").first()
    Result.objects.filter(pk=ahead.pk).update(
        status=Result.Status.RUNNING,
        token=result.token,
        claimed_at=timezone.now() - timedelta(seconds=stale),
        claimed_by="killed:1",
        attempts=1,
    )

    assert services.run_reap() == 2
    in_hand, held = Result.objects.get(pk=result.pk), Result.objects.get(pk=ahead.pk)
    assert in_hand.status == Result.Status.QUEUED and in_hand.token != result.token
    assert (held.status, held.token, held.claimed_by) == (Result.Status.PENDING, "", "")
    in_flight = Result.objects.filter(run=result.run, status__in=Result.IN_FLIGHT_STATUSES)
    assert in_flight.count() == 3 and len(set(in_flight.values_list("token", flat=True))) == 3


def test_a_reaper_whose_heartbeat_missed_a_beat_lately_judges_no_worker_by_heartbeat(
    make_dataset, alice, no_llm, settings, monkeypatch
):
    # The database was slow or out of reach a moment ago: the reaper's own heartbeat is fresh
    # again, the others' may not be yet (issue 48: a TTL of 5 s is a short outage).
    monkeypatch.setattr(workers, "WORKER_ID", "reaper:2")
    _beat("reaper:2", 0)
    _beat("slow:1", settings.EVALSITE_WORKER_HEARTBEAT_TTL + 1)
    result = _claimed(make_dataset, alice, by="slow:1", seconds_ago=settings.EVALSITE_WORKER_HEARTBEAT_TTL + 2)
    saved = bytes(workers._lease)
    try:
        workers._ROUGH.pack_into(workers._lease, workers._ROUGH_AT, time.time() - 1)
        assert services.run_reap() == 0
        assert Result.objects.get(pk=result.pk).token == result.token
        assert WorkerHeartbeat.objects.filter(name="slow:1").exists()

        # A worker its supervisor saw die needs no heartbeat to judge: its claims go back even so.
        _beat("host:8:cd", 1)
        ended = _claimed(make_dataset, alice, by="host:8:cd", seconds_ago=2)
        workers.workers_end(host="host", pid=8)
        assert services.run_reap() >= 1
        assert Result.objects.get(pk=ended.pk).repeats == [{"cause": "worker_lost", "attempt": 2}]
        assert Result.objects.get(pk=result.pk).token == result.token

        workers._ROUGH.pack_into(workers._lease, workers._ROUGH_AT, 0.0)  # a TTL of steady beats later
        assert services.run_reap() >= 1
        assert Result.objects.get(pk=result.pk).status == Result.Status.QUEUED
    finally:
        workers._lease[:] = saved

"""The online scores' reaper (issue 47, point 6): a score whose message was lost (a Redis restart
emptied the queue) or whose worker died is sent again, once per lease period; a score a live
worker holds is left alone.

And the workers' signals, as runs' reaper reads them (evalsite/workers.py): a score claimed by a
worker that is dead (its heartbeat stale or gone) or ended (its supervisor saw it die) is sent
again on the next pass, its claim fresh or not; after a broker loss, the scores whose message was
in Redis then are sent again at once. Neither reaper forgets a loss before the other saw it.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from evalsite import workers
from evalsite.models import WorkerHeartbeat
from monitoring.models import OnlineScore
from monitoring.online import reaper
from monitoring.online.scoring import Lease, online_score_run
from runs import services as runs_services
from tests.broker import waiting
from tests.monitoring.online_helpers import evaluator_for, pending, preflighted

pytestmark = pytest.mark.django_db


def _aged(score: OnlineScore, *, seconds: int, claimed: bool) -> None:
    at = timezone.now() - timedelta(seconds=seconds)
    OnlineScore.objects.filter(pk=score.pk).update(created_at=at, claimed_at=at if claimed else None)


def test_a_score_whose_message_was_lost_is_sent_again_once(
    agent, settings, broker_queue, django_capture_on_commit_callbacks
):
    (score,) = pending(evaluator_for(agent))
    _aged(score, seconds=settings.EVALSITE_STALE_QUEUE_SECONDS + 1, claimed=False)

    with django_capture_on_commit_callbacks(execute=True):
        assert reaper.stale_scores_resend() == 1
        assert reaper.stale_scores_resend() == 0  # not flooded with copies while that one waits

    assert waiting(broker_queue) == 1


def test_a_fresh_score_and_a_live_lease_are_left_alone(
    agent, settings, broker_queue, django_capture_on_commit_callbacks
):
    fresh, held = pending(evaluator_for(agent), 2)
    _aged(held, seconds=settings.EVALSITE_STALE_CLAIM_SECONDS - 30, claimed=True)

    with django_capture_on_commit_callbacks(execute=True):
        assert reaper.stale_scores_resend() == 0

    assert waiting(broker_queue) == 0


def test_a_dead_workers_lease_is_taken_over_and_its_late_outcome_dropped(agent, fake_llm, settings):
    evaluator = evaluator_for(agent)
    preflighted(fake_llm, evaluator)
    (score,) = pending(evaluator)
    _aged(score, seconds=settings.EVALSITE_STALE_CLAIM_SECONDS + 1, claimed=True)
    dead = OnlineScore.objects.get(pk=score.pk).claimed_at

    assert reaper.stale_scores_resend() == 1
    done = online_score_run(score_id=score.pk)  # the message the reaper sent, on a live worker

    assert done.status == "scored" and done.claimed_at > dead
    # The dead worker's lease can no longer write: its conditional update matches no row.
    assert not OnlineScore.objects.filter(pk=score.pk, status="pending", claimed_at=dead).exists()


# ---- the workers' signals (issue 47/48) ------------------------------------------------------------


def _beat(name: str, *, seconds_ago: float = 0, ended: bool = False, broker_lost_at=None) -> None:
    seen = timezone.now() - timedelta(seconds=seconds_ago)
    WorkerHeartbeat.objects.create(
        name=name,
        started_at=seen,
        last_seen=seen,
        ended_at=timezone.now() if ended else None,
        broker_lost_at=broker_lost_at,
    )


def _claimed(score: OnlineScore, *, by: str, seconds_ago: float) -> OnlineScore:
    """Claimed `seconds_ago` (or its lease last refreshed then): far from the 120 s stale-claim
    timeout. A dead worker's claims are at least as old as its last heartbeat."""
    OnlineScore.objects.filter(pk=score.pk).update(
        claimed_at=timezone.now() - timedelta(seconds=seconds_ago), claimed_by=by
    )
    return OnlineScore.objects.get(pk=score.pk)


@pytest.mark.parametrize("heartbeat", ["ended", "stale", "gone"])
def test_a_score_claimed_by_a_dead_worker_is_sent_again_on_the_next_pass(
    agent, settings, broker_queue, django_capture_on_commit_callbacks, heartbeat
):
    ttl = settings.EVALSITE_WORKER_HEARTBEAT_TTL
    (score,) = pending(evaluator_for(agent))
    if heartbeat == "ended":  # its supervisor saw it die (runstack, workers_end): no TTL to wait
        _beat("host:1:dead", seconds_ago=1, ended=True)
        _claimed(score, by="host:1:dead", seconds_ago=0.5)
    elif heartbeat == "stale":
        _beat("host:1:dead", seconds_ago=ttl + 1)
        _claimed(score, by="host:1:dead", seconds_ago=ttl + 2)
    else:  # its row was pruned (the runs' reaper forgot it), or it died before it beat
        _claimed(score, by="host:1:dead", seconds_ago=ttl + 2)
    assert settings.EVALSITE_STALE_CLAIM_SECONDS > ttl + 60  # the claim is fresh by its own timeout

    with django_capture_on_commit_callbacks(execute=True):
        assert reaper.stale_scores_resend() == 1
        assert reaper.stale_scores_resend() == 0  # once: not flooded with copies while it waits

    assert waiting(broker_queue) == 1
    released = OnlineScore.objects.get(pk=score.pk)
    # Its claim is taken back: the next message takes it at once, the dead lease can write nothing.
    assert (released.status, released.claimed_at, released.claimed_by) == ("pending", None, "")


def test_a_score_claimed_by_a_live_worker_is_left_alone(
    agent, settings, broker_queue, django_capture_on_commit_callbacks
):
    ttl = settings.EVALSITE_WORKER_HEARTBEAT_TTL
    _beat("host:2:alive", seconds_ago=0.5)
    (score,) = pending(evaluator_for(agent))
    # Its lease is refreshed every 30 s, not every heartbeat: older than the TTL, still live.
    held = _claimed(score, by="host:2:alive", seconds_ago=ttl + 20)

    with django_capture_on_commit_callbacks(execute=True):
        assert reaper.stale_scores_resend() == 0

    assert waiting(broker_queue) == 0
    after = OnlineScore.objects.get(pk=score.pk)
    assert (after.claimed_at, after.claimed_by) == (held.claimed_at, "host:2:alive")


def test_a_score_sent_before_a_worker_died_is_sent_again_at_once(
    agent, settings, broker_queue, django_capture_on_commit_callbacks
):
    # The dead worker may have held its message unstarted: late acks keep it out of every queue
    # until Redis's visibility timeout. One sent after it died waits in Redis for a live worker.
    before, after = pending(evaluator_for(agent), 2)
    now = timezone.now()
    _beat("host:7:dead", seconds_ago=6, ended=True)
    WorkerHeartbeat.objects.filter(name="host:7:dead").update(ended_at=now - timedelta(seconds=5))
    OnlineScore.objects.filter(pk=before.pk).update(created_at=now - timedelta(seconds=8))
    OnlineScore.objects.filter(pk=after.pk).update(created_at=now - timedelta(seconds=1))

    with django_capture_on_commit_callbacks(execute=True):
        assert reaper.stale_scores_resend() == 1
        assert reaper.stale_scores_resend() == 0

    assert waiting(broker_queue) == 1


def test_after_a_broker_loss_the_scores_in_redis_then_are_sent_again_at_once(
    agent, settings, broker_queue, django_capture_on_commit_callbacks
):
    unclaimed, in_hand, later, after_loss = pending(evaluator_for(agent), 4)
    lost_at = timezone.now() + workers.BROKER_LOSS_MARGIN  # as broker_lost_mark notes it
    _beat("host:3:alive", broker_lost_at=lost_at)  # a Redis restart: the worker lives on
    _claimed(in_hand, by="host:3:alive", seconds_ago=2)  # Celery ended its task
    # Made after the loss: its message went to the Redis that came back, and its claim is live.
    OnlineScore.objects.filter(pk__in=[later.pk, after_loss.pk]).update(created_at=lost_at + timedelta(seconds=1))
    OnlineScore.objects.filter(pk=after_loss.pk).update(
        claimed_at=lost_at + timedelta(seconds=1), claimed_by="host:3:alive"
    )

    with django_capture_on_commit_callbacks(execute=True):
        assert reaper.stale_scores_resend() == 2  # none of them waited out a 120 s timeout
        assert reaper.stale_scores_resend() == 0

    assert waiting(broker_queue) == 2
    assert OnlineScore.objects.get(pk=in_hand.pk).claimed_by == ""
    assert OnlineScore.objects.get(pk=after_loss.pk).claimed_by == "host:3:alive"
    # The online reaper forgets no loss: the runs' reaper has still to take its cases back.
    assert WorkerHeartbeat.objects.get(name="host:3:alive").broker_lost_at == lost_at


def test_a_loss_the_runs_reaper_handles_first_still_reaches_the_online_scores(
    agent, broker_queue, django_capture_on_commit_callbacks
):
    (score,) = pending(evaluator_for(agent))
    lost_at = timezone.now() + workers.BROKER_LOSS_MARGIN
    _beat("host:4:alive", broker_lost_at=lost_at)

    with django_capture_on_commit_callbacks(execute=True):
        runs_services.run_reap()  # handles the loss and forgets it
        assert reaper.stale_scores_resend() == 0  # sent already, once

    assert WorkerHeartbeat.objects.get(name="host:4:alive").broker_lost_at is None
    assert waiting(broker_queue) == 1
    assert OnlineScore.objects.get(pk=score.pk).status == "pending"


def test_a_score_sent_again_is_scored_once_whatever_messages_arrive(agent, fake_llm, settings, monkeypatch):
    evaluator = evaluator_for(agent)
    preflighted(fake_llm, evaluator)
    (score,) = pending(evaluator)
    _beat("host:5:dead", seconds_ago=1, ended=True)
    dead = _claimed(score, by="host:5:dead", seconds_ago=0.5)
    dead_lease = Lease(score.pk, dead.claimed_at)  # what the killed worker held

    assert reaper.stale_scores_resend() == 1
    _beat("host:6:alive")
    monkeypatch.setattr(workers, "WORKER_ID", "host:6:alive")  # the worker taking the message
    done = online_score_run(score_id=score.pk)

    assert (done.status, done.score, done.claimed_by) == ("scored", 8, "host:6:alive")
    # A second copy of the message (the first one, redelivered), and the dead worker's outcome
    # had it lived on: neither writes anything.
    assert online_score_run(score_id=score.pk) is None
    assert reaper.stale_scores_resend() == 0
    assert not dead_lease.rows().exists()
    assert fake_llm.count("judge", online_score=score.pk) == 1
    assert OnlineScore.objects.get(pk=score.pk).scored_at == done.scored_at

"""A lane whose case the reaper took back (its worker host was cut off, then came back) claims
nothing more: the run's window has given its slot to the case's new message already."""

from datetime import timedelta

import pytest
from django.utils import timezone

from runs import services
from runs.engine.claims import result_claim
from runs.engine.saving import result_save_ahead
from runs.models import Result

pytestmark = pytest.mark.django_db


def test_a_lane_whose_case_was_taken_back_claims_no_next_case(make_dataset, alice, no_llm):
    dataset = make_dataset(8)
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    first = Result.objects.filter(run=run, status=Result.Status.QUEUED).order_by("id").first()
    old_token = first.token
    claimed, _ = result_claim(first.pk, old_token)
    # Its worker stops answering: the claim goes stale and the reaper queues the case again.
    Result.objects.filter(pk=first.pk).update(claimed_at=timezone.now() - timedelta(hours=1))
    services.run_reap()
    assert Result.objects.get(pk=first.pk).token != old_token

    # The lane's thread, whose claim ahead was held up meanwhile, gets to the database again
    # (as collect() retries it after a database error, on a new connection).
    held = result_save_ahead(None, old_token, None, running=claimed, claim=True)

    assert held == []
    assert not Result.objects.filter(run=run, token=old_token).exists()
    assert Result.objects.filter(run=run, status=Result.Status.RUNNING).count() == 0


def test_the_reaper_asks_again_the_case_a_lost_lane_had_in_hand_not_the_one_it_claimed_ahead(
    make_dataset, alice, no_llm
):
    # A lane's case claimed ahead may be older than its case in hand (one another lane handed
    # back to pending): the case in hand is the one the lane took first (its claim refresh
    # gives both the same claimed_at; _next_claim stamps queued_at), and the one asked again.
    dataset = make_dataset(8)
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    older, in_hand = Result.objects.filter(run=run, status=Result.Status.QUEUED).order_by("id")[:2]
    result_claim(in_hand.pk, in_hand.token)
    long_ago = timezone.now() - timedelta(hours=1)
    Result.objects.filter(pk=in_hand.pk).update(claimed_at=long_ago)
    Result.objects.filter(pk=older.pk).update(  # claimed ahead by the lane after it came back to pending
        status=Result.Status.RUNNING, token=in_hand.token, attempts=1, claimed_at=long_ago, queued_at=timezone.now()
    )

    services.run_reap()

    in_hand.refresh_from_db()
    older.refresh_from_db()
    assert (in_hand.status, in_hand.attempts) == (Result.Status.QUEUED, 1)
    assert [entry["cause"] for entry in in_hand.repeats] == [Result.RepeatCause.NO_HEARTBEAT]
    # Back in the window (queued again at once, the slot it leaves being free). Its claim stays
    # counted as asked, with the cause: the lane had taken it up (claimed_ahead is False), so
    # the agent was asked about it. One only claimed ahead counts nothing (test_repeat_calls.py).
    assert (older.status, older.attempts) == (Result.Status.QUEUED, 1)
    assert [entry["cause"] for entry in older.repeats] == [Result.RepeatCause.NO_HEARTBEAT]

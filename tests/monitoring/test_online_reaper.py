"""The online scores' reaper (issue 47, point 6): a score whose message was lost (a Redis restart
emptied the queue) or whose worker died is sent again, once per lease period; a score a live
worker holds is left alone."""

from datetime import timedelta

import pytest
from django.utils import timezone

from monitoring.models import OnlineScore
from monitoring.online import reaper
from monitoring.online.scoring import online_score_run
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

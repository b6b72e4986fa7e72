"""The beat's pass over online scoring: nothing claimed is lost, nothing is scored twice.

- A pending score whose lease went stale (its worker was killed mid-score, or lost its
  database) or that no worker ever took up (its message was lost with a Redis restart) is sent
  again. Sending again is safe: a worker takes a score only through the conditional update in
  scoring.py (`_take`), so a second message for a score that is taken or finished does nothing.
  A score sent again is not sent again for another lease period (a mark in the cache), so a long
  queue is not flooded with copies.
- Scores that waited for their judge's preflight (SKIPPED, "judge preflight pending") go back to
  pending once the preflight has an outcome: scored when it passed, skipped with "judge failed
  preflight" when it failed. A preflight that never started (its message was lost) is started.
- Then the selection sweep (traces a lost hook message missed) and the idle conversations.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db.models import Q
from django.utils import timezone

from monitoring.models import OnlineEvaluator, OnlineScore
from monitoring.online import scoring, selection

BATCH = 500
RESENT_KEY = "evalsite:online-score-resent:"


def online_reap(*, now: datetime | None = None) -> dict[str, int]:
    """One beat pass; returns how many scores it sent again, woke after their preflight, and
    claimed afresh (for logs and tests)."""
    now = now or timezone.now()
    return {
        "resent": stale_scores_resend(now=now),
        "woken": preflight_waiting_resume(),
        "swept": selection.online_traces_sweep(now=now),
        "conversations": selection.online_conversations_select(now=now),
    }


def stale_scores_resend(*, now: datetime | None = None) -> int:
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.EVALSITE_STALE_CLAIM_SECONDS)
    unsent = now - timedelta(seconds=settings.EVALSITE_STALE_QUEUE_SECONDS)  # runs' wait for a lost message
    lost = OnlineScore.objects.filter(status=OnlineScore.Status.PENDING).filter(
        Q(claimed_at__lt=stale) | Q(claimed_at__isnull=True, created_at__lt=unsent)
    )
    ids = [pk for pk in lost.order_by("created_at", "id").values_list("pk", flat=True)[:BATCH] if _mark(pk)]
    selection.scores_send(ids)
    return len(ids)


def _mark(score_id: int) -> bool:
    """True the first time in a lease period: this pass may send the score again."""
    return cache.add(f"{RESENT_KEY}{score_id}", 1, settings.EVALSITE_STALE_CLAIM_SECONDS)


def preflight_waiting_resume() -> int:
    waiting = OnlineScore.objects.filter(status=OnlineScore.Status.SKIPPED, error=scoring.PREFLIGHT_PENDING)
    woken = 0
    for evaluator in OnlineEvaluator.objects.filter(pk__in=waiting.values("evaluator_id"), enabled=True):
        config = scoring.evaluator_judge_config(evaluator)
        if not config.preflight_status:
            scoring.preflight_gate(config)  # starts it when no preflight is under way
            continue
        ids = list(waiting.filter(evaluator=evaluator).values_list("pk", flat=True)[:BATCH])
        # Back to pending, only those still waiting (a conditional update: a second pass finds none).
        woken += OnlineScore.objects.filter(pk__in=ids, status=OnlineScore.Status.SKIPPED).update(
            status=OnlineScore.Status.PENDING, error="", claimed_at=None, scored_at=None
        )
        selection.scores_send(ids)
    return woken

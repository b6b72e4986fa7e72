"""The beat's pass over online scoring: nothing claimed is lost, nothing is scored twice.

- A pending score whose worker is gone is sent again at once, as runs' reaper does for a case
  (runs/engine/reaper.py), from the same signals (evalsite/workers.py): its claim
  (`claimed_by`, the worker's id) was made by a worker not alive now (its heartbeat older than
  EVALSITE_WORKER_HEARTBEAT_TTL, or its row gone) or that its supervisor saw die (`ended_at`,
  runstack), or was made before that worker lost its broker connection (`broker_lost_at`: Celery
  ended the task). A reaper whose own heartbeat is stale or came late judges no one by
  heartbeats that pass (`workers.heartbeat_rough`), but for the ended workers and the losses.
  Such a claim is taken back by a conditional update (only a pass that finds the claim as it
  read it releases it, so each claim is sent again once), which also leaves the old lease
  nothing to write if its worker was alive after all; the new message then takes the score at
  once.
- A score whose message was in Redis when a broker loss was recorded (created before the loss
  mark and never claimed) is sent again at once: Redis may have come back empty. So is one never
  claimed and created before a worker died: the dead worker may have held its message unstarted
  (late acks keep it out of every queue until Redis's visibility timeout, hours).
- A pending score whose lease went stale (EVALSITE_STALE_CLAIM_SECONDS: a claim of no worker's,
  or a signal missed) or that no worker ever took up (EVALSITE_STALE_QUEUE_SECONDS: a message
  lost another way) is sent again, as before: the timeouts stay the fallback.

Sending again is safe: a worker takes a score only through the conditional update in scoring.py
(`_take`), so a second message for a score that is taken or finished does nothing. A score sent
again is not sent again for another lease period (a mark in the cache, set before a claim is
released too), so a long queue is not flooded with copies.

Broker losses are shared with runs' reaper, which forgets each (`workers.broker_losses_forget`)
once it has taken its cases back. This reaper never forgets one: it compares the scores with
the loss marks as they stand, and what it sends again is marked, so a loss seen by several
passes sends nothing twice. And runs' reaper sends workers.workers_lost_forgetting (received here) with the
losses it is about to forget, before it forgets them and its dead workers' rows, so whichever
reaper runs first, the scores see every loss and every death (a forgotten dead worker's row is
gone, which reads as not alive anyway). A failure there is logged, never keeps runs' reaper
from forgetting. This also gives online scores the urgent reaper pass a worker's heartbeat
sends when it sees a worker die or lose its broker (`workers._reap_for_the_lost`).
A claim is judged by the moment of the loss, not by runs' margin after it: a worker back on
Redis within the margin takes scores anew, and a lease taken before the loss is not refreshed
after it (scoring.Lease.refresh), so nothing held at the loss looks newer than it.

- Scores that waited for their judge's preflight (SKIPPED, "judge preflight pending") go back to
  pending once the preflight has an outcome: scored when it passed, skipped with "judge failed
  preflight" when it failed. A preflight that never started (its message was lost) is started.
- Then the selection sweep (traces a lost hook message missed) and the idle conversations.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db.models import Q, QuerySet
from django.utils import timezone

from evalsite import workers
from evalsite.models import WorkerHeartbeat
from monitoring.models import OnlineEvaluator, OnlineScore
from monitoring.online import scoring, selection

logger = logging.getLogger(__name__)

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
    losses = workers.broker_losses()
    resent = workers_lost_scores_resend(losses=losses, now=now)
    stale = now - timedelta(seconds=settings.EVALSITE_STALE_CLAIM_SECONDS)
    unsent = now - timedelta(seconds=settings.EVALSITE_STALE_QUEUE_SECONDS)  # runs' wait for a lost message
    lost = Q(claimed_at__lt=stale) | Q(claimed_at__isnull=True, created_at__lt=unsent)
    return resent + _marked_send(OnlineScore.objects.filter(lost, status=OnlineScore.Status.PENDING))


def workers_lost_scores_resend(*, losses: dict[str, datetime], now: datetime | None = None) -> int:
    """Send again the pending scores claimed by a worker that is gone (dead, ended) or that lost
    its broker connection after the claim, and those waiting in Redis when a worker lost it
    (`losses`, workers.broker_losses()); returns how many.

    Runs' reaper has this called too (workers.workers_lost_forgetting), with the losses it is about to forget."""
    now = now or timezone.now()
    live, dead = _liveness()
    ended = [worker.name for worker in dead if worker.ended_at]
    gone = Q(claimed_by__in=ended) if ended else Q(pk__in=[])
    if live is not None:
        # Claims made before this pass read who is alive (less an interval: a claim is committed
        # just after its timestamp), as runs' reaper judges them (runs/engine/reaper.py `_gone`).
        read_at = now - _heartbeat_interval()
        gone |= ~Q(claimed_by="") & ~Q(claimed_by__in=live) & Q(claimed_at__lt=read_at)
    for name, lost_at in losses.items():
        # Celery ended the task holding it. The loss itself, not the margin runs' reaper allows
        # after it (workers.BROKER_LOSS_MARGIN): a worker back on Redis within it takes scores
        # anew, and a lease taken before it is not refreshed after it (scoring.Lease.refresh).
        gone |= Q(claimed_by=name, claimed_at__lt=lost_at - workers.BROKER_LOSS_MARGIN)
    claims = OnlineScore.objects.filter(gone, status=OnlineScore.Status.PENDING, claimed_at__isnull=False)
    released = []
    held = claims.order_by("claimed_at", "id").values_list("pk", "claimed_at", "claimed_by")[:BATCH]
    for pk, claimed_at, claimed_by in held:
        # Marked first, so a pass that finds it unclaimed next does not send it a second time.
        cache.set(f"{RESENT_KEY}{pk}", 1, settings.EVALSITE_STALE_CLAIM_SECONDS)
        # Released only as this pass read it: a second pass, or a new claim meanwhile, finds none.
        if OnlineScore.objects.filter(
            pk=pk, status=OnlineScore.Status.PENDING, claimed_at=claimed_at, claimed_by=claimed_by
        ).update(claimed_at=None, claimed_by=""):
            released.append(pk)
    if released:
        logger.warning("Online scoring: sent again %d score(s) of workers lost", len(released))
    selection.scores_send(released)
    # Never claimed, and sent before a worker died or lost its broker connection: a dead worker
    # may have held its message unstarted (late acks keep it out of every queue for the
    # visibility timeout, hours), and Redis may be back empty after a loss.
    befores = [(worker.ended_at or worker.last_seen) + _heartbeat_interval() for worker in dead] + list(losses.values())
    unsent = 0
    if befores:
        waiting = Q(claimed_at__isnull=True, created_at__lt=max(befores))
        unsent = _marked_send(OnlineScore.objects.filter(waiting, status=OnlineScore.Status.PENDING))
    return len(released) + unsent


def workers_lost_forgetting_receive(sender: object = None, *, losses: dict[str, datetime], **kwargs: object) -> None:
    """workers.workers_lost_forgetting: runs' reaper is about to forget these losses."""
    workers_lost_scores_resend(losses=losses)


def _marked_send(scores: QuerySet[OnlineScore]) -> int:
    """Send again those of these scores not sent again within a lease period; returns how many."""
    ids = [pk for pk in scores.order_by("created_at", "id").values_list("pk", flat=True)[:BATCH] if _mark(pk)]
    selection.scores_send(ids)
    return len(ids)


def _heartbeat_interval() -> timedelta:
    return timedelta(seconds=settings.EVALSITE_WORKER_HEARTBEAT_INTERVAL)


def _liveness() -> tuple[list[str] | None, list[WorkerHeartbeat]]:
    """(the workers alive now, or None when this pass cannot tell; the dead ones, only those
    ended by their supervisor when it cannot tell, as that needs no heartbeat), as runs'
    reaper reads them."""
    live = workers.live_worker_ids()
    dead = workers.dead_workers()
    if workers.WORKER_ID and (workers.WORKER_ID not in live or workers.heartbeat_rough()):
        # This worker's own heartbeat is stale or came late: the database was slow or out of
        # reach, so other heartbeats may be old for the same reason and prove nothing.
        return None, [worker for worker in dead if worker.ended_at]
    return live, dead


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
            status=OnlineScore.Status.PENDING, error="", claimed_at=None, claimed_by="", scored_at=None
        )
        selection.scores_send(ids)
    return woken

"""The reaper: reconcile runs with their results, so a killed worker or a lost message never loses a case."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Case, Q, Value, When
from django.utils import timezone

from evalsite import llm, workers
from evalsite.models import WorkerHeartbeat
from runs.engine.claims import LANE_ORDER, repeats_add
from runs.engine.dispatch import enqueue_finish, fill_window, queue
from runs.models import Result, Run

logger = logging.getLogger(__name__)

# Settled runs are reconciled (lost finishing step, orphaned claims) for this long after they end.
RECONCILE_SETTLED_FOR = timedelta(days=1)
SUMMARY_PENDING_NOTE = Run.SUMMARY_PENDING_NOTE
SUMMARY_LOST_NOTE = "No summary: the worker writing it stopped. The figures above are complete."


def run_reap() -> int:
    """Reconcile every active run with its results; returns how many results were (re)queued.

    Redis is not the source of truth: a killed worker, a flushed Redis or a lost
    enqueue all leave rows that say what still has to happen.
    """
    now = timezone.now()
    claim_cutoff = now - timedelta(seconds=settings.EVALSITE_STALE_CLAIM_SECONDS)
    queue_cutoff = now - timedelta(seconds=settings.EVALSITE_STALE_QUEUE_SECONDS)
    live, dead = _liveness(now)
    ended = [worker.name for worker in dead if worker.ended_at]
    resend_cutoff = queue_cutoff
    if dead:
        # A killed worker also held messages it had taken from Redis but not started: late acks
        # keep them out of every queue until the visibility timeout (hours). Send again, once,
        # every case queued before it died; a copy still waiting in Redis just finds a new token.
        died = max(worker.ended_at or worker.last_seen for worker in dead)
        resend_cutoff = max(queue_cutoff, died + timedelta(seconds=settings.EVALSITE_WORKER_HEARTBEAT_INTERVAL))
    cut_off = workers.broker_losses()
    if cut_off:
        # A worker lost its broker connection (a Redis restart): Celery ended the cases it ran,
        # and Redis may have come back empty. Its claims made before are taken back at once,
        # and every case queued before is sent again (a copy still in Redis finds a new token).
        resend_cutoff = max(resend_cutoff, *cut_off.values())
    cutoffs = (claim_cutoff, queue_cutoff, resend_cutoff)
    active = Run.objects.filter(status__in=Run.ACTIVE_STATUSES).values_list("id", flat=True)
    queued = sum(_run_reconcile(run_id, *cutoffs, live, cut_off, read_at=now, ended=ended) for run_id in active)
    _online_scores_hand_on(cut_off)
    workers.workers_forget(dead)
    workers.broker_losses_forget(cut_off)
    _reap_settled(now, claim_cutoff)
    return queued


def _online_scores_hand_on(cut_off: dict[str, Any]) -> None:
    """Others reading the same losses and dead workers (online scores: monitoring/online/reaper.py,
    connected to workers.workers_lost_forgetting) see them here, before this pass forgets them,
    so whichever reaper runs first, neither misses one. A failure there never keeps this pass
    from forgetting (it would take the same losses back on every pass)."""
    for receiver, outcome in workers.workers_lost_forgetting.send_robust(sender=None, losses=cut_off):
        if isinstance(outcome, Exception):
            logger.warning("Could not hand the lost workers on to %s", receiver, exc_info=outcome)


def _liveness(now: Any) -> tuple[list[str] | None, list[WorkerHeartbeat]]:
    """(the workers alive now, the dead ones still to deal with); None alive when this pass
    cannot tell (then claims are judged by their own timeout, but those of a worker its
    supervisor saw die are still taken back: that needs no heartbeat).

    The pass then goes through the runs one by one, and a host back from a cut may claim
    meanwhile, alive though this list says otherwise: only claims made before `now`, less a
    heartbeat interval (a claim is committed just after its timestamp), are judged by it."""
    live = workers.live_worker_ids()
    if workers.WORKER_ID and (workers.WORKER_ID not in live or workers.heartbeat_rough()):
        # This worker's own heartbeat looks stale, or missed its turn within the TTL: the
        # database was out of reach (or slow), so other heartbeats may be old for the same
        # reason and prove nothing yet. Judge claims by their own timeout this pass.
        return None, [worker for worker in workers.dead_workers() if worker.ended_at]
    # A claim is proof of life too: a worker that claimed (or refreshed a claim) within the
    # TTL is alive whatever its heartbeat row says, as when a host cut off from the network
    # comes back and the heartbeat it wrote during the cut lands late and stale. A worker its
    # supervisor saw die (ended_at) has no such proof: nothing of it runs.
    dead = workers.dead_workers()
    ended = {worker.name for worker in dead if worker.ended_at}
    claiming = [name for name in _claiming_workers(now) if name not in ended]
    return [*live, *claiming], [worker for worker in dead if worker.name not in claiming]


def _claiming_workers(now: Any) -> list[str]:
    """Workers that claimed a case of an active run, or refreshed a claim, within the heartbeat
    TTL. A killed worker claims nothing after it dies, so its claims are older than the TTL by
    the time its heartbeat is: it is taken for gone no later than before."""
    since = now - timedelta(seconds=settings.EVALSITE_WORKER_HEARTBEAT_TTL)
    return list(
        Result.objects.filter(run__status__in=Run.ACTIVE_STATUSES, claimed_at__gte=since)
        .exclude(claimed_by="")
        .order_by()
        .values_list("claimed_by", flat=True)
        .distinct()
    )


def _run_reconcile(
    run_id: int,
    claim_cutoff: Any,
    queue_cutoff: Any,
    resend_cutoff: Any,
    live_workers: list[str] | None,
    cut_off: dict[str, Any] | None = None,
    *,
    read_at: Any = None,
    ended: list[str] | None = None,
) -> int:
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id, status__in=Run.ACTIVE_STATUSES).first()
        if run is None:
            return 0
        stale = _stale(
            run, claim_cutoff, queue_cutoff, resend_cutoff, live_workers, cut_off, read_at=read_at, ended=ended
        )
        lost_ids, ahead_ids, resent_ids = _by_lane(stale)
        stale_ids = lost_ids + ahead_ids + resent_ids
        # Claims taken back: why the agent will be asked again is noted for the coming attempt
        # (_repeats_note). Only counted attempts are repeats: a case in hand, or one its lane
        # took up (result_take_up counts it just before its request, as a lane saving its case
        # behind goes on). One only claimed ahead counted nothing under this claim and adds no
        # repeat, so the record matches the agent's calls (issue 48), but for a worker killed
        # between counting a case and sending its request.
        _repeats_note({pk: why for pk, is_lost, _, why in stale if why and pk in lost_ids + ahead_ids})
        if stale_ids:
            # New tokens: if the old message or worker ever comes back, its claim or save finds nothing.
            queue(lost_ids, status=Result.IN_FLIGHT_STATUSES, urgent=True)
            # A lane's other cases back to pending, each with the attempts it counted (see above).
            Result.objects.filter(pk__in=ahead_ids, status__in=Result.IN_FLIGHT_STATUSES).update(
                status=Result.Status.PENDING, token="", claimed_by=""
            )
            queue(resent_ids, status=Result.Status.QUEUED)
            logger.warning("Reaper re-queued %d stale case(s) of run %s", len(stale_ids), run_id)
        queued, in_flight = fill_window(run)
        if queued == 0 and in_flight == 0:
            enqueue_finish(run.pk)
    return len(stale_ids) + queued


def _stale(
    run: Run,
    claim_cutoff: Any,
    queue_cutoff: Any,
    resend_cutoff: Any,
    live_workers: list[str] | None,
    cut_off: dict[str, Any] | None,
    *,
    read_at: Any = None,
    ended: list[str] | None = None,
) -> list[tuple[int, bool, str, str]]:
    """The run's stale results: (id, lost, token, why its claim is taken back), each lane's case in
    hand first (the one it took first, whatever its id)."""
    # Lost: a claim whose own heartbeat stopped, or at once one of a worker gone (_gone: claims
    # made outside a worker have none to ask), and a message that never reached a worker.
    lost = Q(status=Result.Status.RUNNING, claimed_at__lt=claim_cutoff) | Q(
        status=Result.Status.QUEUED, queued_at__lt=queue_cutoff
    )
    gone = _gone(live_workers, read_at, ended or [])
    # Claims of a worker, made before it lost its broker connection: their tasks were ended.
    broker_lost = Q(pk__in=[])
    for name, lost_at in (cut_off or {}).items():
        broker_lost |= Q(status=Result.Status.RUNNING, claimed_by=name, claimed_at__lt=lost_at)
    lost |= gone | broker_lost  # their run is a slot short: they go to the front
    # Queued before a worker died: most still wait their turn in Redis, so the copies sent
    # (in case the dead worker held one) take their turn at the back, not the front.
    resend = Q(status=Result.Status.QUEUED, queued_at__lt=resend_cutoff)
    # Why a claim is taken back: the agent will be asked about its case again (a repeat).
    cause = Case(
        When(broker_lost, then=Value(Result.RepeatCause.BROKER_LOST)),
        When(gone, then=Value(Result.RepeatCause.WORKER_LOST)),
        When(status=Result.Status.RUNNING, then=Value(Result.RepeatCause.NO_HEARTBEAT)),
        default=Value(""),
    )
    return list(
        Result.objects.filter(lost | resend, run=run)
        .annotate(is_lost=Case(When(lost, then=Value(True)), default=Value(False)), cause=cause)
        .order_by(*LANE_ORDER)
        .values_list("id", "is_lost", "token", "cause")
    )


def _gone(live_workers: list[str] | None, read_at: Any, ended: list[str]) -> Q:
    """Claims of a worker that is not alive, made before the pass read who is (_liveness), and
    every claim of a worker its supervisor saw die (nothing of it runs, whatever the pass knows)."""
    ended_claims = Q(status=Result.Status.RUNNING, claimed_by__in=ended) if ended else Q(pk__in=[])
    if live_workers is None:
        return ended_claims
    gone = Q(status=Result.Status.RUNNING) & ~Q(claimed_by="") & ~Q(claimed_by__in=live_workers)
    if read_at is not None:
        gone &= Q(claimed_at__lt=read_at - timedelta(seconds=settings.EVALSITE_WORKER_HEARTBEAT_INTERVAL))
    return gone | ended_claims


def _by_lane(stale: list[tuple[int, bool, str, str]]) -> tuple[list[int], list[int], list[int]]:
    """(lost, held ahead, to resend): one slot per lost lane, since a lane also holds the case it
    claimed ahead, which goes back to pending rather than out as a second message (a lane too
    many, for good)."""
    lanes: dict[str, list[int]] = {}
    for pk, is_lost, token, _ in stale:
        if is_lost:
            lanes.setdefault(token or f"#{pk}", []).append(pk)
    lost_ids = [held[0] for held in lanes.values()]
    ahead_ids = [pk for held in lanes.values() for pk in held[1:]]
    resent_ids = [pk for pk, is_lost, _, _ in stale if not is_lost]
    return lost_ids, ahead_ids, resent_ids


def _repeats_note(causes: dict[int, str]) -> None:
    """Claims taken back: their cases are asked again when next claimed (the claim counts the
    attempt); the reaper says why, as only it knows (runs/engine/claims.py)."""
    for result in Result.objects.filter(pk__in=list(causes)).only("id", "attempts", "repeats"):
        if len(result.repeats) < result.attempts:  # not said already for the coming attempt
            repeats_add(result, causes[result.pk], attempt=result.attempts + 1)


def _reap_settled(now: Any, claim_cutoff: Any) -> None:
    """Recently settled runs: orphaned claims of a stopped run, or a finishing step that was lost."""
    settled = Run.objects.exclude(status__in=Run.ACTIVE_STATUSES).filter(finished_at__gte=now - RECONCILE_SETTLED_FOR)
    for run_id in settled.filter(results__status=Result.Status.RUNNING).values_list("id", flat=True).distinct():
        with transaction.atomic():
            orphans = Result.objects.filter(run_id=run_id, status=Result.Status.RUNNING, claimed_at__lt=claim_cutoff)
            if orphans.update(
                status=Result.Status.SKIPPED, error="Not finished: its worker was lost after the run ended."
            ):
                enqueue_finish(run_id)
    # A finishing step that never claimed the summary long after the end: its task was lost.
    for run_id in settled.filter(summary="", summary_note="", finished_at__lt=claim_cutoff).values_list(
        "id", flat=True
    ):
        enqueue_finish(run_id)
    # A summary claimed but unwritten past every bound of its call: its worker died during it.
    # One summary per run, ever: it is not asked again (a second finish would also queue a
    # second suggestion job), the run says so instead. The window follows the call bounds, so
    # a slow local model still writing its summary is never taken for a lost one.
    # An llm agent with its own, longer timeout widens the window of its runs.
    pending = settled.filter(summary="", summary_note=SUMMARY_PENDING_NOTE)
    default = llm.timeout_for("agent")
    longer = Q(agent_version__llm_timeout__gt=default)
    pending.exclude(longer).filter(finished_at__lt=now - _summary_window()).update(summary_note=SUMMARY_LOST_NOTE)
    for seconds in set(pending.filter(longer).values_list("agent_version__llm_timeout", flat=True)):
        pending.filter(agent_version__llm_timeout=seconds, finished_at__lt=now - _summary_window(seconds)).update(
            summary_note=SUMMARY_LOST_NOTE
        )


def _summary_window(agent_timeout: float | None = None) -> timedelta:
    # The run's last cases (agent and judge calls) may finish after finished_at (Stop), then the summary call.
    agent = llm.call_bound("agent", timeout=agent_timeout)
    bound = agent + llm.call_bound("judge") + llm.call_bound("summary")
    return timedelta(seconds=bound + settings.EVALSITE_STALE_CLAIM_SECONDS)

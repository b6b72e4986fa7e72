"""Worker liveness: each Celery worker writes a heartbeat row; the console, /healthz and the reaper read it.

A worker's identity (`WORKER_ID`) is made in its main process when it starts, before the
pool forks, so every pool child inherits it and stamps it on the results it claims
(Result.claimed_by). When a worker is killed (kill -9, OOM) its heartbeat stops, and the
reaper re-queues its claims as soon as the heartbeat is older than
EVALSITE_WORKER_HEARTBEAT_TTL, instead of waiting out the stale-claim timeout. A live
worker beats every EVALSITE_WORKER_HEARTBEAT_INTERVAL (a fifth of the TTL by default), so a
live case is never taken for dead.

The reaper is not left to its beat for that: each heartbeat also looks for a worker that has
just died (its heartbeat older than the TTL, or its supervisor saw it die) or lost its broker
connection, and sends the reaper at once, the first time it sees each (`_reap_for_the_lost`).
"""

from __future__ import annotations

import logging
import mmap
import os
import socket
import struct
import threading
import time
import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connections
from django.db.models import Q
from django.dispatch import Signal
from django.utils import timezone

from evalsite.models import WorkerHeartbeat

logger = logging.getLogger(__name__)

# Sent by runs' reaper (runs/engine/reaper.py) with `losses` (worker id -> broker loss time) just
# before it forgets those losses and its dead workers' rows: an app that reads them too (online
# scoring) sees every one, without runs importing it.
workers_lost_forgetting = Signal()

# Empty outside a worker (web, tests driving cases in-process): such claims fall back to the timeout.
WORKER_ID = ""
_stop = threading.Event()
# One byte shared by the worker's main process and every pool child it forks (an anonymous
# mapping is MAP_SHARED, and a fork keeps it shared): set when a warm shutdown begins, so a
# child running a lane of a run stops taking the run's next cases and hands them on to
# another worker (runs/engine/execution.py) instead of running on for its lane time.
_shutting_down = mmap.mmap(-1, 1)
# The worker's lease, shared the same way (two doubles, wall-clock seconds): when the last
# heartbeat that reached the database was taken (what its row says), and when the heartbeat
# last came back after a gap long enough for the reaper to take the worker for dead. A third:
# the claims made before this moment are forfeit (the broker connection was lost). A fourth:
# when a heartbeat last came back after a missed one (`heartbeat_rough`).
_lease = mmap.mmap(-1, 32)
_LEASE = struct.Struct("dd")
_FORFEIT = struct.Struct("d")
_ROUGH = struct.Struct("d")
_ROUGH_AT = _LEASE.size + _FORFEIT.size


def worker_start() -> str:
    """In the worker's main process, before the pool forks and before it consumes: take an
    identity and beat once (a claim stamped with an identity that has no row yet would look
    dead to the reaper), then keep beating from a thread."""
    global WORKER_ID
    WORKER_ID = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    now = timezone.now()
    WorkerHeartbeat.objects.create(name=WORKER_ID, started_at=now, last_seen=now)
    _LEASE.pack_into(_lease, 0, now.timestamp(), 0.0)
    _FORFEIT.pack_into(_lease, _LEASE.size, 0.0)
    _ROUGH.pack_into(_lease, _ROUGH_AT, 0.0)
    _reaped.clear()
    # Rows of workers gone for a day are history, not liveness.
    WorkerHeartbeat.objects.filter(last_seen__lt=now - timedelta(days=1)).delete()
    connections.close_all()  # the pool children must not inherit this connection
    _stop.clear()
    shutdown_forget()
    threading.Thread(target=_beat, name="worker-heartbeat", daemon=True).start()
    return WORKER_ID


def shutdown_begin() -> None:
    """In the main process, when a warm shutdown begins (SIGTERM, Ctrl-C): seen by every child."""
    _shutting_down[0] = 1


def shutdown_forget() -> None:
    _shutting_down[0] = 0


def shutting_down() -> bool:
    """Whether this worker is in a warm shutdown: finish what is in hand, take nothing new."""
    return _shutting_down[0] == 1


def worker_stop() -> None:
    """A clean shutdown (tasks finished): say so at once rather than let the heartbeat age."""
    _stop.set()
    if WORKER_ID:
        WorkerHeartbeat.objects.filter(name=WORKER_ID).delete()


def _beat() -> None:
    while not _stop.wait(settings.EVALSITE_WORKER_HEARTBEAT_INTERVAL):
        try:
            beat_once()
            _reap_for_the_lost()
        except Exception:  # a database blip: the next beat tries again on a fresh connection
            logger.warning("Worker heartbeat failed", exc_info=True)
            connections.close_all()


def beat_once() -> None:
    """One heartbeat, and the lease it renews. A beat that reaches the database long after the
    one before (a host cut off from the network, a database out of reach) writes the time it
    was taken, stale by then: the reaper may have taken the worker for dead meanwhile and
    handed its claims on, which `lease_doubtful` then tells the worker's lanes."""
    now = timezone.now()
    if not WorkerHeartbeat.objects.filter(name=WORKER_ID).update(last_seen=now):
        WorkerHeartbeat.objects.create(name=WORKER_ID, started_at=now, last_seen=now)
    last_ok, gap_end = _LEASE.unpack_from(_lease)
    arrived = time.time()
    if arrived - last_ok > _lease_seconds():
        gap_end = arrived
    if arrived - last_ok > 2 * settings.EVALSITE_WORKER_HEARTBEAT_INTERVAL:
        _ROUGH.pack_into(_lease, _ROUGH_AT, arrived)
    _LEASE.pack_into(_lease, 0, now.timestamp(), gap_end)


def heartbeat_rough() -> bool:
    """Whether one of this worker's heartbeats missed its turn within the last TTL (the database
    was slow or out of reach, or this host was). Then other workers' heartbeats may be old for
    the same reason, and the reaper judges nobody by them (runs/engine/reaper.py)."""
    (rough_at,) = _ROUGH.unpack_from(_lease, _ROUGH_AT)
    return bool(WORKER_ID) and time.time() - rough_at < settings.EVALSITE_WORKER_HEARTBEAT_TTL


# What this worker has sent the reaper for (a dead worker's name, or a worker's name and when it
# lost its broker connection), and whether a send is on its way (at most one at a time).
_reaped: set[tuple[str, str]] = set()
_sending = threading.Lock()


def _reap_for_the_lost() -> None:
    """After a heartbeat: if a worker has died or lost its broker connection since the last look,
    send the reaper now (at the front of the queue) rather than leave its cases to beat's next
    pass. One small query a beat; a dead worker's row goes once the reaper has dealt with it.

    The send is a thread of its own, so a broker out of reach never holds up the heartbeat; what
    it failed to send is sent again on the next beat."""
    cutoff = timezone.now() - timedelta(seconds=settings.EVALSITE_WORKER_HEARTBEAT_TTL)
    lost = WorkerHeartbeat.objects.filter(
        Q(last_seen__lt=cutoff) | Q(ended_at__isnull=False) | Q(broker_lost_at__isnull=False)
    ).values_list("name", "broker_lost_at")
    now_lost = {(name, f"broker lost {lost_at}" if lost_at else "dead") for name, lost_at in lost}
    _reaped.intersection_update(now_lost)  # one back to life may die again later
    new = now_lost - _reaped
    if not new or not _sending.acquire(blocking=False):
        return

    def send() -> None:
        from evalsite.celery import app
        from evalsite.tasks import URGENT

        try:
            app.send_task("runs.tasks.run_reap", priority=URGENT, retry=False)
            _reaped.update(new)
        except Exception as error:  # the broker is out of reach: the next beat sends it
            logger.info("Could not send the reaper yet (%r)", error)
        finally:
            _sending.release()

    threading.Thread(target=send, name="worker-reap-now", daemon=True).start()


def _lease_seconds() -> float:
    """How old the last heartbeat that reached the database may be before the reaper could take
    this worker for dead (its TTL), less an interval for a call already on its way."""
    return settings.EVALSITE_WORKER_HEARTBEAT_TTL - settings.EVALSITE_WORKER_HEARTBEAT_INTERVAL


def lease_doubtful(claimed_at: datetime | None) -> bool:
    """Whether a claim this worker made at `claimed_at` may have been taken back by the reaper:
    its heartbeat is too old to prove it alive now, or it came back after such a gap since the
    claim was made. Then the claim is checked in the database before the case's next model call
    (runs/engine/execution.py). Outside a worker (no reaper judges it), never."""
    if not WORKER_ID:
        return False
    last_ok, gap_end = _LEASE.unpack_from(_lease)
    if time.time() - last_ok > _lease_seconds():
        return True
    return claimed_at is None or claimed_at.timestamp() < gap_end


# Claims made up to this long after the loss was noted are taken back too: a case's claim
# refresh, in a pool child Celery was ending at that moment, may land just after it.
BROKER_LOSS_MARGIN = timedelta(seconds=1)


def broker_lost_mark() -> datetime:
    """In the worker's main process, the moment its broker connection is lost, before Celery
    ends the tasks it runs: the claims made before the returned moment are forfeit (the reaper
    takes them back, broker_lost_record), which its pool children see at once (`claim_forfeit`)
    and so ask the model nothing more about those cases in the moment before they are ended."""
    lost_at = timezone.now() + BROKER_LOSS_MARGIN
    _FORFEIT.pack_into(_lease, _LEASE.size, lost_at.timestamp())
    return lost_at


def claim_forfeit(claimed_at: datetime | None) -> bool:
    """Whether a claim of this worker's was made before it lost its broker connection."""
    (forfeit_before,) = _FORFEIT.unpack_from(_lease, _LEASE.size)
    return bool(WORKER_ID) and forfeit_before > 0 and (claimed_at is None or claimed_at.timestamp() < forfeit_before)


def broker_lost_record(lost_at: datetime | None = None) -> None:
    """In the worker's main process, when its broker connection is lost and Celery has ended
    the tasks it was running (late acks: they cannot be acknowledged on the lost connection):
    say so in the database, so the reaper takes their cases back as soon as it runs (after the
    reconnect, or on another worker) instead of waiting out their claims' timeout.

    From a thread of its own, with its own connection: the main process must not hold one when
    the pool forks a child to replace an ended one (evalsite/celery.py worker_start)."""
    if not WORKER_ID:
        return

    def record() -> None:
        try:
            WorkerHeartbeat.objects.filter(name=WORKER_ID).update(broker_lost_at=lost_at or broker_lost_mark())
        except Exception:  # the database is out of reach too: the claims' timeout still applies
            logger.warning("Could not record the lost broker connection", exc_info=True)
        finally:
            connections.close_all()

    thread = threading.Thread(target=record, name="worker-broker-lost", daemon=True)
    thread.start()
    thread.join(timeout=10)


def broker_losses() -> dict[str, datetime]:
    """Workers that lost their broker connection and were not yet reconciled: name -> when."""
    rows = WorkerHeartbeat.objects.filter(broker_lost_at__isnull=False).values_list("name", "broker_lost_at")
    return {name: lost_at for name, lost_at in rows if lost_at is not None}


def broker_losses_forget(losses: dict[str, datetime]) -> None:
    """The reaper has taken these claims back: forget the losses, unless one happened again."""
    for name, lost_at in losses.items():
        WorkerHeartbeat.objects.filter(name=name, broker_lost_at=lost_at).update(broker_lost_at=None)


def live_worker_ids() -> list[str]:
    cutoff = timezone.now() - timedelta(seconds=settings.EVALSITE_WORKER_HEARTBEAT_TTL)
    rows = WorkerHeartbeat.objects.filter(last_seen__gte=cutoff, ended_at__isnull=True)
    return list(rows.values_list("name", flat=True))


def dead_workers() -> list[WorkerHeartbeat]:
    """Workers whose heartbeat stopped without a clean shutdown (a clean one deletes its row),
    or whose supervisor saw them die (ended_at)."""
    cutoff = timezone.now() - timedelta(seconds=settings.EVALSITE_WORKER_HEARTBEAT_TTL)
    return list(WorkerHeartbeat.objects.filter(Q(last_seen__lt=cutoff) | Q(ended_at__isnull=False)))


def workers_end(*, host: str, pid: int) -> int:
    """A supervisor on `host` saw the worker process `pid` die and killed the pool children it
    left behind (runstack): record it, so the reaper's next pass takes its claims back instead
    of waiting for its heartbeat to be EVALSITE_WORKER_HEARTBEAT_TTL old. Returns rows marked."""
    rows = WorkerHeartbeat.objects.filter(name__startswith=f"{host}:{pid}:", ended_at__isnull=True)
    return rows.update(ended_at=timezone.now())


def workers_forget(dead: list[WorkerHeartbeat]) -> None:
    """The reaper has dealt with these: forget them, unless one has beaten again meanwhile."""
    for worker in dead:
        WorkerHeartbeat.objects.filter(pk=worker.pk, last_seen=worker.last_seen).delete()


def last_heartbeat_age() -> float | None:
    """Seconds since any worker last beat, or None if none ever did (or all stopped cleanly)."""
    rows = WorkerHeartbeat.objects.filter(ended_at__isnull=True)
    last = rows.order_by("-last_seen").values_list("last_seen", flat=True).first()
    return None if last is None else (timezone.now() - last).total_seconds()


def worker_running() -> bool:
    age = last_heartbeat_age()
    return age is not None and age <= settings.EVALSITE_WORKER_HEARTBEAT_TTL

"""A run that has made no progress for a while: the run page says so, with the likely cause.

Read from the signals /healthz uses (evalsite/health.py): whether Redis answers and whether
a worker's heartbeat is fresh; with both fine and cases claimed, the model or agent is the
one not answering. Only computed for an active run with cases in flight, and the checks
only once it is stalled, so a page poll of a moving run pays one query for it (none in
its first 30 s).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Max, Q
from django.utils import timezone

from runs.models import Result, Run

STALL_SECONDS = 30


@dataclass(frozen=True)
class Stall:
    seconds: int
    cause: str

    @property
    def duration(self) -> str:
        return f"{self.seconds} s" if self.seconds < 120 else f"{self.seconds // 60} min"


def run_stall(*, run: Run, now: datetime | None = None) -> Stall | None:
    """How long the run has gone without a case finishing, and why, once that is STALL_SECONDS."""
    if not run.is_active:
        return None
    now = now or timezone.now()
    started = max(moment for moment in (run.started_at, run.created_at) if moment is not None)
    if (now - started).total_seconds() < STALL_SECONDS:
        return None  # too young to have stalled: no query
    figures = Result.objects.filter(run=run).aggregate(
        last=Max("finished_at"),
        in_flight=Count("pk", filter=Q(status__in=Result.IN_FLIGHT_STATUSES)),
        running=Count("pk", filter=Q(status=Result.Status.RUNNING)),
    )
    if not figures["in_flight"]:
        return None
    since = max(started, figures["last"] or started)
    idle = (now - since).total_seconds()
    if idle < STALL_SECONDS:
        return None
    return Stall(seconds=int(idle), cause=_likely_cause(running=figures["running"]))


def _likely_cause(*, running: int) -> str:
    from evalsite import health

    if not health.redis_check()["ok"]:
        return "Likely cause: Redis, the queue that hands cases to workers, cannot be reached."
    if not health.worker_check()["ok"]:
        return "Likely cause: no worker is running. Start one (make run starts it) and the run goes on."
    if running:
        plural = "s are" if running > 1 else " is"
        return f"Likely cause: the model or agent is not answering ({running} case{plural} waiting for an answer)."
    return "Likely cause: every worker is busy with other runs; its cases wait in the queue."

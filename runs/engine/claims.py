"""Claiming a task message's case, and counting every time the agent is asked about it again.

`Result.attempts` is how many times the agent (then the judge) was asked about a result, as
the http agent sees it (X-Evalsite-Attempt, with the same Idempotency-Key every time), and
`Result.repeats` says why each time after the first (issue 35):

- the message came back with its own token: the pool child running it died (kill -9, out of
  memory) and Celery delivered it again (`redelivered`);
- the task retried its own database error, after the agent had been asked (`database`): the
  task passes on which of its cases it had asked (runs/tasks.py);
- the reaper took the claim back and queued the case with a new token: its worker stopped,
  lost its broker connection, or its claim stopped being refreshed (the reaper writes the
  entry itself, runs/engine/reaper.py, as it knows why).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from django.db.models import Case, F, PositiveSmallIntegerField, Q, QuerySet, Subquery, When
from django.utils import timezone

from evalsite import workers
from runs.models import Result, Run


def result_claim(
    result_id: int, token: str, *, count_attempt: bool = True, asked: Collection[int] = ()
) -> tuple[Result, int] | None:
    """The message's case, claimed, and how many of its lane's cases were taken up: with the
    same token it is our own message coming back (a retry after a database error, or a
    redelivery after the pool child died), which takes up the case its lane was on (its
    own or one the lane claimed after it) and any the lane had claimed ahead.

    `count_attempt` False (a retry of the task's own database error) counts an attempt only
    for the cases its earlier try had asked the agent about (`asked`), and for a case it
    had not claimed at all yet."""
    attempts: Any
    if count_attempt:
        attempts = F("attempts") + 1
    else:
        again = Q(pk__in=list(asked)) | Q(status=Result.Status.QUEUED)
        attempts = Case(
            When(again, then=F("attempts") + 1), default=F("attempts"), output_field=PositiveSmallIntegerField()
        )
    lane = Result.objects.filter(
        run_id=Subquery(Result.objects.filter(pk=result_id).values("run_id")),
        token=token,
        status__in=Result.IN_FLIGHT_STATUSES,
    )
    claimed = lane.update(
        status=Result.Status.RUNNING, claimed_at=timezone.now(), attempts=attempts, claimed_by=workers.WORKER_ID
    )
    if not claimed:
        return None
    result = claimed_first(lane)
    if result is None:
        return None
    if result.attempts > 1:  # the lane's first case is asked again (so may the others be)
        mine = lane.filter(attempts__gt=1)
        _repeats_record(mine if count_attempt else mine.filter(pk__in=list(asked)), database=not count_attempt)
        result.repeats = Result.objects.get(pk=result.pk).repeats
    return result, claimed


def _repeats_record(results: QuerySet[Result], *, database: bool) -> None:
    """Say why each of these results is asked again (they were just claimed again)."""
    cause = Result.RepeatCause.DATABASE if database else Result.RepeatCause.WORKER_PROCESS_LOST
    for result in results.only("id", "attempts", "repeats"):
        if len(result.repeats) < result.attempts - 1:  # else the reaper said why already
            repeats_add(result, cause, attempt=result.attempts)


def repeats_add(result: Result, cause: str, *, attempt: int) -> None:
    result.repeats = [*result.repeats, {"cause": str(cause), "attempt": attempt}]
    Result.objects.filter(pk=result.pk).update(repeats=result.repeats)


# A lane's cases in the order it took them: each is queued (sent, or claimed ahead) when the
# lane takes it, so the case in hand is the earliest. Not by id: a case with a lower id may
# have gone back to pending (a lost lane's) and been claimed ahead after the case in hand;
# taking it for the case in hand left the one the agent was asked about uncounted.
LANE_ORDER = (F("queued_at").asc(nulls_last=True), "id")


def claimed_first(results: QuerySet[Result], run: Run | None = None) -> Result | None:
    """The lane's claimed case (the one it took first), with its run and agent unless the lane has them already."""
    related = ("case",) if run is not None else ("case", "run__agent")
    return results.select_related(*related).order_by(*LANE_ORDER).first()

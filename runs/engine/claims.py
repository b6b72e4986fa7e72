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

from django.db.models import Case, F, PositiveSmallIntegerField, Q, QuerySet, Subquery, Value, When
from django.utils import timezone

from evalsite import workers
from runs.models import Result, Run


def result_claim(
    result_id: int, token: str, *, count_attempt: bool = True, asked: Collection[int] = ()
) -> tuple[Result, int] | None:
    """The message's case, claimed, and how many of its lane's cases were taken up: with the
    same token it is our own message coming back (a retry after a database error, or a
    redelivery after the pool child died), which takes up the case its lane was on and any
    it had claimed ahead. Only the case taken in hand counts its attempt now; the others are
    held as claimed ahead and count theirs when taken up (`result_take_up`), so a case
    handed back unstarted counts no call (issue 48). `count_attempt` False (a retry of the
    task's own database error) counts again only the cases its earlier try had asked (`asked`)."""
    lane = Result.objects.filter(
        run_id=Subquery(Result.objects.filter(pk=result_id).values("run_id")),
        token=token,
        status__in=Result.IN_FLIGHT_STATUSES,
    )
    if (found := lane.order_by(*LANE_ORDER).values_list("pk", "status").first()) is None:
        return None
    first, asked_before = Q(pk=found[0]), _asked_before(count_attempt, asked)
    # The lane's other cases asked before are asked again when taken up (a queued case is a
    # new message's, alone under its token).
    others = lane.exclude(first).filter(asked_before, attempts__gt=0)
    again = [] if found[1] == Result.Status.QUEUED else list(others.values_list("pk", flat=True))
    claimed = lane.update(
        status=Result.Status.RUNNING,
        claimed_at=timezone.now(),
        attempts=_claim_attempts(first, asked_before),
        claimed_ahead=Case(When(first, then=Value(False)), default=Value(True)),
        claimed_by=workers.WORKER_ID,
    )
    if not claimed:
        return None
    result = claimed_first(lane)
    if result is None:
        return None
    if again or result.attempts > 1:  # asked again: now (the case in hand), or when taken up
        now = Q(pk=result.pk, attempts__gt=1) & (Q() if count_attempt else Q(pk__in=list(asked)))
        _repeats_record(lane.filter(Q(pk__in=again) | now), database=not count_attempt)
        result.repeats = Result.objects.get(pk=result.pk).repeats
    return result, claimed


def _asked_before(count_attempt: bool, asked: Collection[int]) -> Q:
    """The lane's cases asked about before under this claim: a redelivery cannot tell, so every
    case its lane held in hand counts as asked (it was, but for the ms between a claim and its request)."""
    return Q(claimed_ahead=False) if count_attempt else Q(claimed_ahead=False, pk__in=list(asked))


def _claim_attempts(first: Q, asked_before: Q) -> Case:
    """The attempts of a lane's cases as its message claims them (see result_claim)."""
    return Case(
        # The case in hand: one more, unless its earlier try counted it and never asked.
        When(first & (asked_before | Q(claimed_ahead=True) | Q(status=Result.Status.QUEUED)), then=F("attempts") + 1),
        When(first, then=F("attempts")),
        # Held ahead: as many as it was asked; one taken in hand and never asked counted one too many.
        When(Q(claimed_ahead=True) | asked_before, then=F("attempts")),
        default=F("attempts") - 1,
        output_field=PositiveSmallIntegerField(),
    )


def result_take_up(result: Result, token: str) -> bool:
    """The lane goes on with a case it claimed ahead: its attempt counts now, before the agent
    is asked (the claim's own count, for a case claimed ahead). False: the lane no longer
    holds it (taken back by the reaper, or by Stop), and the agent is not asked."""
    taken = Result.objects.filter(pk=result.pk, token=token, status=Result.Status.RUNNING, claimed_ahead=True).update(
        claimed_ahead=False, attempts=F("attempts") + 1
    )
    if not taken:
        return False
    result.claimed_ahead = False
    result.attempts += 1
    return True


def _repeats_record(results: QuerySet[Result], *, database: bool) -> None:
    """Say why each of these results is asked again (they were just claimed again)."""
    cause = Result.RepeatCause.DATABASE if database else Result.RepeatCause.WORKER_PROCESS_LOST
    for result in results.only("id", "attempts", "claimed_ahead", "repeats"):
        # The attempt coming for a case held ahead (counted when taken up), else the one under way.
        attempt = result.attempts + 1 if result.claimed_ahead else result.attempts
        if len(result.repeats) < attempt - 1:  # else the reaper said why already
            repeats_add(result, cause, attempt=attempt)


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

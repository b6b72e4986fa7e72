"""The run's hard cost cap: once its recorded cost reaches Run.budget_cap, no new case starts.

Two checks, both cheap (docs/architecture.md, "The run window"):
- `run_stop_at_cap` runs in `saving.outcome_write`, under the run row's lock, right after the
  saved case's cost was added: one conditional UPDATE stops the run when agent + judge
  cost has reached the cap, and its pending and queued results become Skipped in the same
  transaction, so the freed slot is never handed on. Cases already calling their agent
  finish and their cost is counted (they were started before the cap was reached).
- `claim_over_budget` runs right after a case is claimed, before its first call: a
  message that claimed its case just before the stop committed reads the run row after
  its claim, finds it stopped at the cap, and makes no call.
"""

from __future__ import annotations

from decimal import Decimal

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from runs.engine.dispatch import enqueue_finish
from runs.models import Result, Run

NOT_RUN = "Not run: the run reached its budget cap."


def budget_reached(run: Run) -> bool:
    """The run's recorded cost (as loaded) has reached its cap."""
    return run.budget_cap is not None and run.agent_cost + run.judge_cost >= run.budget_cap


def run_stop_at_cap(run: Run, *, cap: Decimal | None) -> bool:
    """Stop the run if its cost reached its cap; the caller holds the run row's lock.

    `cap` is the run's budget_cap (fixed at creation, so the copy loaded with the claim
    does): a run without one costs no query. Sets `run.status` to Stopped when it stopped
    the run, so the caller's refill skips.
    """
    if cap is None:
        return False
    stopped = Run.objects.filter(
        pk=run.pk, status__in=Run.ACTIVE_STATUSES, budget_cap__lte=F("agent_cost") + F("judge_cost")
    ).update(
        status=Run.Status.STOPPED,
        stop_reason=Run.BUDGET_REACHED,
        stop_requested_at=timezone.now(),
        finished_at=timezone.now(),
    )
    if not stopped:
        return False
    Result.objects.filter(run_id=run.pk, status__in=(Result.Status.PENDING, Result.Status.QUEUED)).update(
        status=Result.Status.SKIPPED, error=NOT_RUN
    )
    run.status = Run.Status.STOPPED
    return True


def claim_over_budget(result: Result, token: str) -> bool:
    """After the claim, before any call: a case claimed just before its run was stopped at
    the cap is handed back as Skipped, uncalled (a user's Stop lets such a case finish)."""
    if result.run.stop_reason != Run.BUDGET_REACHED:
        return False
    with transaction.atomic():
        skipped = Result.objects.filter(pk=result.pk, token=token, status=Result.Status.RUNNING).update(
            status=Result.Status.SKIPPED, error=NOT_RUN
        )
        if skipped and not Result.objects.filter(run_id=result.run_id, status__in=Result.IN_FLIGHT_STATUSES).exists():
            enqueue_finish(result.run_id)
    return True

"""Saving a case: its Result row and the run's counters in one transaction, under the run row's
lock, and the slot it frees handed on (to the lane's next case, or a new task message).

Called by the lane (runs/engine/lane.py): now, or behind the lane's next model call.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import F, Subquery
from django.utils import timezone

from evalsite import workers
from runs.engine import budget
from runs.engine.case import Outcome
from runs.engine.dispatch import NOT_ASKED_ATTEMPTS, STOPPED_NOT_RUN, enqueue_finish, money, queue, queue_pending
from runs.models import Result, Run


def next_claim(run_id: int, token: str, *, ahead: bool = False) -> bool:
    """Claim the run's next pending case for this lane (one statement); the caller holds the
    run row's lock, so no other lane or the reaper can take it meanwhile. A case claimed
    `ahead` counts no attempt until the lane takes it up (runs/engine/claims.py): the lane
    may hand it back, or be lost, before it asks the agent about it."""
    now = timezone.now()
    oldest = Result.objects.filter(run_id=run_id, status=Result.Status.PENDING).order_by("id").values("id")[:1]
    return bool(
        Result.objects.filter(pk=Subquery(oldest), status=Result.Status.PENDING).update(
            status=Result.Status.RUNNING,
            token=token,
            queued_at=now,
            claimed_at=now,
            attempts=F("attempts") if ahead else F("attempts") + 1,
            claimed_ahead=ahead,
            claimed_by=workers.WORKER_ID,
        )
    )


def result_save(result: Result, token: str, outcome: Outcome, *, chain: bool = False, ahead: bool = False) -> bool:
    """Save the outcome, bump the run's counters and refill the window, all in one transaction.

    The freed slot goes to the run's next pending case: claimed here for this lane when
    `chain` (True is returned: the lane goes on with it), else queued for a new task message.
    `ahead`: the lane may hold cases claimed ahead (it was told of one it did not go on with,
    or took some up when its message came back): listed here, it goes on with the oldest or
    hands them on (one message for the lane, as without them)."""
    with transaction.atomic():
        run = Run.objects.select_for_update().only("id", "status", "concurrency").get(pk=result.run_id)
        if not outcome_write(run, result, token, outcome):
            return False  # re-queued by the reaper or skipped by Stop meanwhile: the other copy counts
        # This case freed one slot: hand it to the next pending case. One for one keeps the
        # window full without counting it (the reaper counts, under the same lock).
        held = _held(run.pk, token) if ahead else []
        if run.is_active:
            if held:
                if chain:
                    return True
                _hand_on(held)
                return False
            if chain and next_claim(run.pk, token):
                return True
            if not chain and queue_pending(run.pk, 1):
                return False
        elif held:
            held_release(run, token)
        if not Result.objects.filter(run_id=run.pk, status__in=Result.IN_FLIGHT_STATUSES).exists():
            enqueue_finish(run.pk)  # nothing pending, nothing in flight: the run is done
    return False


def result_save_ahead(
    result: Result | None, token: str, outcome: Outcome | None, *, running: Result, claim: bool = True
) -> list[Result]:
    """In the lane's thread: save `result` (when given) while the lane runs `running`,
    and (`claim`) claim the run's next pending case for the lane unless it holds one
    already; the lane's cases claimed ahead, oldest first. One transaction, under the run
    row's lock."""
    with transaction.atomic():
        run = Run.objects.select_for_update().only("id", "status", "concurrency").get(pk=running.run_id)
        if result is not None and outcome is not None:
            saved = outcome_write(run, result, token, outcome)
        else:  # nothing to save: the lane must still hold its case in hand (a cut-off worker's may not)
            saved = Result.objects.filter(pk=running.pk, token=token, status=Result.Status.RUNNING).exists()
        held = Result.objects.filter(run_id=run.pk, token=token, status=Result.Status.RUNNING).exclude(pk=running.pk)
        # Not when the lane's own case was taken from it (re-queued by the reaper: this lane
        # was thought lost, and its cases went back to the window), nor for the run's last
        # cases: a case held behind a slow one would wait while other lanes stand idle.
        if claim and saved and run.is_active and not held.exists() and _pending_beyond(run.pk, run.concurrency):
            next_claim(run.pk, token, ahead=True)
    return list(held.select_related("case").order_by("id"))


def _pending_beyond(run_id: int, count: int) -> bool:
    """The run has more than `count` pending cases."""
    pending = Result.objects.filter(run_id=run_id, status=Result.Status.PENDING).order_by("id")
    return pending.values_list("id", flat=True)[count : count + 1].exists()


def outcome_write(run: Run, result: Result, token: str, outcome: Outcome) -> bool:
    """Write the outcome if the lane still holds the case, and add it to the run's counters
    (the caller holds the run row's lock); False when the case is no longer the lane's."""
    saved = Result.objects.filter(pk=result.pk, token=token, status=Result.Status.RUNNING).update(
        **_result_fields(outcome), finished_at=timezone.now()
    )
    if not saved:
        return False
    Run.objects.filter(pk=run.pk).update(**_run_counters(result, outcome))
    budget.run_stop_at_cap(run, cap=result.run.budget_cap)  # reached: Stopped, the slot is not handed on
    return True


def _result_fields(outcome: Outcome) -> dict[str, Any]:
    """The Result row's fields, from the outcome."""
    copied = (
        "status", "question", "actual_answer", "conversation", "tool_calls", "retrieval_context", "trace_id",
        "score", "verdict", "reasoning", "error", "error_kind", "cut", "scorers", "judge_samples", "judge_stable",
        "duration_ms", "agent_tokens", "judge_tokens", "simulator_tokens", "scenario",
    )  # fmt: skip
    fields = {name: getattr(outcome, name) for name in copied}
    for name in ("agent_cost", "judge_cost", "simulator_cost"):
        fields[name] = money(getattr(outcome, name))
    return fields


def _run_counters(result: Result, outcome: Outcome) -> dict[str, Any]:
    """What the outcome adds to its run's counters."""
    counters: dict[str, Any] = {"completed": F("completed") + 1}
    for name in ("agent_tokens", "judge_tokens", "simulator_tokens"):
        counters[name] = F(name) + getattr(outcome, name)
    for name in ("agent_cost", "judge_cost", "simulator_cost"):
        counters[name] = F(name) + money(getattr(outcome, name))
    if result.variant == 0:  # smoke variants have their own figure (robustness)
        field = {"pass": "passed", "fail": "failed", "error": "errored", "abstained": "abstained"}[outcome.status]
        counters[field] = F(field) + 1
        if outcome.score is not None:
            counters["score_total"] = F("score_total") + outcome.score
    return counters


def _held(run_id: int, token: str) -> list[int]:
    """The lane's cases claimed ahead and not started (its case in hand is saved already)."""
    return list(
        Result.objects.filter(run_id=run_id, token=token, status=Result.Status.RUNNING)
        .order_by("id")
        .values_list("id", flat=True)
    )


def _hand_on(held: list[int]) -> None:
    """The lane ends holding cases it never started: the first goes out as the lane's one
    message (its slot), any others back to pending; neither counts as an attempt."""
    Result.objects.filter(pk__in=held).update(attempts=NOT_ASKED_ATTEMPTS)
    queue(held[:1], status=Result.Status.RUNNING)
    Result.objects.filter(pk__in=held[1:], status=Result.Status.RUNNING).update(
        status=Result.Status.PENDING, token="", claimed_by="", claimed_ahead=False
    )


def held_release(run: Run, token: str) -> None:
    """Cases a lane of a run that is no longer active holds unstarted: not run, like the
    run's other cases that had not started (the caller holds the run row's lock)."""
    held = Result.objects.filter(run_id=run.pk, token=token, status=Result.Status.RUNNING)
    if run.status == Run.Status.FAILED:
        error = f"Not run: {run.error}"  # as run_fail words it
    elif run.stop_reason == Run.BUDGET_REACHED:
        error = budget.NOT_RUN
    else:
        error = STOPPED_NOT_RUN
    held.update(status=Result.Status.SKIPPED, error=error, claimed_ahead=False)

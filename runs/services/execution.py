"""Executing a run's cases: claim one, keep the claim fresh, run it, save it with the counters, go on.

A case task is a lane of the run's window: after saving its case it claims the run's next
pending case in the same transaction (under the run row's lock, so the window is never
overfilled) and runs it in the same process, without a round trip through Redis. The lane
keeps its token for every case it claims, so the task's message, redelivered after its pool
child died, takes up whichever case the lane was running. After EVALSITE_RUN_LANE_SECONDS
a lane hands its slot on through a new task message instead, so a case never starts late
in a task's time limit, and at once when its worker begins a warm shutdown.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import DatabaseError, connections, transaction
from django.db.models import F, QuerySet, Subquery
from django.utils import timezone

from agents.adapters import AgentConfigError
from agents.models import AgentVersion
from evalsite import workers
from runs import engine
from runs.models import Result, Run
from runs.services import budget
from runs.services.dispatch import enqueue_finish, money, queue_pending
from runs.services.lifecycle import run_fail

logger = logging.getLogger(__name__)

# A case whose worker dies this many times (OOM, kill -9) becomes an Error instead of looping forever.
MAX_CASE_ATTEMPTS = 3


def run_execute_case(*, result_id: int, token: str, retry: bool = False) -> None:
    """Claim, run and save the message's case, then the run's next pending cases (a lane).

    A message whose token is stale finds nothing to do. `retry` is the task retrying its own
    database error: the claim is taken up again without counting an attempt, since
    `attempts` counts workers lost on this case.
    """
    hand_on_at = time.monotonic() + settings.EVALSITE_RUN_LANE_SECONDS
    result = _result_claim(result_id, token, count_attempt=not retry)
    if result is None:
        return
    with _claim_heartbeat(result.run_id, token):
        while result is not None:
            result = _case_run(result, token, hand_on_at=hand_on_at)


def _case_run(result: Result, token: str, *, hand_on_at: float) -> Result | None:
    """Run one claimed case and save it; the lane's next claimed case, if it goes on."""
    if budget.claim_over_budget(result, token):
        return None
    run = result.run
    if result.attempts > 1:
        logger.warning("Result %s of run %s taken up again (attempt %d)", result.pk, run.pk, result.attempts)
    if run.status == Run.Status.PENDING:
        Run.objects.filter(pk=run.pk, status=Run.Status.PENDING).update(
            status=Run.Status.RUNNING, started_at=timezone.now()
        )
        run.status = Run.Status.RUNNING
    if result.attempts > MAX_CASE_ATTEMPTS:
        message = (
            f"Not scored: the worker running this case stopped {MAX_CASE_ATTEMPTS} times (killed or out of memory)."
        )
        outcome = engine.Outcome(status=Result.Status.ERROR, question=result.question, error=message)
    else:
        try:
            outcome = engine.execute(result, run, _version(run.agent_version_id))
        except AgentConfigError as error:
            run_fail(run_id=run.pk, message=error.message)
            return None
        except SoftTimeLimitExceeded:
            message = "The case took longer than the task time limit and was stopped."
            outcome = engine.Outcome(status=Result.Status.ERROR, question=result.question, error=message)
        except DatabaseError:
            raise  # the task retries database errors (a restarting database)
        except Exception:
            logger.exception("Case result=%s of run=%s failed unexpectedly", result.pk, run.pk)
            message = "An internal error stopped this case. The details are in the worker log."
            outcome = engine.Outcome(status=Result.Status.ERROR, question=result.question, error=message)
    # Decided as the case ends: past the lane's time, or when the worker has begun a warm
    # shutdown meanwhile, the next case goes out as a message instead (another worker's).
    chain = time.monotonic() < hand_on_at and not workers.shutting_down()
    if not _result_save(result, token, outcome, chain=chain):
        return None
    # The lane's next case, of the same run: what the engine reads of the run (its agent,
    # version, scoring) never changes, and it was active when the case was claimed.
    following = _claimed(Result.objects.filter(run_id=run.pk, token=token, status=Result.Status.RUNNING), run)
    if following is not None:
        following.run = run
    return following


def _result_claim(result_id: int, token: str, *, count_attempt: bool = True) -> Result | None:
    # Running with the same token is our own message coming back (a retry after a database
    # error, or a redelivery after the pool child died): take up the case its lane was on,
    # which is the message's own case or one the lane claimed after it.
    attempts = F("attempts") + 1 if count_attempt else F("attempts")
    lane = Result.objects.filter(
        run_id=Subquery(Result.objects.filter(pk=result_id).values("run_id")),
        token=token,
        status__in=Result.IN_FLIGHT_STATUSES,
    )
    claimed = lane.update(
        status=Result.Status.RUNNING, claimed_at=timezone.now(), attempts=attempts, claimed_by=workers.WORKER_ID
    )
    return _claimed(lane) if claimed else None


def _claimed(results: QuerySet[Result], run: Run | None = None) -> Result | None:
    """The lane's claimed case, with its run and agent unless the lane has them already."""
    related = ("case",) if run is not None else ("case", "run__agent")
    return results.select_related(*related).order_by("-id").first()


def _next_claim(run_id: int, token: str) -> bool:
    """Claim the run's next pending case for this lane (one statement); the caller holds the
    run row's lock, so no other lane or the reaper can take it meanwhile."""
    now = timezone.now()
    oldest = Result.objects.filter(run_id=run_id, status=Result.Status.PENDING).order_by("id").values("id")[:1]
    return bool(
        Result.objects.filter(pk=Subquery(oldest), status=Result.Status.PENDING).update(
            status=Result.Status.RUNNING,
            token=token,
            queued_at=now,
            claimed_at=now,
            attempts=F("attempts") + 1,
            claimed_by=workers.WORKER_ID,
        )
    )


@contextmanager
def _claim_heartbeat(run_id: int, token: str) -> Iterator[None]:
    """Keep the lane's claim fresh while it runs, so the reaper can tell a slow case from a
    dead worker: a claim not refreshed for EVALSITE_STALE_CLAIM_SECONDS belongs to a worker
    that was killed (kill -9, OOM) and is re-queued; a live one beats 4 times in that span."""
    interval = max(1.0, settings.EVALSITE_STALE_CLAIM_SECONDS / 4)
    done = threading.Event()

    def beat() -> None:
        try:
            while not done.wait(interval):
                Result.objects.filter(run_id=run_id, token=token, status=Result.Status.RUNNING).update(
                    claimed_at=timezone.now()
                )
        except Exception:  # a missed beat only risks a needless re-queue, never a wrong result
            logger.warning("Heartbeat of run %s lane %s failed", run_id, token, exc_info=True)
        finally:
            connections.close_all()  # this thread's own connection

    thread = threading.Thread(target=beat, name=f"claim-heartbeat-{run_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=30)


@functools.lru_cache(maxsize=32)
def _version(version_id: int) -> AgentVersion:
    # Versions are immutable, so each worker process loads one once.
    return AgentVersion.objects.select_related("agent").get(pk=version_id)


def _result_save(result: Result, token: str, outcome: engine.Outcome, *, chain: bool = False) -> bool:
    """Save the outcome, bump the run's counters and refill the window, all in one transaction.

    The freed slot goes to the run's next pending case: claimed here for this lane when
    `chain` (True is returned: the lane goes on with it), else queued for a new task message."""
    with transaction.atomic():
        run = Run.objects.select_for_update().only("id", "status", "concurrency").get(pk=result.run_id)
        saved = Result.objects.filter(pk=result.pk, token=token, status=Result.Status.RUNNING).update(
            status=outcome.status,
            question=outcome.question,
            actual_answer=outcome.actual_answer,
            conversation=outcome.conversation,
            tool_calls=outcome.tool_calls,
            retrieval_context=outcome.retrieval_context,
            trace_id=outcome.trace_id,
            score=outcome.score,
            verdict=outcome.verdict,
            reasoning=outcome.reasoning,
            error=outcome.error,
            scorers=outcome.scorers,
            judge_samples=outcome.judge_samples,
            judge_stable=outcome.judge_stable,
            duration_ms=outcome.duration_ms,
            agent_tokens=outcome.agent_tokens,
            judge_tokens=outcome.judge_tokens,
            agent_cost=money(outcome.agent_cost),
            judge_cost=money(outcome.judge_cost),
            simulator_tokens=outcome.simulator_tokens,
            simulator_cost=money(outcome.simulator_cost),
            scenario=outcome.scenario,
            finished_at=timezone.now(),
        )
        if not saved:
            return False  # re-queued by the reaper or skipped by Stop meanwhile: the other copy counts
        counters: dict[str, Any] = {
            "completed": F("completed") + 1,
            "agent_tokens": F("agent_tokens") + outcome.agent_tokens,
            "judge_tokens": F("judge_tokens") + outcome.judge_tokens,
            "agent_cost": F("agent_cost") + money(outcome.agent_cost),
            "judge_cost": F("judge_cost") + money(outcome.judge_cost),
            "simulator_tokens": F("simulator_tokens") + outcome.simulator_tokens,
            "simulator_cost": F("simulator_cost") + money(outcome.simulator_cost),
        }
        if result.variant == 0:  # smoke variants have their own figure (robustness)
            field = {"pass": "passed", "fail": "failed", "error": "errored"}[outcome.status]
            counters[field] = F(field) + 1
            if outcome.score is not None:
                counters["score_total"] = F("score_total") + outcome.score
        Run.objects.filter(pk=run.pk).update(**counters)
        budget.run_stop_at_cap(run, cap=result.run.budget_cap)  # reached: Stopped, the slot is not handed on
        # This case freed one slot: hand it to the next pending case. One for one keeps the
        # window full without counting it (the reaper counts, under the same lock).
        if run.is_active:
            if chain and _next_claim(run.pk, token):
                return True
            if not chain and queue_pending(run.pk, 1):
                return False
        if not Result.objects.filter(run_id=run.pk, status__in=Result.IN_FLIGHT_STATUSES).exists():
            enqueue_finish(run.pk)  # nothing pending, nothing in flight: the run is done
    return False

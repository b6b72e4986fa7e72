"""Executing a run's cases: a case attempt's life, in order, and the lane that runs one after another.

A case task is a lane of the run's window (runs/engine/lane.py): after saving its case it claims the run's
next pending case in the same transaction (under the run row's lock, so the window is never overfilled) and
runs it in the same process, without a round trip through Redis. The lane keeps its token for every case it
claims, so the task's message, redelivered after its pool child died, takes up whichever case the lane was
running. After EVALSITE_RUN_LANE_SECONDS a lane hands its slot on through a new task message instead if
another task's message waits for a worker (other runs get their turn), and after LANE_MAX_TURNS of them in
any case, so a case never starts late in a task's time limit; at once when its worker begins a warm shutdown.

`_case_attempt` tells one attempt: the budget, the claim still held, the run started, the next case claimed
ahead, ask the agent, the claim still held, judge the answer, save, and the lane's next case. Claiming ahead
and saving behind (off the path between two model calls) are the lane's: runs/engine/lane.py.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Collection, Iterator
from contextlib import contextmanager

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import DatabaseError, connections, transaction
from django.utils import timezone

from agents.adapters import AgentConfigError
from agents.models import AgentVersion
from evalsite import workers
from evalsite.llm import client as llm_client
from runs.engine import budget
from runs.engine import case as engine
from runs.engine.claims import result_claim, result_take_up
from runs.engine.dispatch import run_fail
from runs.engine.lane import Lane, Turn, lane_for
from runs.models import Result, Run

logger = logging.getLogger(__name__)

# A case whose worker dies this many times (OOM, kill -9) becomes an Error instead of looping forever.
MAX_CASE_ATTEMPTS = 3
TOO_MANY_ATTEMPTS = (
    f"Not scored: the worker running this case stopped {MAX_CASE_ATTEMPTS} times (killed or out of memory)."
)
TIME_LIMIT = "The case took longer than the task time limit and was stopped."
INTERNAL_ERROR = "An internal error stopped this case. The details are in the worker log."


def run_execute_case(
    *,
    result_id: int,
    token: str,
    retry: bool = False,
    asked: Collection[int] = (),
    progress: set[int] | None = None,
) -> None:
    """Claim, run and save the message's case, then the run's next pending cases (a lane).

    A message whose token is stale finds nothing to do. `retry` is the task retrying its own
    database error: an attempt is counted only for the cases its earlier try asked the
    agent about (`asked`, which the task kept from that try's `progress`; runs/engine/claims.py).
    """
    turn = Turn(progress)
    turn.asked.update(asked)  # asked and not counted yet: carried on if the claim fails too
    claimed = result_claim(result_id, token, count_attempt=not retry, asked=asked)
    turn.asked.clear()
    if claimed is None:
        return
    first, taken_up = claimed
    result: Result | None = first
    with _claim_heartbeat(first.run_id, token), lane_for(first, token, untold=taken_up - 1) as lane:
        while result is not None:
            result = _case_attempt(result, token, turn=turn, lane=lane)


def _case_attempt(result: Result, token: str, *, turn: Turn, lane: Lane) -> Result | None:
    """One attempt at a claimed case, in order; the lane's next claimed case, if it goes on."""
    if budget.claim_over_budget(result, token):
        return None  # the run reached its cost cap: the case is not run
    if not _claim_held(result, token):
        return None  # taken back while this worker was out of reach: another worker runs it
    if result.claimed_ahead and not result_take_up(result, token):
        return None  # claimed ahead, then taken back before the lane got to it
    run = _run_started(result)
    lane.case_starts(result)  # claims the run's next case meanwhile, when that pays
    # Each model call of the case asks again just before it goes out (after any wait).
    with llm_client.guard_calls(functools.partial(_claim_held, result, token)):
        outcome = _ask(result, run, turn=turn)
        if outcome is None:
            return None  # the agent version cannot run at all: the run failed
        if not _claim_held(result, token):
            return None
        outcome = _judge(outcome, result, run)
    following = lane.case_ends(result, outcome, run=run, chain=_lane_goes_on(turn))  # saves it
    if following is not None:
        following.run = run
    return following


def _claim_held(result: Result, token: str) -> bool:
    """Whether the lane still holds the case, before a model call: asked of the database only
    when the worker's lease is in doubt (evalsite/workers.py), as after a host was cut off from
    the network long enough for the reaper to hand its claims to other workers. A case it gave
    on is not asked about again here: its run's window counts the other worker's calls."""
    if workers.claim_forfeit(result.claimed_at):
        return False  # made before the worker lost its broker connection: Celery is ending the task
    if not workers.lease_doubtful(result.claimed_at):
        return True
    # Under the run row's lock, as the reaper takes claims back: a pass that listed this claim
    # as lost has handed it on by the time the lock is ours; one after this sees it refreshed.
    with transaction.atomic():
        Run.objects.select_for_update().filter(pk=result.run_id).values_list("pk").first()
        now = timezone.now()
        held = Result.objects.filter(pk=result.pk, token=token, status=Result.Status.RUNNING).update(claimed_at=now)
    if not held:
        logger.warning("Result %s of run %s was taken back while its worker was out of reach", result.pk, result.run_id)
        return False
    result.claimed_at = now
    return True


def _run_started(result: Result) -> Run:
    """The case's run, Running from its first case on."""
    run = result.run
    if result.attempts > 1:
        logger.warning("Result %s of run %s taken up again (attempt %d)", result.pk, run.pk, result.attempts)
    if run.status == Run.Status.PENDING:
        Run.objects.filter(pk=run.pk, status=Run.Status.PENDING).update(
            status=Run.Status.RUNNING, started_at=timezone.now()
        )
        run.status = Run.Status.RUNNING
    return run


def _ask(result: Result, run: Run, *, turn: Turn) -> engine.Outcome | None:
    """Ask the agent (every turn, or the simulated user's conversation); None when the agent
    version cannot run at all, which fails the run."""
    if result.attempts > MAX_CASE_ATTEMPTS:
        return _error(result, TOO_MANY_ATTEMPTS)
    turn.asked.add(result.pk)
    try:
        return engine.ask(result, run, _version(run.agent_version_id))
    except AgentConfigError as error:
        run_fail(run_id=run.pk, message=error.message)
        return None
    except Exception as error:
        return _failed(error, result, run)


def _judge(outcome: engine.Outcome, result: Result, run: Run) -> engine.Outcome:
    """Score the agent's answer (runs/engine/case.py says which answers the judge sees)."""
    try:
        engine.judge(outcome, result, run)
    except Exception as error:
        return _failed(error, result, run)
    return outcome


def _failed(error: Exception, result: Result, run: Run) -> engine.Outcome:
    """The case's Error for an exception while it ran; database errors go up, and the task
    retries them (a restarting database)."""
    if isinstance(error, DatabaseError):
        raise error
    if isinstance(error, SoftTimeLimitExceeded):
        return _error(result, TIME_LIMIT)
    if isinstance(error, llm_client.CallRefused):
        return _error(result, str(error))  # not saved: its claim went to another worker
    logger.exception("Case result=%s of run=%s failed unexpectedly", result.pk, run.pk)
    return _error(result, INTERNAL_ERROR)


def _error(result: Result, message: str) -> engine.Outcome:
    return engine.Outcome(status=Result.Status.ERROR, question=result.question, error=message)


def _lane_goes_on(turn: Turn) -> bool:
    """Decided as the case ends: at the end of the lane's turn, or when the worker has begun
    a warm shutdown meanwhile, the next case goes out as a message instead (another worker's)."""
    return not workers.shutting_down() and not turn.over()


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

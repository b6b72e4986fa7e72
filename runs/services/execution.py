"""Executing a run's cases: claim one, keep the claim fresh, run it, save it with the counters, go on.

A case task is a lane of the run's window: after saving its case it claims the run's next
pending case in the same transaction (under the run row's lock, so the window is never
overfilled) and runs it in the same process, without a round trip through Redis. The lane
keeps its token for every case it claims, so the task's message, redelivered after its pool
child died, takes up whichever case the lane was running. After EVALSITE_RUN_LANE_SECONDS
a lane hands its slot on through a new task message instead if another task's message
waits for a worker (other runs get their turn), and after LANE_MAX_TURNS of them in any
case, so a case never starts late in a task's time limit; at once when its worker begins a
warm shutdown.

A lane claims its next case ahead (EVALSITE_RUN_CLAIM_AHEAD): while a case calls its
model, a thread of the lane claims the run's next pending case, and once the case ends the
same thread saves it (and claims the one after) while the lane already calls the model for
the next one. Saving and reading the next case are then off the path between two model
calls. The window counts lanes (tokens), not claimed rows, so the case a lane holds ahead
takes no slot; a lane that ends hands back what it holds, and the reaper re-queues one case
per dead lane (its others go back to pending).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
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
from evalsite.enqueue import messages_waiting
from evalsite.llm import client as llm_client
from runs import engine
from runs.models import Result, Run
from runs.services import budget
from runs.services.dispatch import enqueue_finish, fill_window, money, queue, queue_pending
from runs.services.lifecycle import STOPPED_NOT_RUN, run_fail

logger = logging.getLogger(__name__)

# A case whose worker dies this many times (OOM, kill -9) becomes an Error instead of looping forever.
MAX_CASE_ATTEMPTS = 3


def run_execute_case(*, result_id: int, token: str, retry: bool = False) -> None:
    """Claim, run and save the message's case, then the run's next pending cases (a lane).

    A message whose token is stale finds nothing to do. `retry` is the task retrying its own
    database error: the claim is taken up again without counting an attempt, since
    `attempts` counts workers lost on this case.
    """
    turn = Turn()
    claimed = _result_claim(result_id, token, count_attempt=not retry)
    if claimed is None:
        return
    first, taken_up = claimed
    result: Result | None = first
    with _claim_heartbeat(first.run_id, token), _lane(first, token, untold=taken_up - 1) as lane:
        while result is not None:
            result = _case_run(result, token, turn=turn, lane=lane)


# A lane that nobody waits for keeps its slot this many turns of EVALSITE_RUN_LANE_SECONDS
# at most, so that no case starts late in its task's time limit (900 s by default).
LANE_MAX_TURNS = 6


class Turn:
    """A lane's turn: it hands its slot on through the queue once EVALSITE_RUN_LANE_SECONDS
    are up, so other runs get theirs, but only if a task message waits for a worker. When
    none does (the broker's lists are empty: every other lane and task has a process),
    handing on would only cost the lane a round trip through Redis (40-70 ms between two of
    its cases), so it keeps the slot for another turn, up to LANE_MAX_TURNS."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.ends = self.started + settings.EVALSITE_RUN_LANE_SECONDS

    def over(self) -> bool:
        now = time.monotonic()
        if now < self.ends:
            return False
        seconds = settings.EVALSITE_RUN_LANE_SECONDS
        if seconds <= 0 or now - self.started >= seconds * LANE_MAX_TURNS:
            return True
        if messages_waiting() != 0:  # some wait, or the broker can't tell: hand on
            return True
        self.ends = now + seconds
        return False


# Claiming ahead pays only while the work it takes off the lane's path (5-10 ms) hides
# behind a model call: a lane whose last case took less than this saves, then claims.
# Not lower: three lanes at 0 ms on a busy 2-core machine take 50-100 ms a case, all CPU.
CLAIM_AHEAD_MIN_CASE_MS = 150
# A lane's next request goes out 5-10 ms after its case ends (litellm builds it); one that
# does not go through our OpenAI client (another provider's SDK, an http agent) lets the
# save behind it start after this long.
SAVE_BEHIND_WAIT = 0.05


class Lane:
    """A lane's thread for the database work off its path: claiming ahead, saving behind.

    Only one job is ever outstanding; `collect` waits for it (by then long done: it runs
    during a model call) and gives the lane's cases claimed ahead, oldest first. With
    model calls too quick to hide it (a fake model at 0 ms), the thread would only add
    its switching to the cases' CPU: the lane then stops claiming ahead."""

    def __init__(self, run: Run, token: str, *, untold: int = 0) -> None:
        self.token = token
        # Held cases it was not told of (a redelivery takes up all of the lane's); otherwise
        # it holds only what its own thread claimed, and `collect` tells.
        self.untold = untold
        # Claiming ahead needs a second connection that sees what this one committed: not
        # inside a transaction (a test's), and a run with a cost cap claims nothing before
        # the case in hand is priced.
        self.ahead = (
            settings.EVALSITE_RUN_CLAIM_AHEAD
            and settings.EVALSITE_RUN_LANE_SECONDS > 0
            and run.budget_cap is None
            and not transaction.get_connection().in_atomic_block
        )
        self.slow = True  # the last case took long enough to hide the thread's work (none yet)
        self._executor: ThreadPoolExecutor | None = None
        self._job: Future[list[Result]] | None = None
        self._job_args: tuple[Result | None, engine.Outcome | None, Result] | None = None
        self._sent = threading.Event()

    def claim_ahead(
        self, running: Result, *, save: Result | None = None, outcome: engine.Outcome | None = None
    ) -> None:
        """Meanwhile: save `save` (if given) and claim the case after `running`.

        A save waits until `running`'s first model request has gone out (or SAVE_BEHIND_WAIT,
        for a request that does not go through our OpenAI client, or no request): until
        then the lane is building that request, and the save would share the interpreter with
        it."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"lane-{running.run_id}")
        self._job_args = (save, outcome, running)
        self._sent.clear()
        if save is not None:
            llm_client.on_request_sent(self._sent.set)
        else:
            self._sent.set()
        self._job = self._executor.submit(self._save_ahead, save, outcome, running, self.slow)

    def _save_ahead(
        self, save: Result | None, outcome: engine.Outcome | None, running: Result, claim: bool
    ) -> list[Result]:
        self._sent.wait(SAVE_BEHIND_WAIT)
        return _result_save_ahead(save, self.token, outcome, running=running, claim=claim)

    @property
    def idle(self) -> bool:
        return self._job is None

    def collect(self) -> list[Result]:
        """The outstanding job's outcome: the cases the lane holds ahead (none if no job)."""
        job, args = self._job, self._job_args
        self._job = self._job_args = None
        if job is None or args is None:
            return []
        llm_client.on_request_sent(None)  # the case ended without one: save now
        self._sent.set()
        try:
            held = job.result()
        except DatabaseError:
            # Once more, here: a second failure is the task's own retry of the lane.
            logger.warning("Saving ahead in lane %s failed; trying again in the lane", self.token, exc_info=True)
            save, outcome, running = args
            held = _result_save_ahead(save, self.token, outcome, running=running, claim=self.slow)
        self.untold = 0  # the job listed every case the lane holds
        return held

    def close(self) -> None:
        llm_client.on_request_sent(None)  # not left to this thread's next task
        self._sent.set()
        if self._executor is not None:
            self._executor.submit(connections.close_all)  # the thread's own connection
            self._executor.shutdown(wait=True)


@contextmanager
def _lane(result: Result, token: str, *, untold: int) -> Iterator[Lane]:
    lane = Lane(result.run, token, untold=untold)
    try:
        yield lane
        if lane.ahead:
            lane.collect()
            _lane_end(result.run_id, token)
    finally:
        lane.close()


def _case_run(result: Result, token: str, *, turn: Turn, lane: Lane | None = None) -> Result | None:
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
    ahead = lane is not None and lane.ahead
    if ahead and lane is not None and lane.idle and lane.slow:
        lane.claim_ahead(result)  # claim the next case while this one runs
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
    # Decided as the case ends: at the end of the lane's turn, or when the worker has begun
    # a warm shutdown meanwhile, the next case goes out as a message instead (another worker's).
    chain = not workers.shutting_down() and not turn.over()
    held = lane.collect() if lane is not None else []
    if lane is not None:
        lane.slow = outcome.duration_ms >= CLAIM_AHEAD_MIN_CASE_MS
    if chain and held and lane is not None:
        # The next case is claimed already: call its model now, and save this one meanwhile.
        following: Result | None = held[0]
        lane.claim_ahead(held[0], save=result, outcome=outcome)
        if not Run.objects.filter(pk=run.pk, status__in=Run.ACTIVE_STATUSES).exists():
            return None  # stopped meanwhile: no new case starts (the lane's end hands back what it holds)
    else:
        untold = lane.untold if lane is not None else 0  # held cases a redelivery took up
        if not _result_save(result, token, outcome, chain=chain, ahead=ahead and (bool(held) or untold > 0)):
            return None
        if lane is not None and untold:
            lane.untold -= 1  # the save went on with the oldest of them
        # The lane's next case, of the same run: what the engine reads of the run (its agent,
        # version, scoring) never changes, and it was active when the case was claimed.
        following = _claimed(Result.objects.filter(run_id=run.pk, token=token, status=Result.Status.RUNNING), run)
    if following is not None:
        following.run = run
    return following


def _result_claim(result_id: int, token: str, *, count_attempt: bool = True) -> tuple[Result, int] | None:
    """The message's case, claimed, and how many of its lane's cases were taken up: with the
    same token it is our own message coming back (a retry after a database error, or a
    redelivery after the pool child died), which takes up the case its lane was on (its
    own or one the lane claimed after it) and any the lane had claimed ahead."""
    attempts = F("attempts") + 1 if count_attempt else F("attempts")
    lane = Result.objects.filter(
        run_id=Subquery(Result.objects.filter(pk=result_id).values("run_id")),
        token=token,
        status__in=Result.IN_FLIGHT_STATUSES,
    )
    claimed = lane.update(
        status=Result.Status.RUNNING, claimed_at=timezone.now(), attempts=attempts, claimed_by=workers.WORKER_ID
    )
    result = _claimed(lane) if claimed else None
    return (result, claimed) if result is not None else None


def _claimed(results: QuerySet[Result], run: Run | None = None) -> Result | None:
    """The lane's claimed case, with its run and agent unless the lane has them already."""
    related = ("case",) if run is not None else ("case", "run__agent")
    return results.select_related(*related).order_by("id").first()


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


def _result_save(
    result: Result, token: str, outcome: engine.Outcome, *, chain: bool = False, ahead: bool = False
) -> bool:
    """Save the outcome, bump the run's counters and refill the window, all in one transaction.

    The freed slot goes to the run's next pending case: claimed here for this lane when
    `chain` (True is returned: the lane goes on with it), else queued for a new task message.
    `ahead`: the lane may hold cases claimed ahead (it was told of one it did not go on with,
    or took some up when its message came back): listed here, it goes on with the oldest or
    hands them on (one message for the lane, as without them)."""
    with transaction.atomic():
        run = Run.objects.select_for_update().only("id", "status", "concurrency").get(pk=result.run_id)
        if not _outcome_write(run, result, token, outcome):
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
            if chain and _next_claim(run.pk, token):
                return True
            if not chain and queue_pending(run.pk, 1):
                return False
        elif held:
            _held_release(run, token)
        if not Result.objects.filter(run_id=run.pk, status__in=Result.IN_FLIGHT_STATUSES).exists():
            enqueue_finish(run.pk)  # nothing pending, nothing in flight: the run is done
    return False


def _result_save_ahead(
    result: Result | None, token: str, outcome: engine.Outcome | None, *, running: Result, claim: bool = True
) -> list[Result]:
    """In the lane's thread: save `result` (when given) while the lane runs `running`,
    and (`claim`) claim the run's next pending case for the lane unless it holds one
    already; the lane's cases claimed ahead, oldest first. One transaction, under the run
    row's lock."""
    with transaction.atomic():
        run = Run.objects.select_for_update().only("id", "status", "concurrency").get(pk=running.run_id)
        saved = True
        if result is not None and outcome is not None:
            saved = _outcome_write(run, result, token, outcome)
        held = Result.objects.filter(run_id=run.pk, token=token, status=Result.Status.RUNNING).exclude(pk=running.pk)
        # Not when the lane's own case was taken from it (re-queued by the reaper: this lane
        # was thought lost, and its cases went back to the window), nor for the run's last
        # cases: a case held behind a slow one would wait while other lanes stand idle.
        if claim and saved and run.is_active and not held.exists() and _pending_beyond(run.pk, run.concurrency):
            _next_claim(run.pk, token)
    return list(held.select_related("case").order_by("id"))


def _pending_beyond(run_id: int, count: int) -> bool:
    """The run has more than `count` pending cases."""
    pending = Result.objects.filter(run_id=run_id, status=Result.Status.PENDING).order_by("id")
    return pending.values_list("id", flat=True)[count : count + 1].exists()


def _outcome_write(run: Run, result: Result, token: str, outcome: engine.Outcome) -> bool:
    """Write the outcome if the lane still holds the case, and add it to the run's counters
    (the caller holds the run row's lock); False when the case is no longer the lane's."""
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
        return False
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
    return True


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
    Result.objects.filter(pk__in=held).update(attempts=F("attempts") - 1)
    queue(held[:1], status=Result.Status.RUNNING)
    Result.objects.filter(pk__in=held[1:], status=Result.Status.RUNNING).update(
        status=Result.Status.PENDING, token="", claimed_by=""
    )


def _held_release(run: Run, token: str) -> None:
    """Cases a lane of a run that is no longer active holds unstarted: not run, like the
    run's other cases that had not started (the caller holds the run row's lock)."""
    held = Result.objects.filter(run_id=run.pk, token=token, status=Result.Status.RUNNING)
    if run.status == Run.Status.FAILED:
        error = f"Not run: {run.error}"  # as run_fail words it
    elif run.stop_reason == Run.BUDGET_REACHED:
        error = budget.NOT_RUN
    else:
        error = STOPPED_NOT_RUN
    held.update(status=Result.Status.SKIPPED, error=error)


def _lane_end(run_id: int, token: str) -> None:
    """A lane that claimed ahead ends: what it still holds unstarted goes back (pending, for
    the window to refill, or not run when its run is no longer active)."""
    if not Result.objects.filter(run_id=run_id, token=token, status=Result.Status.RUNNING).exists():
        return
    with transaction.atomic():
        run = Run.objects.select_for_update().only("id", "status", "concurrency", "stop_reason", "error").get(pk=run_id)
        held = Result.objects.filter(run_id=run_id, token=token, status=Result.Status.RUNNING)
        if run.is_active:
            held.update(status=Result.Status.PENDING, token="", claimed_by="", attempts=F("attempts") - 1)
            fill_window(run)
            return
        _held_release(run, token)
        if not Result.objects.filter(run_id=run_id, status__in=Result.IN_FLIGHT_STATUSES).exists():
            enqueue_finish(run_id)

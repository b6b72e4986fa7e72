"""A lane of the run's window: one task's process running the run's cases one after another.

A lane's turn (`Turn`) says when it hands its slot on through the queue. Its database work off
the path between two model calls sits behind two calls (`Lane.case_starts`, `Lane.case_ends`):
while a case calls its model, a thread of the lane claims the run's next pending case
(EVALSITE_RUN_CLAIM_AHEAD); once the case ends the same thread saves it (and claims the one
after) while the lane already calls the model for the next one. The window counts lanes
(tokens), not claimed rows, so the case a lane holds ahead takes no slot; a lane that ends
hands back what it holds, and the reaper re-queues one case per dead lane (its others go back
to pending).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager

from django.conf import settings
from django.db import DatabaseError, connections, transaction

from evalsite.enqueue import messages_waiting
from evalsite.llm import client as llm_client
from runs.engine import saving
from runs.engine.case import Outcome
from runs.engine.claims import claimed_first
from runs.engine.dispatch import NOT_ASKED_ATTEMPTS, enqueue_finish, fill_window
from runs.models import Result, Run

logger = logging.getLogger(__name__)

# A lane that nobody waits for keeps its slot this many turns of EVALSITE_RUN_LANE_SECONDS
# at most, so that no case starts late in its task's time limit (900 s by default).
LANE_MAX_TURNS = 6


class Turn:
    """A lane's turn: it hands its slot on through the queue once EVALSITE_RUN_LANE_SECONDS
    are up, so other runs get theirs, but only if a task message waits for a worker. When
    none does (the broker's lists are empty: every other lane and task has a process),
    handing on would only cost the lane a round trip through Redis (40-70 ms between two of
    its cases), so it keeps the slot for another turn, up to LANE_MAX_TURNS."""

    def __init__(self, asked: set[int] | None = None) -> None:
        # The cases this lane asked the agent about and has not counted as an attempt.
        self.asked = asked if asked is not None else set()
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
        self._job_args: tuple[Result | None, Outcome | None, Result] | None = None
        self._sent = threading.Event()

    def case_starts(self, result: Result) -> None:
        """A case starts: claim the run's next case meanwhile, when claiming ahead pays."""
        if self.ahead and self.idle and self.slow:
            self.claim_ahead(result)

    def case_ends(self, result: Result, outcome: Outcome, *, run: Run, chain: bool) -> Result | None:
        """Save the ended case and give the lane's next one (None: the lane ends).

        With `chain` and a case claimed ahead, the lane goes on with that case at once and the
        save runs behind its first model call; otherwise the case is saved now, and the save
        claims the next case for the lane (`chain`) or hands the slot on."""
        held = self.collect()
        self.slow = outcome.duration_ms >= CLAIM_AHEAD_MIN_CASE_MS
        if chain and held:
            self.claim_ahead(held[0], save=result, outcome=outcome)
            if not Run.objects.filter(pk=run.pk, status__in=Run.ACTIVE_STATUSES).exists():
                return None  # stopped meanwhile: no new case starts (the lane's end hands back what it holds)
            return held[0]
        untold = self.untold  # held cases a redelivery took up
        ahead = self.ahead and (bool(held) or untold > 0)
        if not saving.result_save(result, self.token, outcome, chain=chain, ahead=ahead):
            return None
        if untold:
            self.untold -= 1  # the save went on with the oldest of them
        # The lane's next case, of the same run: what the engine reads of the run (its agent,
        # version, scoring) never changes, and it was active when the case was claimed.
        return claimed_first(Result.objects.filter(run_id=run.pk, token=self.token, status=Result.Status.RUNNING), run)

    def claim_ahead(self, running: Result, *, save: Result | None = None, outcome: Outcome | None = None) -> None:
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

    def _save_ahead(self, save: Result | None, outcome: Outcome | None, running: Result, claim: bool) -> list[Result]:
        self._sent.wait(SAVE_BEHIND_WAIT)
        return saving.result_save_ahead(save, self.token, outcome, running=running, claim=claim)

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
            held = saving.result_save_ahead(save, self.token, outcome, running=running, claim=self.slow)
        self.untold = 0  # the job listed every case the lane holds
        return held

    def close(self) -> None:
        llm_client.on_request_sent(None)  # not left to this thread's next task
        self._sent.set()
        if self._executor is not None:
            self._executor.submit(connections.close_all)  # the thread's own connection
            self._executor.shutdown(wait=True)


@contextmanager
def lane_for(result: Result, token: str, *, untold: int) -> Iterator[Lane]:
    lane = Lane(result.run, token, untold=untold)
    try:
        yield lane
        if lane.ahead:
            lane.collect()
            lane_end(result.run_id, token)
    finally:
        lane.close()


def lane_end(run_id: int, token: str) -> None:
    """A lane that claimed ahead ends: what it still holds unstarted goes back (pending, for
    the window to refill, or not run when its run is no longer active)."""
    if not Result.objects.filter(run_id=run_id, token=token, status=Result.Status.RUNNING).exists():
        return
    with transaction.atomic():
        run = Run.objects.select_for_update().only("id", "status", "concurrency", "stop_reason", "error").get(pk=run_id)
        held = Result.objects.filter(run_id=run_id, token=token, status=Result.Status.RUNNING)
        if run.is_active:
            held.update(
                status=Result.Status.PENDING, token="", claimed_by="", claimed_ahead=False, attempts=NOT_ASKED_ATTEMPTS
            )
            fill_window(run)
            return
        saving.held_release(run, token)
        if not Result.objects.filter(run_id=run_id, status__in=Result.IN_FLIGHT_STATUSES).exists():
            enqueue_finish(run_id)

"""kill -9 of the worker under `runstack` (make run), twice: its warm standby takes over at once
each time (no cold start), the run completes, and the cases it was running are taken up again
by its successor as soon as it consumes (issue 48), each live case asked only once."""

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest

from agents.models import Agent
from runs import services
from runs.models import Result, Run
from tests.runs.conftest import wait_for, wait_settled
from tests.worker import ROOT, worker_env

pytestmark = [pytest.mark.chaos, pytest.mark.worker]


class Stack:
    """`manage.py runstack` in its own session, on this test's database and Redis."""

    def __init__(self, redis_url: str) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        env = worker_env({"REDIS_URL": redis_url})  # the shipped reaper interval (conftest.py)
        self.log_path = Path(tempfile.mkdtemp(prefix="evalsite-runstack-")) / "runstack.log"
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "runstack", "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

    def read_log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def worker_pid(self, restarted: int = 0) -> int:
        pattern = r"worker restarted \(pid (\d+)" if restarted else r"worker started \(pid (\d+)\)"
        return int(re.findall(pattern, self.read_log())[-1])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self.log.close()


@pytest.fixture
def stack(transactional_db, own_redis, fake_llm, settings):  # fake_llm first: the stack inherits its settings
    stack = Stack(own_redis.url)
    try:
        wait_for(lambda: "Evalsite is running at" in stack.read_log(), timeout=180, what="the stack to start")
    except AssertionError:
        print(stack.read_log()[-6000:])
        stack.stop()
        raise
    yield stack
    stack.stop()
    assert "Stopped. No Evalsite process is left running." in stack.read_log()


def _kill_and_recover(stack, run, fake_llm, kill: int) -> tuple[set[int], float, float]:
    """kill -9 of the worker with a case in flight; (its cases in flight, seconds until its
    successor was ready, seconds until they were all scored again)."""
    passed = Result.objects.filter(run=run, status=Result.Status.PASS).count()
    wait_for(
        lambda: Result.objects.filter(run=run, status=Result.Status.PASS).count() >= passed + 2,
        timeout=120,
        what="2 more finished cases",
    )
    # The standby started once the worker consumed, warmed up beside it, and waits.
    wait_for(
        lambda: len(re.findall(r"standby: warmed up, waiting to take over \(pid (\d+)\)", stack.read_log())) >= kill,
        timeout=120,
        what=f"standby {kill} to be warm",
    )
    standby = int(re.findall(r"standby: warmed up, waiting to take over \(pid (\d+)\)", stack.read_log())[-1])
    wait_for(lambda: Result.objects.filter(run=run, status=Result.Status.RUNNING).exists(), what="a case in flight")
    ready_before = stack.read_log().count(" ready.")
    os.killpg(stack.worker_pid(restarted=kill - 1), signal.SIGKILL)  # the worker and its pool, as an OOM killer would
    killed = time.monotonic()
    in_flight = set(Result.objects.filter(run=run, status=Result.Status.RUNNING).values_list("pk", flat=True))
    ready_at: list[float] = []

    def recovered() -> bool:
        if not ready_at and stack.read_log().count(" ready.") > ready_before:
            ready_at.append(time.monotonic() - killed)
        return not Result.objects.filter(pk__in=in_flight, status__in=Result.IN_FLIGHT_STATUSES).exists()

    wait_for(recovered, timeout=120, interval=0.2, what="the killed worker's cases to be scored again")
    recovery = time.monotonic() - killed
    assert stack.worker_pid(restarted=kill) == standby  # the warm standby took over, not a cold start
    print(f"\nkill {kill}: {len(in_flight)} case(s) in flight, successor ready after "
          f"{ready_at[0] if ready_at else float('nan'):.1f} s, scored again after {recovery:.1f} s")  # fmt: skip
    return in_flight, (ready_at[0] if ready_at else recovery), recovery


def test_a_killed_worker_is_restarted_at_once_and_its_cases_go_to_its_successor(
    stack, fake_llm, make_dataset, alice, settings
):
    # At the shipped settings (conftest: beat's reaper interval, the heartbeat and its TTL, the
    # claims' timeout). Killed twice within seconds: each time the stack restarts it at
    # once (a worker that was consuming is not failing to start) and marks it ended, so
    # its cases need no TTL, and go to its successor as soon as it consumes.
    # Long enough (40 cases, 1 s a model call) for the second standby to warm up beside the
    # successor before the second kill.
    fake_llm.set_latency(1.0)
    dataset = make_dataset(40, kind=Agent.Kind.LLM)
    wait_for(lambda: "standby: warmed up" in stack.read_log(), timeout=120, what="the first standby to be warm")
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    in_flight: set[int] = set()
    for kill in (1, 2):
        hit, ready, recovery = _kill_and_recover(stack, run, fake_llm, kill)
        in_flight |= hit
        log = stack.read_log()
        assert re.search(
            rf"worker \(pid \d+\) exited unexpectedly: killed by SIGKILL .*; restarting it from its warm standby "
            rf"\(pid \d+\) at once \(restart {kill}\)",
            log,
        )
        assert "its warm standby took over." in log
        # Printed, not held to seconds (2 shared cores): what is checked is that the successor
        # did not wait out the claims' timeout (120 s) once it consumed.
        assert recovery - ready < settings.EVALSITE_STALE_CLAIM_SECONDS / 2
    run = wait_settled(run, timeout=60)  # not the 120 s stale-queue timeout: nothing waits it out

    assert stack.process.poll() is None  # web, beat and Redis stayed up; the stack did not stop
    wait_for(lambda: stack.read_log().count("standby started (pid") == 3, what="a third standby, after the second kill")
    assert run.status == Run.Status.COMPLETED
    results = list(Result.objects.filter(run=run))
    assert len(results) == 40 and set(Counter((r.case_id, r.repeat, r.variant) for r in results).values()) == {1}
    assert (run.completed, run.passed) == (40, 40)
    asked = Counter(r.trace.get("case") for r in fake_llm.requests if r.task == "agent")
    for result in results:
        if result.pk in in_flight:
            # Taken back because its worker was lost (not a claim left to time out), counted as
            # the agent saw it: asked once more at most per kill, never uncounted.
            assert asked[str(result.pk)] <= result.attempts <= 3, (result.pk, asked[str(result.pk)], result.attempts)
            assert len(result.repeats) == result.attempts - 1, result.repeats
            assert {entry["cause"] for entry in result.repeats} <= {"worker_lost"}, result.repeats
        else:  # no live case twice
            assert asked[str(result.pk)] == 1 and result.attempts == 1, (result.pk, asked[str(result.pk)])

"""kill -9 of the worker under `runstack` (make run): it is restarted, the run completes, and
the cases it was running are taken up again in under 30 s, each live case asked only once."""

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
        env = worker_env({"REDIS_URL": redis_url})
        env.pop("EVALSITE_REAPER_INTERVAL", None)  # the shipped reaper interval, not the suite's faster one
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


def test_a_killed_worker_is_restarted_and_its_cases_recover_in_under_30_s(stack, fake_llm, make_dataset, alice):
    fake_llm.set_latency(0.5)
    dataset = make_dataset(12, kind=Agent.Kind.LLM)
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    wait_for(
        lambda: Result.objects.filter(run=run, status=Result.Status.PASS).count() >= 3,
        timeout=120,
        what="3 finished cases",
    )
    wait_for(lambda: Result.objects.filter(run=run, status=Result.Status.RUNNING).exists(), what="a case in flight")

    os.killpg(stack.worker_pid(), signal.SIGKILL)  # the worker and its pool children, as an OOM killer would
    killed = time.monotonic()
    in_flight = set(Result.objects.filter(run=run, status=Result.Status.RUNNING).values_list("pk", flat=True))
    asked_before = Counter(r.trace.get("case") for r in fake_llm.requests if r.task == "agent")

    def recovered() -> bool:
        return not Result.objects.filter(pk__in=in_flight, status__in=Result.IN_FLIGHT_STATUSES).exists()

    wait_for(recovered, timeout=120, interval=0.2, what="the killed worker's cases to be scored again")
    recovery = time.monotonic() - killed
    run = wait_settled(run, timeout=60)  # not the 120 s stale-queue timeout: nothing waits it out
    completed = time.monotonic() - killed
    log = stack.read_log()
    print(
        f"\nkill -9 of the worker under runstack: {len(in_flight)} case(s) in flight recovered in {recovery:.1f} s; "
        f"run completed {completed:.1f} s after the kill"
    )

    assert re.search(r"worker \(pid \d+\) exited unexpectedly: killed by SIGKILL .*; restarting it in 1 s", log)
    assert "worker restarted (pid" in log
    assert stack.process.poll() is None  # web, beat and Redis stayed up; the stack did not stop
    assert recovery < 30
    assert run.status == Run.Status.COMPLETED
    results = list(Result.objects.filter(run=run))
    assert len(results) == 12 and set(Counter((r.case_id, r.repeat, r.variant) for r in results).values()) == {1}
    assert (run.completed, run.passed) == (12, 12)
    asked = Counter(r.trace.get("case") for r in fake_llm.requests if r.task == "agent")
    for result in results:
        # Only a case the dead worker was running is asked again (once); no live case twice.
        again = asked[str(result.pk)] - asked_before[str(result.pk)]
        if result.pk in in_flight:
            # Its attempts say what the agent saw: a case the lane had only claimed ahead was
            # never asked before the kill (1); one it was running was (2), shown as a repeat.
            # One claimed and cut off before its request counts 2 for 1 call, never fewer.
            assert asked[str(result.pk)] <= result.attempts <= 2, (result.pk, asked[str(result.pk)], result.attempts)
            assert len(result.repeats) == result.attempts - 1, result.repeats
        else:
            assert asked[str(result.pk)] == 1 and result.attempts == 1, (result.pk, again)

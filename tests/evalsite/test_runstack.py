"""runstack's supervision: a service that exits on its own is restarted with backoff, the cause logged.

The whole stack under kill -9 is tests/chaos/test_runstack_kill.py; this drives the
supervisor's restart step directly on a real child process, without waiting out backoffs.
"""

import os
import selectors
import signal
import socket
import subprocess
import sys
import time

import pytest
from django.conf import settings
from django.utils import timezone

from evalsite.management.commands.runstack import BACKOFF_FIRST, STANDBY_RETRY_AFTER, Command
from evalsite.models import WorkerHeartbeat
from tests.worker import ROOT, worker_env


def _supervisor() -> Command:
    command = Command()
    command.services, command.selector, command.stop_requests, command.color = [], selectors.DefaultSelector(), 0, False
    return command


def _crasher() -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", "print('Unrecoverable error: boom', flush=True); raise SystemExit(3)"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


def test_a_service_that_exits_is_restarted_with_a_doubling_backoff_and_its_cause(capsys):
    command = _supervisor()
    command._track("worker", _crasher(), stop_timeout=1, spawn=_crasher)
    service = command.services[0]
    service.process.wait(timeout=30)

    command._keep_up(service)  # notices the exit: logs it, schedules the restart
    assert service.restart_at is not None and service.restarts == 0
    out = capsys.readouterr().out
    assert "worker (pid" in out and "exited unexpectedly: exit code 3 (last line: Unrecoverable error: boom)" in out
    assert f"restarting it in {BACKOFF_FIRST:.0f} s (restart 1)" in out

    service.restart_at = 0  # the backoff has elapsed
    command._keep_up(service)
    assert service.restarts == 1 and service.restart_at is None and service.process.pid
    assert "worker restarted (pid" in capsys.readouterr().out

    service.process.wait(timeout=30)  # it crashes again: the next delay is twice as long
    command._keep_up(service)
    assert "restarting it in 2 s (restart 2)" in capsys.readouterr().out


def _ready_then_killed() -> subprocess.Popen:
    """A worker that got to consuming, then was killed (kill -9, out of memory)."""
    return subprocess.Popen(
        [sys.executable, "-c", "import os, signal; print('celery@here ready.', flush=True); os.kill(os.getpid(), 9)"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


def test_a_worker_killed_while_consuming_comes_back_at_once_every_time(capsys):
    # Not a worker failing to start: each kill, however soon after the last, is restarted with
    # no delay (runs wait for it; its start-up takes seconds). It was 1 s, and before that it
    # doubled: 1, 2, 4 s for three kills a minute.
    command = _supervisor()
    command._track("worker", _ready_then_killed(), stop_timeout=1, spawn=_ready_then_killed)
    service = command.services[0]
    for restart in (1, 2, 3):
        service.process.wait(timeout=30)
        command._keep_up(service)
        assert service.ready and service.backoff == BACKOFF_FIRST
        said = "killed by SIGKILL (last line: celery@here ready.); restarting it at once"
        assert f"{said} (restart {restart})" in capsys.readouterr().out
        command._keep_up(service)  # the next pass of the loop: no delay to wait out
        assert service.restarts == restart and not service.ready


def test_nothing_is_restarted_once_a_stop_was_requested():
    command = _supervisor()
    command._track("beat", _crasher(), stop_timeout=1, spawn=_crasher)
    service = command.services[0]
    service.process.wait(timeout=30)
    command.stop_requests = 1

    command._keep_up(service)
    assert service.restart_at is None and service.restarts == 0


@pytest.mark.django_db(transaction=True)  # the supervisor closes its connection after the write
def test_a_dead_worker_is_recorded_as_ended_so_its_cases_are_taken_back_at_once(capsys):
    # Its heartbeat is seconds old and stays so for the TTL: only the supervisor knows it is gone.
    command = _supervisor()
    command._track("worker", _crasher(), stop_timeout=1, spawn=_crasher)
    service = command.services[0]
    host, now = socket.gethostname(), timezone.now()
    for name in (
        f"{host}:{service.process.pid}:a1",
        f"{host}:{service.process.pid + 1}:b2",
        f"other:{service.process.pid}:c3",
    ):
        WorkerHeartbeat.objects.create(name=name, started_at=now, last_seen=now)
    service.process.wait(timeout=30)

    command._keep_up(service)

    ended = dict(WorkerHeartbeat.objects.values_list("name", "ended_at"))
    assert ended.pop(f"{host}:{service.process.pid}:a1") is not None
    assert set(ended.values()) == {None}  # another process on this host, or another host's
    assert "Could not record" not in capsys.readouterr().out


# The standby: a warmed-up worker that waits to take over (issue 48).

_CONSUMING = "import time; print('celery@here ready.', flush=True); time.sleep(120)"
# As evalsite/celery.py's _standby_wait: warm, then wait for a line on stdin, then consume.
_STANDBY = (
    "import sys, time; print('standby: warmed up, waiting to take over', flush=True); "
    "line = sys.stdin.readline().strip(); print(f'standby: told {line!r}', flush=True); "
    "print('celery@here ready.', flush=True) if line else sys.exit(0); time.sleep(120)"
)


def _consuming() -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", _CONSUMING],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip


def _pump_until(command: Command, condition, what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        command._pump(timeout=0.1)


def _standing_by(command: Command) -> None:
    command.standby_enabled, command.worker_command = True, [sys.executable, "-c", _STANDBY]


def _kill_all(command: Command) -> None:
    for service in command.services:
        command._kill_group(service)
        service.process.wait(timeout=30)


@pytest.mark.django_db(transaction=True)
def test_a_killed_worker_is_replaced_by_its_warm_standby_and_a_new_standby_follows(capsys):
    command = _supervisor()
    _standing_by(command)
    command._track("worker", _consuming(), stop_timeout=1, spawn=_consuming)
    worker = command.services[0]
    command._standby_keep()
    assert command.standby is None  # not before the worker consumes: the two would share the CPU
    _pump_until(command, lambda: worker.ready, "the worker to consume")
    command._standby_keep()
    standby = command.standby
    assert standby is not None and "standby started (pid" in capsys.readouterr().out
    _pump_until(command, lambda: "standby: warmed up, waiting to take over" in standby.output, "the standby")
    try:
        os.killpg(worker.process.pid, signal.SIGKILL)
        worker.process.wait(timeout=30)
        command._keep_up(worker)

        out = capsys.readouterr().out
        assert f"restarting it from its warm standby (pid {standby.process.pid}) at once (restart 1)" in out
        assert f"worker restarted (pid {standby.process.pid}, restart 1): its warm standby took over." in out
        assert worker.process is standby.process and worker.restarts == 1 and command.standby is None
        assert worker.restart_at is None  # nothing left to start cold
        _pump_until(command, lambda: worker.ready, "the successor to consume")
        assert "standby: told 'take over'" in worker.output  # its output is the worker's now

        command._standby_keep()  # the successor consumes: another standby beside it
        assert command.standby is not None and command.standby.process.pid != standby.process.pid
        assert [s.name for s in command.services] == ["worker", "standby"]
    finally:
        _kill_all(command)


@pytest.mark.django_db(transaction=True)
def test_a_standby_that_died_is_not_handed_the_worker_and_is_started_again_later(capsys):
    command = _supervisor()
    _standing_by(command)
    command._track("worker", _consuming(), stop_timeout=1, spawn=_consuming)
    worker = command.services[0]
    _pump_until(command, lambda: worker.ready, "the worker to consume")
    command._standby_keep()
    standby = command.standby
    assert standby is not None
    try:
        os.killpg(standby.process.pid, signal.SIGKILL)
        standby.process.wait(timeout=30)
        command._standby_keep()
        out = capsys.readouterr().out
        assert f"standby (pid {standby.process.pid}) exited unexpectedly: killed by SIGKILL" in out
        assert f"another in {STANDBY_RETRY_AFTER:.0f} s." in out
        assert command.standby is None and standby not in command.services
        command._standby_keep()
        assert command.standby is None  # not at once: a standby failing to start does not loop

        os.killpg(worker.process.pid, signal.SIGKILL)
        worker.process.wait(timeout=30)
        command._keep_up(worker)
        assert "restarting it at once (restart 1)" in capsys.readouterr().out  # a cold start
        command._keep_up(worker)
        assert worker.restarts == 1 and worker.process.poll() is None
    finally:
        _kill_all(command)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_standby_warms_up_writes_no_heartbeat_and_leaves_when_dismissed():
    # The real `celery worker` as runstack starts its standby: it loads everything, says it is
    # warm, and waits before the broker, the pool and the heartbeat; its stdin closed without a
    # line (the stack stopping) ends it there, having consumed nothing.
    done = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "evalsite", "worker", "--loglevel", "INFO", "--concurrency", "4",
         "--queues", settings.CELERY_TASK_DEFAULT_QUEUE, "--without-gossip", "--without-mingle"],
        cwd=ROOT, env=worker_env({"EVALSITE_WORKER_STANDBY_WAIT": "1"}), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "standby: warmed up, waiting to take over" in out and "standby: dismissed before it took over" in out
    assert " ready." not in out and "Connected to" not in out
    assert not WorkerHeartbeat.objects.exists()

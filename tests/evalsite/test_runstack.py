"""runstack's supervision: a service that exits on its own is restarted with backoff, the cause logged.

The whole stack under kill -9 is tests/chaos/test_runstack_kill.py; this drives the
supervisor's restart step directly on a real child process, without waiting out backoffs.
"""

import selectors
import socket
import subprocess
import sys

import pytest
from django.utils import timezone

from evalsite.management.commands.runstack import BACKOFF_FIRST, Command
from evalsite.models import WorkerHeartbeat


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

"""runstack's supervision: a service that exits on its own is restarted with backoff, the cause logged.

The whole stack under kill -9 is tests/chaos/test_runstack_kill.py; this drives the
supervisor's restart step directly on a real child process, without waiting out backoffs.
"""

import selectors
import subprocess
import sys

from evalsite.management.commands.runstack import BACKOFF_FIRST, Command


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


def test_nothing_is_restarted_once_a_stop_was_requested():
    command = _supervisor()
    command._track("beat", _crasher(), stop_timeout=1, spawn=_crasher)
    service = command.services[0]
    service.process.wait(timeout=30)
    command.stop_requests = 1

    command._keep_up(service)
    assert service.restart_at is None and service.restarts == 0

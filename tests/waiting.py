"""The suite's one way to wait for something another process or thread does.

A worker, the fake LLM server's threads, a Redis server or a browser change things
on their own time, so a test polls for the state it expects, with a deadline and a
message naming what it waited for. Never sleep a fixed time to let something happen
(that is either too short on a loaded 2-core CI machine or a waste everywhere else),
and never sleep to make time pass: time-machine moves the clock (see
tests/runs/test_document_signed.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    predicate: Callable[[], T],
    *,
    timeout: float = 90,
    interval: float = 0.2,
    what: str = "condition",
    pause: Callable[[float], object] = time.sleep,
) -> T:
    """Call predicate() until it returns something truthy, and return that.

    Raises AssertionError naming `what` after `timeout` seconds (generous by default:
    CI has 2 noisy cores). The predicate is called once more at the deadline, so a
    state reached during the last interval still counts; an exception it raises
    (a worker that died, say) ends the wait at once. `pause(seconds)` waits between
    calls: a Playwright test passes the page's own wait, so browser events keep
    being handled while it waits.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"Timed out after {timeout:g} s waiting for {what}")
        pause(min(interval, max(0.0, deadline - time.monotonic())))

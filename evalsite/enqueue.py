"""Sending Celery messages after commit (a leaf module: it imports no app).

A message must never name a row the worker cannot see yet, so services send after the
transaction commits. And a broker that is down at that moment must not turn a committed
write into an error: `robust=True` logs the failure instead of raising it, the row stays
queued in the database, and the app's reaper sends the message later (`runs` reaper for
cases, `datasets.jobs.dataset_reap` for dataset jobs; docs/architecture.md, "The run
window" step 2 and "Dataset jobs").
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from celery import Task
from django.db import transaction


def after_commit(send: Callable[[], object]) -> None:
    """Run `send` (which sends one or more messages) once the current transaction commits."""
    transaction.on_commit(send, robust=True)


def enqueue_on_commit(task: Task, *args: Any) -> None:
    """`task.delay(*args)` once the current transaction commits."""
    after_commit(partial(task.delay, *args))

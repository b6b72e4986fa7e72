"""Sending Celery messages after commit (a leaf module: it imports no app).

A message must never name a row the worker cannot see yet, so services send after the
transaction commits. And a broker that is down at that moment must not turn a committed
write into an error: `robust=True` logs the failure instead of raising it, the row stays
queued in the database, and the app's reaper sends the message later (`runs` reaper for
cases, `datasets.jobs.dataset_reap` for dataset jobs; docs/architecture.md, "The run
window" step 2 and "Dataset jobs").
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from celery import Task, current_app
from django.db import transaction
from kombu.exceptions import ChannelError

logger = logging.getLogger(__name__)


def after_commit(send: Callable[[], object]) -> None:
    """Run `send` (which sends one or more messages) once the current transaction commits."""
    transaction.on_commit(send, robust=True)


def enqueue_on_commit(task: Task, *args: Any) -> None:
    """`task.delay(*args)` once the current transaction commits."""
    after_commit(partial(task.delay, *args))


def messages_waiting() -> int | None:
    """How many task messages wait in the broker for a worker to take them (the default
    queue, every priority), or None when the broker cannot be asked (down, unreachable).

    A message a worker has taken is no longer in the broker's lists (with late acks and a
    prefetch of one, a busy worker takes none beyond what it runs), so a message counted
    here is one that no worker has a free process for."""
    queue = current_app.conf.task_default_queue
    try:
        with current_app.pool.acquire(block=True, timeout=2) as connection:
            try:
                return connection.default_channel.queue_declare(queue=queue, passive=True).message_count
            except ChannelError:
                return 0  # kombu's Redis transport: no list of the queue holds a message
    except Exception:
        logger.warning("Could not count the messages waiting in the broker", exc_info=True)
        return None

"""The Redis lists behind one Celery queue, for tests that look at the messages waiting.

kombu's Redis transport keeps one list per priority step of the queue (settings.py,
CELERY_BROKER_TRANSPORT_OPTIONS): the queue's own name for step 0, then the name, kombu's
separator and the step. Most messages wait at CELERY_TASK_DEFAULT_PRIORITY's list.
"""

from __future__ import annotations

from django.conf import settings

SEPARATOR = "\x06\x16"  # kombu.transport.redis's default `sep`


def queue_keys(queue: str | None = None) -> list[str]:
    """The lists in the order a worker takes from them (most urgent first)."""
    queue = queue or settings.CELERY_TASK_DEFAULT_QUEUE
    steps = settings.CELERY_BROKER_TRANSPORT_OPTIONS["priority_steps"]
    return [queue if step == 0 else f"{queue}{SEPARATOR}{step}" for step in steps]


def waiting(client, queue: str | None = None) -> int:
    """Messages waiting in the queue, at every priority."""
    return sum(client.llen(key) for key in queue_keys(queue))


def take(client, queue: str | None = None) -> bytes | None:
    """The message a worker would take next (kombu LPUSHes, a worker BRPOPs), or None."""
    for key in queue_keys(queue):
        message = client.rpop(key)
        if message is not None:
            return message
    return None

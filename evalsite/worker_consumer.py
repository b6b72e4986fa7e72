"""The Celery worker's consumer, with a fix for a Redis restart that killed the worker.

Celery 5.7's consumer, on a lost broker connection, first calls `connection.collect()`
(which drops the transport's reference to its connection: `transport.client = None`)
and then `connection.close()` (celery/celery#10242). Closing the task channel restores
the messages it had not acknowledged (`restore_unacked_once`), which needs a Redis
client; with the transport's client gone, kombu's `_connparams` reads `None.hostname`,
and the AttributeError, not being a connection error, escapes `ignore_errors` and ends
the worker ("Unrecoverable error: AttributeError(\"'NoneType' object has no attribute
'hostname'\")"). It happened whenever the worker held unacknowledged messages when the
connection broke: always at WORKER_CONCURRENCY=4 with a run's window of 3 (every message
taken by a process, one process idle), which is what `make run` ships.

The fix restores the unacknowledged messages *before* Celery's cleanup, while the channel
can still reach its transport's settings. Redis is usually down at that moment, so the
restore fails with a connection error (logged) and the messages are forgotten; either way
the close that follows finds nothing left to restore. Nothing is lost: late acks plus the database
reaper re-queue every case whose message was lost (runs/engine/reaper.py).

A second path to the same end: a task that finishes (or is cancelled) around the loss has
its ack or reject queued on the event loop, which runs it after the reconnect, on the
message's old channel, which the close above detached from its connection
(`channel.connection = None`); kombu then reads `None.client` and the AttributeError ends
the worker the same way. `call_soon_ack` drops such an ack or reject (logged): that
channel's deliveries went with its connection (restored or forgotten above), and the
case's database row, not the message, says whether it still has to run.

After the loss, Celery ends every task the worker was running (late acks: "cannot be
acknowledged after a connection loss ... Terminating it instead"). The worker records the
loss in the database (evalsite/workers.py broker_lost_record), so the reaper takes those
cases back as soon as it runs again, not after the 120 s stale-claim timeout: the worker is
alive and beating, so nothing else would say its claims are dead (issue 35). And it
reconnects every 1-2 s (RECONNECT_INTERVALS) rather than after kombu's 2, 4, 6... s.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

from celery.worker.consumer import Consumer as CeleryConsumer

logger = logging.getLogger(__name__)


# Reconnecting to the broker: at once, then every 1 s, 2 s at most (kombu's default waits 2 s,
# then 4, 6... up to 30: a Redis back after 3 s was reconnected to after 6).
RECONNECT_INTERVALS = {"interval_start": 1, "interval_step": 1, "interval_max": 2}


class Consumer(CeleryConsumer):
    def on_connection_error_after_connected(self, exc: Exception) -> None:
        from evalsite import workers

        _restore_unacked_early(self.connection)
        lost_at = workers.broker_lost_mark()  # the pool children stop asking about what they hold
        super().on_connection_error_after_connected(exc)
        # Celery has now ended every task it ran (late acks; "Terminating it instead"): their
        # cases are taken back by the reaper as soon as it runs, not at their claims' timeout.
        workers.broker_lost_record(lost_at)

    def ensure_connected(self, conn: Any) -> Any:
        conn.ensure_connection = functools.partial(conn.ensure_connection, **RECONNECT_INTERVALS)
        return super().ensure_connected(conn)

    def call_soon_ack(self, p: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return super().call_soon_ack(_unless_channel_closed(p), *args, **kwargs)


def _unless_channel_closed(settle: Callable[..., Any]) -> Callable[..., Any]:
    """`settle` (a message's ack_log_error or reject_log_error), skipped when it runs after
    the message's channel was closed with a lost connection."""
    message = getattr(settle, "__self__", None)

    def guarded(*args: Any, **kwargs: Any) -> Any:
        channel = getattr(message, "channel", None)
        if message is not None and channel is not None and getattr(channel, "connection", True) is None:
            logger.warning("Not settling message %s: its channel closed with the lost broker connection",
                           getattr(message, "delivery_tag", "?"))  # fmt: skip
            return None
        return settle(*args, **kwargs)

    return guarded


def _restore_unacked_early(connection: Any) -> None:
    channel = getattr(connection, "_default_channel", None) if connection is not None else None
    qos = getattr(channel, "_qos", None)
    if qos is None:
        return
    try:
        qos.restore_unacked_once()  # marks the restore done, whether or not Redis could be reached
    except Exception as error:
        # Redis is down. Its copy of these messages (the unacked index) is restored after the
        # visibility timeout if Redis kept it, and is gone if Redis restarted empty; the reaper
        # re-queues the cases from the database either way. Forget them here, or the close
        # that follows finds the restore "done" with messages left and fails its assertion.
        logger.warning("Could not restore %d unacknowledged message(s) after losing the broker: %r",
                       len(qos._delivered), error)  # fmt: skip
        qos._delivered.clear()

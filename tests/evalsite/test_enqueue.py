"""enqueue.messages_waiting: the messages no worker has taken yet, as the broker counts them."""

from evalsite.enqueue import messages_waiting
from evalsite.tasks import URGENT, health_check
from tests.broker import take, waiting


def test_an_empty_queue_has_no_message_waiting(broker_queue):
    assert messages_waiting() == 0


def test_messages_are_counted_at_every_priority(broker_queue):
    health_check.delay("one")
    health_check.apply_async(("two",), priority=URGENT)
    health_check.apply_async(("three",), priority=9)

    assert messages_waiting() == 3
    assert waiting(broker_queue) == 3  # the lists themselves


def test_a_message_a_worker_has_taken_is_not_waiting(broker_queue):
    health_check.delay("one")
    health_check.delay("two")
    assert take(broker_queue) is not None  # as a worker's BRPOP takes it

    assert messages_waiting() == 1

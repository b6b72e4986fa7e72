"""evalsite/worker_consumer.py: an ack that runs after its channel closed with a lost broker
connection must not end the worker (kombu's Redis transport, on the suite's Redis)."""

import logging

import pytest
from django.conf import settings
from kombu import Connection
from kombu.message import Message

from evalsite.worker_consumer import _unless_channel_closed

logger = logging.getLogger(__name__)


def _message_on_a_closed_channel() -> Message:
    connection = Connection(settings.BROKER_URL)
    channel = connection.default_channel
    message = Message(body=b"{}", channel=channel, delivery_tag="1")
    connection.close()  # as Celery's consumer does on a lost connection: channel.connection = None
    assert channel.connection is None
    return message


def test_kombu_fails_to_ack_on_a_channel_closed_with_its_connection():
    # What ended the worker: not a connection error, so Celery's ack_log_error lets it through.
    message = _message_on_a_closed_channel()
    with pytest.raises(AttributeError):
        message.ack_log_error(logger, Connection(settings.BROKER_URL).connection_errors)


def test_the_consumer_drops_such_an_ack_and_logs_it(caplog):
    message = _message_on_a_closed_channel()
    with caplog.at_level(logging.WARNING, logger="evalsite.worker_consumer"):
        assert _unless_channel_closed(message.ack_log_error)(logger, ()) is None
    assert message.acknowledged is False
    assert "its channel closed with the lost broker connection" in caplog.text


def test_an_ack_on_a_live_channel_still_acks():
    with Connection(settings.BROKER_URL) as connection:
        message = Message(body=b"{}", channel=connection.default_channel, delivery_tag="1")
        _unless_channel_closed(message.ack_log_error)(logger, connection.connection_errors)
        assert message.acknowledged

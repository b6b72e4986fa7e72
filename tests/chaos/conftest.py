"""Chaos tests share the run tests' helpers (dataset builder, worker-cache reset, polling).

Each chaos test runs on its own Redis (`own_redis`: a redis-server on a free port, no
persistence), never the machine's, and its worker runs at the shipped WORKER_CONCURRENCY.
Everything that decides how fast a fault is noticed and undone is as shipped (issue 48): the
suite's faster reaper (tests/env.py) is dropped from the workers' environment, and the model
gateway's timeout and backoff are the shipped ones, not the fake model fixture's. What a test
still sets otherwise says why next to it.
"""

import socket
import subprocess
import threading
from collections.abc import Iterator

import pytest
import redis

import evalsite.settings as shipped
from tests.runs.conftest import _clear_worker_caches, make_dataset, wait_for  # noqa: F401  (fixtures)


@pytest.fixture(autouse=True)
def shipped_reaper(monkeypatch):
    """Workers and stacks started here get beat's shipped reaper interval (tests/worker.py passes
    this process's environment on), not tests/env.py's faster one."""
    monkeypatch.delenv("EVALSITE_REAPER_INTERVAL", raising=False)


@pytest.fixture
def fake_llm(fake_llm, settings):
    """The fake model, with the gateway's shipped timeout and backoff (the fixture's are shorter)."""
    settings.EVALSITE_LLM_TIMEOUT = shipped.EVALSITE_LLM_TIMEOUT
    settings.EVALSITE_LLM_BACKOFF = shipped.EVALSITE_LLM_BACKOFF
    return fake_llm


class RedisServer:
    """A throwaway redis-server on a free TCP port, with no persistence: a restart loses everything."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> "RedisServer":
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        client = redis.Redis.from_url(self.url)
        wait_for(lambda: self._pings(client), timeout=30, interval=0.1, what="redis-server to accept connections")
        client.close()
        return self

    @staticmethod
    def _pings(client: redis.Redis) -> bool:
        try:
            return bool(client.ping())
        except redis.ConnectionError:
            return False

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


def _point_celery_at(app, url: str) -> None:
    from kombu import pools

    app.conf.broker_url = url
    # Celery's broker pools live in kombu's global registry: close and forget them all (as after a
    # fork), so the next send builds fresh ones for `url` and later tests never get a closed pool.
    pools.reset()
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def own_redis(settings) -> Iterator[RedisServer]:
    """This test's own Redis, for the worker (REDIS_URL) and for this process's Celery producer."""
    from evalsite.celery import app

    server = RedisServer().start()
    old_url = app.conf.broker_url
    settings.BROKER_URL = settings.CELERY_BROKER_URL = server.url
    settings.REDIS_CLIENT_URL = server.url
    # The Celery app read its broker at first use: point it at this server and drop pooled connections.
    _point_celery_at(app, server.url)
    yield server
    _point_celery_at(app, old_url)
    server.kill()


class Poller(threading.Thread):
    """A person watching a page: one GET a second through the web stack (test client, as a
    server answers: errors are responses, not exceptions), every status code kept."""

    def __init__(self, user, url: str) -> None:
        super().__init__(daemon=True)
        from django.test import Client

        self.client = Client(raise_request_exception=False)
        self.client.force_login(user)
        self.url = url
        self.codes: list[int] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        from django.db import connections

        try:
            while not self._stop_event.wait(1.0):
                self.codes.append(self.client.get(self.url).status_code)
        finally:
            connections.close_all()  # this thread's own connection

    def stop(self) -> list[int]:
        self._stop_event.set()
        self.join(timeout=30)
        return [code for code in self.codes if code >= 500]

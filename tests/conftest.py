"""The fixed cast: alice (owner) and bob (member) share a team; charlie is an outsider."""

from typing import Any

import pytest
from django.test import Client

from tests.factories import AgentFactory, MembershipFactory, TeamFactory, UserFactory


def pytest_configure(config: pytest.Config) -> None:
    # PBKDF2's deliberate slowness cost about 1 s per user created: most of the suite's time.
    from django.conf import settings

    # The SQLite test databases, the embedded Redis socket and uploads live in var/, which a
    # fresh clone does not have: a bare `pytest` made no var/ and failed at its first database.
    (settings.BASE_DIR / "var").mkdir(exist_ok=True)
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Login throttling counts in the cache: a per-process memory cache, emptied per test below,
    # keeps one test's failed logins from throttling the next (production shares Redis).
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    # Plain static names, whether or not `make run` has collected static files here:
    # a manifest from an earlier collectstatic would not know files added since.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture(autouse=True)
def _empty_cache():
    from django.core.cache import cache

    cache.clear()


@pytest.fixture
def broker_queue(settings):
    """This test process's broker queue (tests/broker.py), empty before and after the test:
    a Redis client on the broker."""
    import redis

    from tests.broker import queue_keys

    client = redis.Redis.from_url(settings.REDIS_CLIENT_URL)
    client.delete(*queue_keys())
    yield client
    client.delete(*queue_keys())


@pytest.fixture
def team(db):
    return TeamFactory(name="Acme QA")


@pytest.fixture
def alice(team):
    return MembershipFactory(team=team, user=UserFactory(username="alice"), role="owner").user


@pytest.fixture
def bob(team):
    return MembershipFactory(team=team, user=UserFactory(username="bob"), role="member").user


@pytest.fixture
def other_team(db):
    return TeamFactory(name="Globex QA")


@pytest.fixture
def charlie(other_team):
    return MembershipFactory(team=other_team, user=UserFactory(username="charlie"), role="owner").user


@pytest.fixture
def agent(team):
    return AgentFactory(team=team, name="Support bot")


@pytest.fixture
def client_alice(alice) -> Client:
    client = Client()
    client.force_login(alice)
    return client


@pytest.fixture
def client_bob(bob) -> Client:
    client = Client()
    client.force_login(bob)
    return client


@pytest.fixture
def client_charlie(charlie) -> Client:
    client = Client()
    client.force_login(charlie)
    return client


@pytest.fixture
def celery_worker(transactional_db):
    """Start a real Celery worker process on Redis; the test's data must be committed
    (transactional_db), since the worker reads the database over its own connection."""
    from tests.worker import WorkerProcess

    workers: list[WorkerProcess] = []

    def start(**kwargs) -> WorkerProcess:
        worker = WorkerProcess(**kwargs)
        workers.append(worker)  # before start(): a worker that never got ready is stopped too
        return worker.start()

    yield start
    for worker in workers:
        worker.stop()


@pytest.fixture(scope="session")
def fake_llm_server():
    from tests.fakellm import FakeLLM

    server = FakeLLM().start()
    yield server
    server.stop()


@pytest.fixture
def fake_llm(fake_llm_server, settings):
    """The fake OpenAI-compatible server, reset, with the gateway's settings pointed at it."""
    from tests.fakellm import point_settings_at

    fake_llm_server.reset()
    point_settings_at(settings, fake_llm_server)
    yield fake_llm_server
    fake_llm_server.reset()  # releases anything a failed test left hanging


@pytest.fixture
def no_llm(settings):
    """No model configured, whatever the environment says."""
    settings.EVALSITE_LLM_MODEL = ""
    settings.EVALSITE_JUDGE_MODEL = ""
    settings.EVALSITE_EMBEDDING_MODEL = ""


@pytest.fixture
def tasks_run_here():
    """Celery tasks sent while this is active run at once in the test's process (Celery's
    task_always_eager), as a worker would run them; the list it yields records each one
    as (task name, args, kwargs). With django_capture_on_commit_callbacks(execute=True) a
    test follows a service's on_commit enqueue to the job it really starts, without
    stubbing .delay."""
    from celery.signals import task_prerun

    from evalsite.celery import app

    ran: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def record(sender: Any = None, args: Any = None, kwargs: Any = None, **_: Any) -> None:
        ran.append((sender.name, tuple(args or ()), dict(kwargs or {})))

    eager = app.conf.task_always_eager
    app.conf.task_always_eager = True
    task_prerun.connect(record, weak=False)
    try:
        yield ran
    finally:
        task_prerun.disconnect(record)
        app.conf.task_always_eager = eager

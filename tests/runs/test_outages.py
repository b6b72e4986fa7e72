"""A Redis or a database that is briefly out of reach never turns a page into a 500 (issue 35).

Redis: the cache is pointed at a port nothing listens on (as during a restart). The database:
a query wrapper (Django's own hook, `connection.execute_wrapper`) answers as PostgreSQL does
when a session is terminated, for the first query or for every one.
"""

import socket
from contextlib import contextmanager

import pytest
from django.db import OperationalError, connection
from django.test import Client

import evalsite.settings as shipped
from evalsite import middleware
from runs import services
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db

TERMINATED = "terminating connection due to administrator command"


@pytest.fixture
def redis_down(settings):
    """The shipped cache settings, at an address where Redis is not running."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: connections are refused
    settings.CACHES = {"default": {**shipped.CACHES["default"], "LOCATION": f"redis://127.0.0.1:{port}/0"}}


def _page_client(user) -> Client:
    # A server answers an error with a page; it does not re-raise it as Django's test client does.
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def test_a_finished_runs_page_and_settings_answer_while_redis_is_down(make_dataset, alice, no_llm, redis_down):
    dataset = make_dataset(2)
    run = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))
    client = _page_client(alice)

    page = client.get(f"/agents/{run.agent_id}/runs/{run.pk}/")
    assert page.status_code == 200
    assert client.get("/accounts/settings/").status_code == 200
    assert client.get("/agents/").status_code == 200  # the worker banner reads the cache too


def test_sign_in_works_while_redis_is_down(alice, redis_down):
    alice.set_password("correct horse")
    alice.save()
    client = Client(raise_request_exception=False)
    answer = client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    assert answer.status_code == 200  # refused, not an error page
    answer = client.post("/accounts/login/", {"username": "alice", "password": "correct horse"})
    assert answer.status_code == 302


@contextmanager
def database_lost(*, queries: int | None = 1):
    """The next `queries` queries of this thread (None: every one) fail as a terminated session does."""
    failed = [0]

    def wrapper(execute, sql, params, many, context):
        if queries is None or failed[0] < queries:
            failed[0] += 1
            raise OperationalError(TERMINATED)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        yield failed


def test_a_page_read_that_loses_its_database_connection_is_read_again(make_dataset, alice, no_llm, caplog):
    dataset = make_dataset(1)
    run = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))
    client = _page_client(alice)
    with database_lost(queries=1) as failed:
        page = client.get(f"/agents/{run.agent_id}/runs/{run.pk}/")
    assert failed == [1]
    assert page.status_code == 200
    assert "trying once more" in caplog.text


def test_a_page_read_waits_out_a_database_restart(make_dataset, alice, no_llm, monkeypatch):
    # A restart refuses connections for seconds: a read is tried again until it is back (the
    # chaos table's poller saw 503s while PostgreSQL restarted), within READ_RETRY_SECONDS.
    pauses: list[float] = []
    monkeypatch.setattr(middleware.time, "sleep", pauses.append)
    dataset = make_dataset(1)
    run = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))
    client = _page_client(alice)
    with database_lost(queries=4) as failed:
        page = client.get(f"/agents/{run.agent_id}/runs/{run.pk}/", HTTP_HX_REQUEST="true")
        status = client.get(f"/api/runs/{run.pk}/status", HTTP_AUTHORIZATION=f"Bearer {_token(alice)}")
    assert failed == [4]
    assert page.status_code == 286  # htmx's "stop polling": the run is over, and the page says so
    assert status.status_code == 200
    assert pauses and sum(pauses) < middleware.READ_RETRY_SECONDS


def _token(user) -> str:
    from accounts.services import api_token_create

    return api_token_create(user=user, name="outage")[1]


def test_a_database_that_stays_away_answers_a_page_that_reloads_itself(alice, monkeypatch):
    monkeypatch.setattr(middleware, "READ_RETRY_SECONDS", 0.3)
    client = _page_client(alice)
    with database_lost(queries=None):
        page = client.get("/agents/?q=x")
    assert page.status_code == 503
    assert page["Retry-After"] == "5"
    body = page.content.decode()
    assert '<meta http-equiv="refresh" content="5;url=/agents/?q=x">' in body
    assert "reloads itself" in body


def test_htmx_polls_and_the_api_get_a_503_too(alice, make_dataset, monkeypatch):
    monkeypatch.setattr(middleware, "READ_RETRY_SECONDS", 0.3)
    client = _page_client(alice)
    with database_lost(queries=None):
        poll = client.get("/agents/", HTTP_HX_REQUEST="true")
        api = client.get("/api/runs/1", HTTP_AUTHORIZATION="Bearer not-a-token")
    assert poll.status_code == 503 and poll["Content-Type"].startswith("text/plain")
    assert api.status_code == 503 and api["Retry-After"] == "5"
    assert "database did not answer" in api.json()["detail"]


def test_a_sign_in_that_loses_the_database_is_a_503_not_a_500(alice):
    client = Client(raise_request_exception=False)
    with database_lost(queries=1):
        answer = client.post("/accounts/login/", {"username": "alice", "password": "whatever"})
    # A form sent is not sent again by the server (it may have been saved): the person is asked.
    assert answer.status_code == 503
    assert "may not have been saved" in answer.content.decode()
    assert '<meta http-equiv="refresh" content="5;url=/accounts/login/">' in answer.content.decode()


def test_a_query_mistake_is_still_a_500(alice):
    """Only a database out of reach is retried or answered 503: a bug stays visible."""
    from django.db import ProgrammingError

    def wrapper(execute, sql, params, many, context):
        raise ProgrammingError("relation does not exist")

    client = _page_client(alice)
    with connection.execute_wrapper(wrapper):
        assert client.get("/agents/").status_code == 500

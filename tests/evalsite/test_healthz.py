"""GET /healthz: web, database, Redis and worker liveness as JSON, 503 when one is down; the worker banner."""

from datetime import timedelta

import pytest
from django.utils import timezone

from evalsite.models import WorkerHeartbeat

pytestmark = pytest.mark.django_db


def _beat(seconds_ago: float) -> None:
    seen = timezone.now() - timedelta(seconds=seconds_ago)
    WorkerHeartbeat.objects.create(name=f"w{seconds_ago}", started_at=seen, last_seen=seen)


def test_it_is_200_when_everything_is_up(client):
    _beat(1)
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is True
    assert {name: body[name]["ok"] for name in ("web", "database", "redis", "worker")} == dict.fromkeys(
        ("web", "database", "redis", "worker"), True
    )
    assert body["worker"]["workers"] == 1


def test_it_is_503_and_names_the_worker_when_no_worker_answered(client, settings):
    _beat(settings.EVALSITE_WORKER_HEARTBEAT_TTL + 5)
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["ok"] is False and body["worker"]["ok"] is False
    assert body["worker"]["last_seen_seconds_ago"] >= settings.EVALSITE_WORKER_HEARTBEAT_TTL
    assert body["database"]["ok"] and body["redis"]["ok"]


def test_it_is_503_when_redis_is_down(client, settings):
    _beat(1)
    settings.REDIS_CLIENT_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["redis"] == {"ok": False, "error": "ConnectionError"}


def test_it_needs_no_login_and_refuses_writes(client):
    assert client.get("/healthz").status_code in (200, 503)
    assert client.post("/healthz").status_code == 405


def test_the_console_says_runs_are_paused_when_no_worker_is_running(client_alice):
    page = client_alice.get("/agents/").content.decode()
    assert "Runs are paused: no worker is running" in page


def test_the_banner_is_gone_while_a_worker_beats(client_alice):
    _beat(1)
    page = client_alice.get("/agents/").content.decode()
    assert "Runs are paused" not in page


def test_a_signed_out_visitor_sees_no_banner(client):
    assert "Runs are paused" not in client.get("/accounts/login/").content.decode()

"""The database goes away for a moment mid-run: cases retry their database errors and the run completes."""

import sqlite3
import time
from collections import Counter

import pytest
from django.db import connection

from agents.models import Agent
from runs import selectors, services
from runs.models import Result, Run
from tests.runs.conftest import wait_settled
from tests.waiting import wait_for

pytestmark = [pytest.mark.chaos, pytest.mark.worker]


def _blip_database(seconds: float) -> None:
    """Take the database away from the worker for `seconds`.

    SQLite: lock the whole file from another connection. PostgreSQL: refuse new
    connections to the database and keep cutting the worker's sessions, then let it back.
    """
    if connection.vendor == "sqlite":
        locker = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None, timeout=30)
        locker.execute("BEGIN EXCLUSIVE")
        time.sleep(seconds)
        locker.execute("ROLLBACK")
        locker.close()
        return
    import psycopg

    params = connection.get_connection_params()
    params["dbname"] = "postgres"  # a database can't refuse connections from a session inside it
    name = connection.ops.quote_name(connection.settings_dict["NAME"])
    connection.ensure_connection()
    ours = connection.connection.info.backend_pid  # the test's own session stays
    deadline = time.monotonic() + seconds
    killed = 0
    with psycopg.connect(**params, autocommit=True) as admin:
        admin.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS false")
        try:
            while time.monotonic() < deadline:
                killed += admin.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = %s AND pid <> %s",
                    [connection.settings_dict["NAME"], ours],
                ).fetchone()[0]
                time.sleep(0.2)
        finally:
            admin.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS true")
    assert killed > 0  # the worker's connections really were cut


def test_a_database_blip_mid_run_loses_no_case(celery_worker, fake_llm, make_dataset, alice, settings, own_redis):
    # At the shipped settings (the 120 s stale-claim timeout is not lowered): a case whose save
    # failed retries it on a fresh connection, with no claim to wait out.
    fake_llm.set_latency(0.3)
    dataset = make_dataset(10, kind=Agent.Kind.LLM)
    worker = celery_worker(concurrency=settings.WORKER_CONCURRENCY, beat=True, env={"REDIS_URL": own_redis.url})
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    wait_for(
        lambda: Result.objects.filter(run=run, status=Result.Status.PASS).count() >= 3,
        timeout=120,
        what="3 finished cases",
    )

    _blip_database(3)
    back = time.monotonic()
    passed_then = Result.objects.filter(run=run, status=Result.Status.PASS).count()
    wait_for(
        lambda: Result.objects.filter(run=run, status=Result.Status.PASS).count() > passed_then,
        timeout=150,
        what="a case finished after the database came back",
    )
    recovered = time.monotonic() - back
    run = wait_settled(run, timeout=150, worker=worker)
    asked = fake_llm.count(task="agent", run=run.pk)
    repeats = selectors.run_repeats(run=run)
    print(f"\ndatabase blip ({connection.vendor}): first case {recovered:.1f} s after it was back; "
          f"agent calls {asked} for 10 cases, repeats shown {repeats.total} {repeats.causes}")  # fmt: skip
    # Printed, not held to seconds (2 shared cores): what is checked is that nothing waited out
    # the claims' 120 s timeout (the cases retried their database errors on fresh connections).
    assert recovered < settings.EVALSITE_STALE_CLAIM_SECONDS / 2

    assert run.status == Run.Status.COMPLETED
    results = list(Result.objects.filter(run=run))
    assert len(results) == 10
    assert set(Counter((r.case_id, r.repeat, r.variant) for r in results).values()) == {1}
    assert {r.status for r in results} == {Result.Status.PASS}, [(r.pk, r.status, r.error) for r in results]
    assert (run.completed, run.passed) == (10, 10)
    # Every time the agent was asked again is counted, and the page says so (issue 35).
    # None uncounted; one may be counted that the agent never saw, if the database failed
    # after the case began and before its agent request (at most one per lane).
    attempts = sum(r.attempts for r in results)
    assert asked <= attempts <= asked + run.concurrency
    assert repeats.total == attempts - 10

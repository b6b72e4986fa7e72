"""Helpers for run tests: build a dataset, drive a run without a worker, wait on the database."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import override_settings

from agents.models import Agent
from runs import services
from runs.models import Result, Run
from tests.factories import AgentFactory, DatasetFactory, TestCaseFactory
from tests.waiting import wait_for


@pytest.fixture(autouse=True)
def _clear_worker_caches() -> None:
    """Per-process caches keyed by primary key: a rolled-back SQLite test can reuse an id."""
    from agents import adapters
    from runs.engine import case as engine
    from runs.engine import execution

    execution._version.cache_clear()
    engine.document_text.cache_clear()
    adapters._knowledge_passages.cache_clear()


@pytest.fixture
def make_dataset(team) -> Callable[..., Any]:
    """make_dataset(cases=3, agent=None, kind="knowledge", dataset=..., **case_fields) -> Dataset."""

    def make(
        cases: int = 3,
        *,
        agent: Agent | None = None,
        kind: str = Agent.Kind.KNOWLEDGE,
        version: dict | None = None,
        dataset: dict | None = None,
        questions: list[str] | None = None,
        **case_fields: Any,
    ):
        overrides = {f"version__{name}": value for name, value in (version or {}).items()}
        agent = agent or AgentFactory(team=team, kind=kind, **overrides)
        ds = DatasetFactory(agent=agent, **(dataset or {}))
        for index in range(cases):
            question = questions[index] if questions else f"Question {index + 1:02d}: how long is the refund window?"
            TestCaseFactory(dataset=ds, position=index, question=question, **case_fields)
        return ds

    return make


def drive(run: Run, *, limit: int = 1000) -> Run:
    """Execute a run's queued cases in this process, as a worker would, until nothing is left.

    Tests using it run inside a transaction (the `db` fixture), so on_commit never sends
    anything to Redis: this loop plays the worker, the window logic stays the real one.
    """
    for _ in range(limit):
        queued = Result.objects.filter(run=run, status=Result.Status.QUEUED).order_by("id").first()
        if queued is None:
            break
        services.run_execute_case(result_id=queued.pk, token=queued.token)
    services.run_finish(run_id=run.pk)
    run.refresh_from_db()
    return run


def execute_one(run: Run) -> Result:
    """Execute the run's oldest queued case and only it, its freed slot queued for a new message.

    A case task normally goes on with the run's next pending cases (a lane of the window);
    a lane time of 0 stops it after one case, for tests that look at a run between cases.
    """
    queued = Result.objects.filter(run=run, status=Result.Status.QUEUED).order_by("id").first()
    assert queued is not None, f"run {run.pk} has no queued case"
    with override_settings(EVALSITE_RUN_LANE_SECONDS=0):
        services.run_execute_case(result_id=queued.pk, token=queued.token)
    queued.refresh_from_db()
    return queued


def wait_settled(run: Run, *, timeout: float = 120, worker: Any = None) -> Run:
    def settled() -> bool:
        run.refresh_from_db()
        return not run.is_active and not run.summary_pending

    try:
        wait_for(settled, timeout=timeout, what=f"run {run.pk} to settle")
    except AssertionError:
        if worker is not None:
            print(worker.read_log()[-6000:])
        raise
    return run

"""A case task's retries after database errors back off by the errors in a row (issue 48).

A lane's message lives for several cases (EVALSITE_RUN_LANE_SECONDS), so one message can meet
several database faults. Its backoff counted every retry of its life: a run's third blip in a
minute waited up to 8 s (the chaos table's PostgreSQL-sessions row, 10.1 s). A try that asked
the agent got past the database, so the error after it starts a new streak.
"""

import pytest
from celery.exceptions import Retry
from django.db import OperationalError

from evalsite.tasks import DATABASE_MAX_RETRIES, database_retry_countdown
from runs import services
from runs import tasks as run_tasks


def test_the_countdown_grows_with_the_errors_in_a_row_and_is_jittered_below_its_cap():
    for failures, cap in ((1, 2), (2, 4), (3, 8), (4, 16), (7, 60), (10, 60)):
        waits = [database_retry_countdown(failures) for _ in range(200)]
        assert all(0 <= wait <= cap for wait in waits), (failures, max(waits))
    assert max(database_retry_countdown(3) for _ in range(200)) > 2  # it does grow


def _try(monkeypatch, *, retries: int, failures: int, asks: bool) -> Retry:
    """One try of the task's message, as its `retries`-th retry, whose case meets a database error
    (after asking the agent, or before). The services call is replaced, not the database."""

    def execute(*, result_id, token, retry, asked, progress):
        if asks:
            progress.add(result_id)
        raise OperationalError("terminating connection due to administrator command")

    monkeypatch.setattr(services, "run_execute_case", execute)
    task = run_tasks.run_execute_case
    sent: list[dict] = []  # the retry's message is kept here, not sent to a queue a later test's worker reads
    monkeypatch.setattr(task, "apply_async", lambda *args, **options: sent.append(options))
    kwargs = {"asked": [], "failures": failures}
    task.push_request(args=(41, "token"), kwargs=kwargs, retries=retries, called_directly=False, is_eager=False)
    try:
        with pytest.raises(Retry) as raised:
            task.run(41, "token", **kwargs)
    finally:
        task.pop_request()
    assert len(sent) == 1 and sent[0]["countdown"] == raised.value.when
    return raised.value


@pytest.mark.django_db
def test_an_error_after_the_agent_was_asked_starts_a_new_streak(monkeypatch, settings):
    # The third fault this message meets: before, it waited up to 8 s.
    retry = _try(monkeypatch, retries=2, failures=2, asks=True)
    assert retry.sig.kwargs["failures"] == 1 and retry.sig.kwargs["asked"] == [41]
    assert 0 <= retry.when <= 2


@pytest.mark.django_db
def test_errors_in_a_row_back_off_and_end_the_task_past_the_limit(monkeypatch, settings):
    retry = _try(monkeypatch, retries=2, failures=2, asks=False)
    assert retry.sig.kwargs["failures"] == 3 and 0 <= retry.when <= 8

    monkeypatch.setattr(
        services,
        "run_execute_case",
        lambda **kwargs: (_ for _ in ()).throw(OperationalError("the database is down")),
    )
    task = run_tasks.run_execute_case
    task.push_request(args=(41, "token"), retries=DATABASE_MAX_RETRIES, called_directly=False, is_eager=False)
    try:
        with pytest.raises(OperationalError):  # not retried again: the case's task fails as before
            task.run(41, "token", asked=[], failures=DATABASE_MAX_RETRIES)
    finally:
        task.pop_request()

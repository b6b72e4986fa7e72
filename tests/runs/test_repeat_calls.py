"""Every time the agent is asked about the same result again is counted, with its cause (issue 35),
and a worker that lost its broker connection has its claims taken back at once."""

from datetime import timedelta

import pytest
from django.db import OperationalError, connection
from django.utils import timezone

from agents.models import Agent
from evalsite import workers
from evalsite.models import WorkerHeartbeat
from runs import selectors, services
from runs.engine.claims import result_claim, result_take_up
from runs.models import Result
from runs.reports import exporters
from runs.tasks import run_execute_case as run_execute_case_task
from tests.agents.test_adapters import agent_server  # noqa: F401  (fixture)
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db


def _http_run(make_dataset, alice, url: str, cases: int = 1):
    dataset = make_dataset(cases, kind=Agent.Kind.HTTP, version={"http_url": url})
    return services.run_start(agent=dataset.agent, dataset=dataset, user=alice)


def _fail_saving_once():
    """Django's query hook: the first save of a case's outcome fails as a terminated session does."""
    failed = []

    def wrapper(execute, sql, params, many, context):
        if not failed and sql.startswith('UPDATE "runs_result"') and '"actual_answer"' in sql:
            failed.append(sql)
            raise OperationalError("terminating connection due to administrator command")
        return execute(sql, params, many, context)

    return wrapper, failed


def test_a_retry_after_a_database_error_counts_the_agent_asked_again(
    make_dataset,
    alice,
    no_llm,
    client_alice,
    agent_server,  # noqa: F811
):
    run = _http_run(make_dataset, alice, agent_server.url)
    result = Result.objects.get(run=run)
    wrapper, failed = _fail_saving_once()
    with connection.execute_wrapper(wrapper):
        # The task as Celery runs it: its database error is retried (eagerly here).
        run_execute_case_task.apply(args=(result.pk, result.token))
    assert failed  # the agent had answered; its outcome could not be saved the first time

    first, second = agent_server.headers
    assert first["Idempotency-Key"] == second["Idempotency-Key"]
    assert (first["X-Evalsite-Attempt"], second["X-Evalsite-Attempt"]) == ("1", "2")
    result.refresh_from_db()
    assert result.status in Result.FINISHED_STATUSES
    assert result.attempts == 2 == len(agent_server.headers)
    assert result.repeats == [{"cause": "database", "attempt": 2}]

    page = client_alice.get(f"/agents/{run.agent_id}/runs/{run.pk}/").content.decode()
    assert "Agent asked again 1 time: 1 after a database error" in page
    assert exporters.result_row(run, result)[-2:] == [2, "a database error"]


@pytest.mark.django_db(transaction=True)  # the claim's own error, outside a test's transaction
def test_a_retry_before_the_agent_was_asked_counts_nothing(
    make_dataset,
    alice,
    no_llm,
    broker_queue,
    agent_server,  # noqa: F811
):
    run = _http_run(make_dataset, alice, agent_server.url)
    result = Result.objects.get(run=run)
    failed = []

    def wrapper(execute, sql, params, many, context):
        if not failed and sql.startswith('UPDATE "runs_result"') and '"claimed_by"' in sql:
            failed.append(sql)  # the claim itself
            raise OperationalError("server closed the connection unexpectedly")
        return execute(sql, params, many, context)

    with connection.execute_wrapper(wrapper):
        run_execute_case_task.apply(args=(result.pk, result.token))
    assert failed
    result.refresh_from_db()
    assert (result.attempts, result.repeats, len(agent_server.headers)) == (1, [], 1)


def test_claims_of_a_worker_that_lost_its_broker_connection_are_taken_back_at_once(
    make_dataset,
    alice,
    no_llm,
    client_alice,
    agent_server,  # noqa: F811
):
    """The worker is alive (it beats), but Celery ended its cases when Redis went away."""
    now = timezone.now()
    WorkerHeartbeat.objects.create(name="alive:1", started_at=now, last_seen=now)
    run = _http_run(make_dataset, alice, agent_server.url)
    result = Result.objects.get(run=run)
    Result.objects.filter(pk=result.pk).update(
        status=Result.Status.RUNNING, claimed_at=now - timedelta(seconds=2), claimed_by="alive:1", attempts=1
    )
    assert services.run_reap() == 0  # a live worker's fresh claim: left alone

    WorkerHeartbeat.objects.filter(name="alive:1").update(broker_lost_at=now)
    assert workers.broker_losses() == {"alive:1": now}
    assert services.run_reap() == 1
    assert workers.broker_losses() == {}  # dealt with once

    drive(run)
    result.refresh_from_db()
    assert result.attempts == 2
    assert result.repeats == [{"cause": "broker_lost", "attempt": 2}]
    assert agent_server.headers[-1]["X-Evalsite-Attempt"] == "2"
    page = client_alice.get(f"/agents/{run.agent_id}/runs/{run.pk}/").content.decode()
    assert "1 after a worker&#x27;s lost connection to Redis" in page
    assert "lost worker" not in page


def test_a_claim_made_after_the_broker_came_back_is_left_alone(make_dataset, alice, no_llm):
    now = timezone.now()
    WorkerHeartbeat.objects.create(name="alive:2", started_at=now, last_seen=now, broker_lost_at=now)
    dataset = make_dataset(2)
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    result = Result.objects.filter(run=run).order_by("id").first()
    Result.objects.filter(pk=result.pk).update(
        status=Result.Status.RUNNING, claimed_at=now + timedelta(seconds=5), claimed_by="alive:2", attempts=1
    )
    services.run_reap()
    assert Result.objects.get(pk=result.pk).status == Result.Status.RUNNING


def test_a_lost_worker_is_named_as_the_cause(make_dataset, alice, no_llm, settings):
    seen = timezone.now() - timedelta(seconds=settings.EVALSITE_WORKER_HEARTBEAT_TTL + 1)
    WorkerHeartbeat.objects.create(name="killed:9", started_at=seen, last_seen=seen)
    dataset = make_dataset(1)
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    Result.objects.filter(run=run).update(
        status=Result.Status.RUNNING, claimed_at=seen, claimed_by="killed:9", attempts=1
    )
    assert services.run_reap() == 1
    drive(run)
    result = Result.objects.get(run=run)
    assert (result.attempts, result.repeats) == (2, [{"cause": "worker_lost", "attempt": 2}])


@pytest.mark.django_db(transaction=True)  # recorded from a thread of its own, on its own connection
def test_a_worker_records_when_it_lost_its_broker_connection(monkeypatch):
    now = timezone.now()
    WorkerHeartbeat.objects.create(name="host:1:abc", started_at=now, last_seen=now)
    monkeypatch.setattr(workers, "WORKER_ID", "host:1:abc")
    workers.broker_lost_record()
    lost_at = WorkerHeartbeat.objects.get(name="host:1:abc").broker_lost_at
    # A little after now: a claim refreshed by a case Celery was ending at that moment is taken back too.
    assert lost_at is not None and now < lost_at <= timezone.now() + workers.BROKER_LOSS_MARGIN


def test_every_case_of_a_killed_lane_counts_as_asked_again_whatever_its_id(make_dataset, alice, no_llm, settings):
    # After an earlier loss, a case with a lower id goes back to pending; a lane then takes it
    # up (saving its case in hand behind it, lane.py) while that case is with the agent. The
    # lane's worker is killed: the first is sent again; the other goes back to pending. Both
    # had been asked, so both count as asked again.
    seen = timezone.now() - timedelta(seconds=settings.EVALSITE_WORKER_HEARTBEAT_TTL + 5)
    WorkerHeartbeat.objects.create(name="killed:9", started_at=seen, last_seen=seen)
    dataset = make_dataset(2)
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    ahead, in_hand = Result.objects.filter(run=run).order_by("id")
    claimed = {"status": Result.Status.RUNNING, "token": "lane1", "claimed_by": "killed:9", "attempts": 1}
    Result.objects.filter(pk=in_hand.pk).update(**claimed, queued_at=seen - timedelta(seconds=2), claimed_at=seen)
    Result.objects.filter(pk=ahead.pk).update(**claimed, queued_at=seen - timedelta(seconds=1), claimed_at=seen)

    services.run_reap()

    in_hand.refresh_from_db()
    ahead.refresh_from_db()
    assert (in_hand.status, in_hand.attempts, in_hand.repeats) == (
        Result.Status.QUEUED,
        1,
        [{"cause": "worker_lost", "attempt": 2}],
    )
    # Back to pending (the window's free slots may queue it at once), counted as asked: the
    # lane had taken it up, so the agent had been asked about it.
    assert ahead.status in (Result.Status.PENDING, Result.Status.QUEUED)
    assert (ahead.attempts, ahead.repeats) == (1, [{"cause": "worker_lost", "attempt": 2}])
    drive(run)
    for result in (in_hand, ahead):
        result.refresh_from_db()
        assert (result.attempts, len(result.repeats)) == (2, 1)


def test_a_case_a_killed_lane_had_only_claimed_ahead_counts_no_call(make_dataset, alice, no_llm, settings):
    # Issue 48: the lane's case in hand is with the agent; the case it claimed ahead was never
    # sent. The case in hand is asked again (one repeat); the other is asked once, as new.
    seen = timezone.now() - timedelta(seconds=settings.EVALSITE_WORKER_HEARTBEAT_TTL + 5)
    WorkerHeartbeat.objects.create(name="killed:9", started_at=seen, last_seen=seen)
    dataset = make_dataset(2)
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    in_hand, ahead = Result.objects.filter(run=run).order_by("id")
    lane = {"status": Result.Status.RUNNING, "token": "lane1", "claimed_by": "killed:9", "claimed_at": seen}
    Result.objects.filter(pk=in_hand.pk).update(**lane, attempts=1, queued_at=seen - timedelta(seconds=2))
    Result.objects.filter(pk=ahead.pk).update(
        **lane, attempts=0, claimed_ahead=True, queued_at=seen - timedelta(seconds=1)
    )

    services.run_reap()
    ahead.refresh_from_db()
    assert (ahead.attempts, ahead.repeats) == (0, [])

    drive(run)
    in_hand.refresh_from_db()
    ahead.refresh_from_db()
    assert (in_hand.attempts, in_hand.repeats) == (2, [{"cause": "worker_lost", "attempt": 2}])
    assert (ahead.attempts, ahead.repeats, ahead.claimed_ahead) == (1, [], False)
    assert selectors.run_repeats(run=run).total == 1


def test_a_redelivered_message_counts_its_case_in_hand_now_and_its_case_ahead_when_taken_up(
    make_dataset, alice, no_llm
):
    dataset = make_dataset(3)
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    in_hand, ahead, _ = Result.objects.filter(run=run).order_by("id")
    now = timezone.now()
    lane = {"status": Result.Status.RUNNING, "token": in_hand.token, "claimed_at": now}
    Result.objects.filter(pk=in_hand.pk).update(**lane, attempts=1, queued_at=now - timedelta(seconds=2))
    Result.objects.filter(pk=ahead.pk).update(**lane, attempts=0, claimed_ahead=True, queued_at=now)

    # The pool child died; Celery delivers the lane's message again, with its token.
    claimed, taken_up = result_claim(in_hand.pk, in_hand.token)

    assert (claimed.pk, taken_up) == (in_hand.pk, 2)
    assert (claimed.attempts, claimed.repeats) == (2, [{"cause": "redelivered", "attempt": 2}])
    ahead.refresh_from_db()
    assert (ahead.attempts, ahead.claimed_ahead, ahead.repeats) == (0, True, [])
    assert result_take_up(ahead, in_hand.token) and ahead.attempts == 1
    assert Result.objects.get(pk=ahead.pk).attempts == 1
    assert not result_take_up(ahead, in_hand.token)  # taken up once

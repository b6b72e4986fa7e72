"""run_execute_case: claim, execute, save with counters, refill the window."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.models import Agent, AgentVersion
from evalsite import workers
from runs import services
from runs.models import Result, Run
from tests.broker import waiting
from tests.runs.conftest import drive
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db


def _start(dataset, user):
    return services.run_start(agent=dataset.agent, dataset=dataset, user=user)


def test_a_knowledge_run_completes_with_the_offline_scorer(make_dataset, alice, no_llm):
    run = drive(_start(make_dataset(4), alice))

    assert run.status == Run.Status.COMPLETED
    assert (run.total, run.completed, run.passed, run.failed, run.errored) == (4, 4, 4, 0, 0)
    assert run.average_score == 10
    assert run.started_at and run.finished_at
    result = Result.objects.filter(run=run).first()
    assert result.actual_answer == "Refunds are available within 30 days of purchase."
    assert result.verdict == "All key points"  # the offline scorer's own words, not a judge band
    assert result.attempts == 1
    assert {row["name"] for row in result.scorers} == {"jaccard", "rouge_l"}


def test_a_case_task_goes_on_with_the_runs_next_pending_cases(make_dataset, alice, no_llm):
    run = _start(make_dataset(5), alice)
    first = Result.objects.filter(run=run, status=Result.Status.QUEUED).order_by("id").first()

    services.run_execute_case(result_id=first.pk, token=first.token)

    # Its lane of the window claimed the 4th and 5th cases after it (the 2nd and 3rd are the
    # other lanes' messages), each under its own token, with no message through Redis.
    rows = list(Result.objects.filter(run=run).order_by("id").values_list("status", "token", "attempts"))
    assert [status for status, _, _ in rows] == ["pass", "queued", "queued", "pass", "pass"]
    assert {token for status, token, _ in rows if status == "pass"} == {first.token}
    assert [attempts for _, _, attempts in rows] == [1, 0, 0, 1, 1]
    run.refresh_from_db()
    assert (run.status, run.completed) == (Run.Status.RUNNING, 3)
    assert drive(run).status == Run.Status.COMPLETED


def test_after_its_lane_time_a_task_hands_its_slot_on_through_a_new_message(make_dataset, alice, no_llm, settings):
    settings.EVALSITE_RUN_LANE_SECONDS = 0
    run = _start(make_dataset(5), alice)
    first = Result.objects.filter(run=run, status=Result.Status.QUEUED).order_by("id").first()

    services.run_execute_case(result_id=first.pk, token=first.token)

    statuses = list(Result.objects.filter(run=run).order_by("id").values_list("status", flat=True))
    assert statuses == ["pass", "queued", "queued", "queued", "pending"]
    run.refresh_from_db()
    assert (run.status, run.completed) == (Run.Status.RUNNING, 1)


def _one_lane_run(make_dataset, alice, settings, cases=5):
    """A run of `cases` with a window of one, its turns a millisecond long: (run, its lane's
    first result)."""
    settings.EVALSITE_RUN_CONCURRENCY = 1
    settings.EVALSITE_RUN_LANE_SECONDS = 0.001  # every case ends past its lane's turn
    run = _start(make_dataset(cases), alice)
    return run, Result.objects.get(run=run, status=Result.Status.QUEUED)


def test_a_lane_past_its_turn_keeps_its_slot_while_no_message_waits_for_a_worker(
    make_dataset, alice, no_llm, settings, broker_queue, monkeypatch
):
    # Handing on would only cost the lane a round trip through Redis: nobody would take its turn.
    from runs.engine import lane as lanes

    monkeypatch.setattr(lanes, "LANE_MAX_TURNS", 1_000_000)
    run, first = _one_lane_run(make_dataset, alice, settings)

    services.run_execute_case(result_id=first.pk, token=first.token)

    rows = list(Result.objects.filter(run=run).order_by("id").values_list("status", "token"))
    assert rows == [("pass", first.token)] * 5
    assert waiting(broker_queue) == 0  # no message went out between its cases
    assert drive(run).status == Run.Status.COMPLETED


def _another_task_waits(lanes, monkeypatch):
    from evalsite.tasks import health_check

    health_check.delay("another task, waiting for a worker")


def _the_lanes_last_turn(lanes, monkeypatch):
    monkeypatch.setattr(lanes, "LANE_MAX_TURNS", 1)  # so no case starts late in its task's time limit


def _the_broker_cannot_say(lanes, monkeypatch):
    monkeypatch.setattr(lanes, "messages_waiting", lambda: None)  # Redis down or unreachable


@pytest.mark.parametrize("because", [_another_task_waits, _the_lanes_last_turn, _the_broker_cannot_say])
def test_a_lane_past_its_turn_hands_its_slot_on(
    make_dataset, alice, no_llm, settings, broker_queue, monkeypatch, because
):
    from runs.engine import lane as lanes

    monkeypatch.setattr(lanes, "LANE_MAX_TURNS", 1_000_000)
    run, first = _one_lane_run(make_dataset, alice, settings)
    because(lanes, monkeypatch)

    services.run_execute_case(result_id=first.pk, token=first.token)

    statuses = list(Result.objects.filter(run=run).order_by("id").values_list("status", flat=True))
    assert statuses == ["pass", "queued", "pending", "pending", "pending"]


def test_a_worker_shutting_down_hands_its_slot_on_instead_of_taking_the_next_case(make_dataset, alice, no_llm):
    # A warm shutdown (SIGTERM, a deploy) waits for the tasks in flight: a lane that went on
    # would keep the worker up for its whole lane time, running cases another worker could.
    run = _start(make_dataset(5), alice)
    first = Result.objects.filter(run=run, status=Result.Status.QUEUED).order_by("id").first()
    workers.shutdown_begin()
    try:
        services.run_execute_case(result_id=first.pk, token=first.token)
    finally:
        workers.shutdown_forget()

    statuses = list(Result.objects.filter(run=run).order_by("id").values_list("status", flat=True))
    assert statuses == ["pass", "queued", "queued", "queued", "pending"]


def test_every_queued_case_has_a_token_of_its_own(make_dataset, alice, no_llm):
    run = _start(make_dataset(5), alice)
    tokens = list(Result.objects.filter(run=run, status=Result.Status.QUEUED).values_list("token", flat=True))
    assert len(tokens) == 3 and len(set(tokens)) == 3 and all(tokens)


def test_a_redelivered_message_takes_up_the_case_its_lane_was_on(make_dataset, alice, no_llm):
    run = _start(make_dataset(5), alice)
    first = Result.objects.filter(run=run, status=Result.Status.QUEUED).order_by("id").first()
    services.run_execute_case(result_id=first.pk, token=first.token)
    # Say the lane's pool child died while it ran the 4th case: it is still running under the
    # lane's token, and the task's message comes back (late ack, rejected on worker loss).
    fourth = Result.objects.filter(run=run).order_by("id")[3]
    Result.objects.filter(pk=fourth.pk).update(status=Result.Status.RUNNING, actual_answer="", score=None)
    Run.objects.filter(pk=run.pk).update(completed=2, passed=2)

    services.run_execute_case(result_id=first.pk, token=first.token)

    fourth.refresh_from_db()
    assert (fourth.status, fourth.attempts) == (Result.Status.PASS, 2)
    run.refresh_from_db()
    assert run.completed == 3  # the 4th counted once; the 1st and 5th were not run again


def test_a_duplicate_message_does_nothing(make_dataset, alice, no_llm):
    run = _start(make_dataset(2), alice)
    result = Result.objects.filter(run=run, status=Result.Status.QUEUED).first()
    services.run_execute_case(result_id=result.pk, token=result.token)

    services.run_execute_case(result_id=result.pk, token=result.token)  # Redis delivered it twice

    result.refresh_from_db()
    run.refresh_from_db()
    assert result.attempts == 1
    assert run.completed == 1


def test_a_message_with_a_stale_token_does_nothing(make_dataset, alice, no_llm):
    run = _start(make_dataset(2), alice)
    result = Result.objects.filter(run=run, status=Result.Status.QUEUED).first()

    services.run_execute_case(result_id=result.pk, token="an-old-token")

    result.refresh_from_db()
    assert (result.status, result.attempts) == (Result.Status.QUEUED, 0)


def test_the_same_message_coming_back_after_a_crash_takes_the_case_up_again(make_dataset, alice, no_llm):
    run = _start(make_dataset(1), alice)
    result = Result.objects.get(run=run)
    # The first delivery claimed it, then its pool child died before saving.
    Result.objects.filter(pk=result.pk).update(status=Result.Status.RUNNING, attempts=1)

    services.run_execute_case(result_id=result.pk, token=result.token)

    result.refresh_from_db()
    assert (result.status, result.attempts) == (Result.Status.PASS, 2)


def test_retrying_a_database_error_is_not_counted_as_a_lost_worker(make_dataset, alice, no_llm):
    run = _start(make_dataset(1), alice)
    result = Result.objects.get(run=run)
    # Claimed as often as a dying worker may, then the database went away before the save:
    # the task's own retry must still score the case, not give it up as killed.
    Result.objects.filter(pk=result.pk).update(status=Result.Status.RUNNING, attempts=services.MAX_CASE_ATTEMPTS)

    services.run_execute_case(result_id=result.pk, token=result.token, retry=True)

    result.refresh_from_db()
    assert (result.status, result.attempts) == (Result.Status.PASS, services.MAX_CASE_ATTEMPTS)


def test_a_case_that_keeps_killing_its_worker_becomes_an_error(make_dataset, alice, no_llm):
    run = _start(make_dataset(1), alice)
    result = Result.objects.get(run=run)
    Result.objects.filter(pk=result.pk).update(attempts=services.MAX_CASE_ATTEMPTS)

    run = drive(run)

    result.refresh_from_db()
    assert result.status == Result.Status.ERROR
    assert "stopped 3 times" in result.error
    assert run.status == Run.Status.COMPLETED
    assert run.errored == 1


def test_a_broken_agent_version_fails_the_run_with_its_reason(make_dataset, alice, no_llm):
    """run_start refuses such a version (test_run_start.py); one that breaks after the
    start (an admin edit, a stale worker) still fails the run with its reason."""
    dataset = make_dataset(3, kind=Agent.Kind.HTTP, version={"http_url": "http://127.0.0.1:9/agent"})
    run = _start(dataset, alice)
    AgentVersion.objects.filter(pk=dataset.agent.current_version_id).update(http_url="")

    run = drive(run)

    assert run.status == Run.Status.FAILED
    assert run.error == "This HTTP agent has no endpoint URL. Set one on the agent's configuration."
    assert set(Result.objects.filter(run=run).values_list("status", flat=True)) == {Result.Status.SKIPPED}
    assert run.summary_note == "No summary: the run failed before its cases were scored."


def test_an_llm_agent_whose_model_goes_away_fails_the_run(make_dataset, alice, fake_llm, settings):
    run = _start(make_dataset(2, kind=Agent.Kind.LLM), alice)
    settings.EVALSITE_LLM_MODEL = ""  # the worker's configuration lost its model after the start
    run = drive(run)
    assert run.status == Run.Status.FAILED
    assert "no model" in run.error


def test_results_record_tokens_and_costs_of_agent_and_judge_separately(make_dataset, alice, fake_llm):
    run = drive(_start(make_dataset(2, kind=Agent.Kind.LLM), alice))

    result = Result.objects.filter(run=run).first()
    assert result.agent_tokens > 0 and result.judge_tokens > 0
    assert result.duration_ms is not None
    assert run.agent_tokens == sum(Result.objects.filter(run=run).values_list("agent_tokens", flat=True))
    # The summary's tokens belong to the evaluation side, on top of the judge's.
    assert run.judge_tokens > sum(Result.objects.filter(run=run).values_list("judge_tokens", flat=True))


def test_a_failing_trajectory_fails_the_case_whatever_the_judge_says(make_dataset, alice, fake_llm):
    dataset = make_dataset(1, kind=Agent.Kind.LLM, expected_tools=[{"name": "lookup_order", "args": {}}])
    run = drive(_start(dataset, alice))

    result = Result.objects.get(run=run)
    assert result.score == 8
    assert result.status == Result.Status.FAIL
    assert "The tool trajectory check failed" in result.reasoning
    assert result.scorers[0]["name"] == "trajectory" and result.scorers[0]["passed"] is False


def test_an_llm_agent_runs_its_tool_loop_with_canned_results(make_dataset, alice, fake_llm):
    tools = [
        {
            "name": "lookup_order",
            "description": "Find an order",
            "result": '{"status": "paid"}',
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
        }
    ]
    dataset = make_dataset(
        1,
        kind=Agent.Kind.LLM,
        version={"tools": tools},
        expected_tools=[{"name": "lookup_order", "args": {"order_id": "A-1"}}],
        check_tool_args=True,
    )
    fake_llm.add_rule(task="agent", tool_calls=[{"name": "lookup_order", "arguments": {"order_id": "A-1"}}], times=1)
    fake_llm.add_rule(task="agent", reply="Your order A-1 is paid.")

    run = drive(_start(dataset, alice))

    result = Result.objects.get(run=run)
    assert result.tool_calls == [{"name": "lookup_order", "args": {"order_id": "A-1"}}]
    assert result.actual_answer == "Your order A-1 is paid."
    assert result.status == Result.Status.PASS
    second_call = [r for r in fake_llm.requests if r.task == "agent"][1]
    assert second_call.messages[-1] == {
        "role": "tool",
        "tool_call_id": second_call.messages[-2]["tool_calls"][0]["id"],
        "content": '{"status": "paid"}',
    }


@pytest.mark.django_db(transaction=True)
def test_a_running_case_keeps_its_claim_fresh(make_dataset, alice, fake_llm, settings):
    settings.EVALSITE_STALE_CLAIM_SECONDS = 4  # a beat every second
    fake_llm.add_rule(task="agent", reply="Slow answer", delay=2.5)
    run = _start(make_dataset(1, kind=Agent.Kind.LLM), alice)
    result = Result.objects.get(run=run)

    services.run_execute_case(result_id=result.pk, token=result.token)

    result.refresh_from_db()
    assert result.status == Result.Status.PASS
    assert (result.claimed_at - result.queued_at).total_seconds() >= 1.5


def test_an_llm_agent_with_its_own_timeout_errors_when_the_model_is_slower(make_dataset, alice, fake_llm):
    # The console's default for agent answers (5 s under the fake) would wait for a 1.5 s answer;
    # this agent allows 1 s, so its case is an Error, and the timeout is not retried.
    fake_llm.add_rule(task="agent", reply="Too late.", delay=1.5)
    dataset = make_dataset(1, kind=Agent.Kind.LLM, version={"llm_timeout": 1})

    run = drive(_start(dataset, alice))

    result = Result.objects.get(run=run)
    assert result.status == Result.Status.ERROR
    assert result.error == "The model did not answer within 1 s."
    assert fake_llm.count(task="agent") == 1


def test_an_llm_agent_without_its_own_timeout_waits_as_long_as_the_default(make_dataset, alice, fake_llm):
    fake_llm.add_rule(task="agent", reply="Refunds are available within 30 days of purchase.", delay=1.5)
    dataset = make_dataset(1, kind=Agent.Kind.LLM)

    run = drive(_start(dataset, alice))

    result = Result.objects.get(run=run)
    assert result.status != Result.Status.ERROR, result.error
    assert result.actual_answer == "Refunds are available within 30 days of purchase."


def _lane_thread(run):
    import threading

    first = Result.objects.filter(run=run, status=Result.Status.QUEUED).order_by("id").first()
    lane = threading.Thread(target=services.run_execute_case, kwargs={"result_id": first.pk, "token": first.token})
    lane.start()
    return first, lane


def _lane_with_a_slow_first_case(make_dataset, alice, fake_llm, *, cases, delay, wait=True):
    """A run of `cases` whose first case's agent answers after `delay` s, its first lane
    in a thread: (run, the lane's first result, the thread), once that call is in flight."""
    fake_llm.add_rule(task="agent", contains="Question 01", reply="Refunds are available within 30 days.", delay=delay)
    run = _start(make_dataset(cases, kind=Agent.Kind.LLM), alice)
    first, lane = _lane_thread(run)
    if wait:
        wait_for(lambda: fake_llm.count("agent", run=run.pk) == 1, timeout=30, what="the first case's agent call")
    return run, first, lane


def _held_by(token):
    return list(Result.objects.filter(token=token, status=Result.Status.RUNNING).order_by("id"))


@pytest.mark.django_db(transaction=True)
def test_a_lane_claims_its_next_case_while_the_case_in_hand_calls_its_model(make_dataset, alice, fake_llm):
    run, first, lane = _lane_with_a_slow_first_case(make_dataset, alice, fake_llm, cases=8, delay=1.5)

    # Its next case is claimed already (the 4th: the 2nd and 3rd are the other lanes'),
    # so the lane can call its model as soon as the 1st is judged, and save the 1st meanwhile.
    wait_for(lambda: len(_held_by(first.token)) == 2, timeout=10, what="the lane's case claimed ahead")
    held = _held_by(first.token)
    assert [row.case.position for row in held] == [0, 3]
    lane.join(timeout=60)

    rows = Result.objects.filter(run=run).order_by("id")
    lane_rows = [row for row in rows if row.token == first.token]
    assert all(row.status == Result.Status.PASS and row.attempts == 1 for row in lane_rows)
    assert {row.status for row in rows if row.token != first.token} <= {Result.Status.QUEUED, Result.Status.PENDING}
    run.refresh_from_db()
    assert run.completed == run.passed == len(lane_rows)
    for row in lane_rows:  # each asked and judged once
        assert fake_llm.count("agent", case=row.pk) == fake_llm.count("judge", case=row.pk) == 1
    assert fake_llm.peak_concurrency(run=run.pk) == 1


@pytest.mark.django_db(transaction=True)
def test_the_runs_last_cases_are_not_claimed_ahead(make_dataset, alice, fake_llm):
    # A case held behind a slow one would wait while the other lanes stand idle at the end.
    run, first, lane = _lane_with_a_slow_first_case(make_dataset, alice, fake_llm, cases=5, delay=1.0)
    held_while_calling = _held_by(first.token)
    lane.join(timeout=60)

    assert [row.pk for row in held_while_calling] == [first.pk]


@pytest.mark.django_db(transaction=True)
def test_a_lane_out_of_time_hands_its_case_claimed_ahead_on_as_its_one_message(make_dataset, alice, fake_llm, settings):
    settings.EVALSITE_RUN_LANE_SECONDS = 0.5  # past it when the slow first case ends
    run, first, lane = _lane_with_a_slow_first_case(make_dataset, alice, fake_llm, cases=8, delay=1.0, wait=False)
    lane.join(timeout=60)

    rows = list(Result.objects.filter(run=run).order_by("id"))
    assert [row.status for row in rows] == ["pass", "queued", "queued", "queued"] + ["pending"] * 4
    fourth = rows[3]
    assert fourth.token not in ("", first.token) and fourth.attempts == 0  # never started: no attempt
    assert fake_llm.count("agent", case=fourth.pk) == 0
    assert len({row.token for row in rows if row.status == Result.Status.QUEUED}) == 3  # the window, not one more


@pytest.mark.django_db(transaction=True)
def test_a_lane_whose_cases_are_quicker_than_its_thread_saves_then_claims(make_dataset, alice, fake_llm, monkeypatch):
    # With model calls too quick to hide the thread's work, claiming ahead only adds CPU.
    from runs.engine import lane as lanes

    monkeypatch.setattr(lanes, "CLAIM_AHEAD_MIN_CASE_MS", 60_000)  # every case here is "quick"
    run = _start(make_dataset(8, kind=Agent.Kind.LLM), alice)
    first, lane = _lane_thread(run)
    lane.join(timeout=60)

    lane_rows = [row for row in Result.objects.filter(run=run).order_by("id") if row.token == first.token]
    assert len(lane_rows) == 6 and all(row.status == Result.Status.PASS for row in lane_rows)
    # A case claimed ahead was claimed before the lane's previous case was saved. Only the
    # lane's first case did (how long its cases take is not known before one has run).
    ahead = [
        after for before, after in zip(lane_rows, lane_rows[1:], strict=False) if after.claimed_at < before.finished_at
    ]
    assert ahead == [lane_rows[1]]


@pytest.mark.django_db(transaction=True)
def test_a_lane_saves_its_case_behind_once_its_next_case_request_has_gone_out(
    make_dataset, alice, fake_llm, monkeypatch
):
    # Not earlier: the save would share the interpreter with the building of that request.
    from runs.engine import lane as lanes
    from runs.engine import saving

    events = []
    told, save = lanes.llm_client.on_request_sent, saving.result_save_ahead

    def on_request_sent(callback):
        told(callback and (lambda: (events.append("request sent"), callback())))

    def result_save_ahead(result, *args, **kwargs):
        if result is not None:
            events.append(f"save {result.pk}")
        return save(result, *args, **kwargs)

    monkeypatch.setattr(lanes.llm_client, "on_request_sent", on_request_sent)
    monkeypatch.setattr(saving, "result_save_ahead", result_save_ahead)
    monkeypatch.setattr(lanes, "SAVE_BEHIND_WAIT", 60.0)  # so only the request can start it
    fake_llm.add_rule(task="agent", contains="Question 04", reply="Refunds are available within 30 days.", delay=2.0)
    run, first, lane = _lane_with_a_slow_first_case(make_dataset, alice, fake_llm, cases=8, delay=1.0)
    fourth = Result.objects.filter(run=run).order_by("id")[3]

    wait_for(lambda: fake_llm.count("agent", case=fourth.pk) == 1, timeout=30, what="the 4th case's agent call")
    wait_for(
        lambda: Result.objects.get(pk=first.pk).status == Result.Status.PASS,
        timeout=1.5,
        what="the 1st case saved while the 4th calls its model",
    )
    assert events[:2] == ["request sent", f"save {first.pk}"]
    lane.join(timeout=60)
    assert not lane.is_alive()


@pytest.mark.django_db(transaction=True)
def test_a_lane_whose_next_case_sends_no_model_request_saves_as_that_case_ends(
    make_dataset, alice, no_llm, monkeypatch
):
    # The offline scorer asks no model: nothing goes out to start the save behind a case.
    import time

    from runs.engine import lane as lanes

    monkeypatch.setattr(lanes, "SAVE_BEHIND_WAIT", 60.0)
    monkeypatch.setattr(lanes, "CLAIM_AHEAD_MIN_CASE_MS", 0)  # every case claims ahead
    run = _start(make_dataset(6), alice)
    first, lane = _lane_thread(run)
    began = time.monotonic()
    lane.join(timeout=90)

    assert not lane.is_alive() and time.monotonic() - began < 55
    lane_rows = [row for row in Result.objects.filter(run=run).order_by("id") if row.token == first.token]
    assert len(lane_rows) == 4 and all(row.status == Result.Status.PASS for row in lane_rows)


@pytest.mark.django_db(transaction=True)
def test_a_lane_that_holds_no_case_ahead_does_not_look_for_one_as_it_saves(make_dataset, alice, fake_llm):
    # At 0 ms the lane's cases are quicker than its thread: it saves, then claims, in one
    # transaction, and a lane that took up one case knows it holds no other.
    run = _start(make_dataset(10, kind=Agent.Kind.LLM), alice)
    first = Result.objects.filter(run=run, status=Result.Status.QUEUED).order_by("id").first()

    with CaptureQueriesContext(connection) as captured:  # the lane's own connection, not its thread's
        services.run_execute_case(result_id=first.pk, token=first.token)

    lane_rows = [row for row in Result.objects.filter(run=run).order_by("id") if row.token == first.token]
    assert len(lane_rows) == 8 and all(row.status == Result.Status.PASS for row in lane_rows)
    # The lane's cases running under its token, listed (a LIMIT 1 read is its next case).
    held_lookups = [
        query["sql"]
        for query in captured.captured_queries
        if query["sql"].startswith("SELECT") and "LIMIT" not in query["sql"] and f"'{first.token}'" in query["sql"]
    ]
    assert held_lookups == []

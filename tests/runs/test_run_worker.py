"""Runs driven by a real Celery worker process on Redis against the fake LLM server."""

from datetime import timedelta

import pytest
import redis
from django.utils import timezone

from agents.models import Agent
from runs import services
from runs.models import Result, Run
from tests.broker import waiting
from tests.runs.conftest import wait_settled
from tests.waiting import wait_for

pytestmark = pytest.mark.worker


def _start(dataset, user):
    return services.run_start(agent=dataset.agent, dataset=dataset, user=user)


def test_a_run_never_has_more_than_three_cases_in_flight(celery_worker, fake_llm, make_dataset, alice):
    fake_llm.set_latency(0.3)
    dataset = make_dataset(12, kind=Agent.Kind.LLM)
    worker = celery_worker(concurrency=6)

    run = wait_settled(_start(dataset, alice), worker=worker)

    assert run.status == Run.Status.COMPLETED
    assert (run.completed, run.passed, run.failed, run.errored) == (12, 12, 0, 0)
    assert fake_llm.peak_concurrency(run=run.pk) == 3
    assert fake_llm.count(task="agent", run=run.pk) == 12
    assert fake_llm.count(task="judge", run=run.pk) == 12
    assert run.average_score == 8
    assert run.summary.startswith("Fake answer to:")


def test_two_runs_at_once_each_keep_their_own_limit(celery_worker, fake_llm, make_dataset, alice):
    fake_llm.set_latency(0.3)
    first_dataset = make_dataset(9, kind=Agent.Kind.LLM)
    second_dataset = make_dataset(9, kind=Agent.Kind.LLM)
    worker = celery_worker(concurrency=8)

    first, second = _start(first_dataset, alice), _start(second_dataset, alice)
    wait_settled(first, worker=worker)
    wait_settled(second, worker=worker)

    for run in (first, second):
        assert run.status == Run.Status.COMPLETED
        assert run.completed == 9
        assert fake_llm.peak_concurrency(run=run.pk) <= 3
    # Both ran at the same time, not one after the other.
    assert fake_llm.peak_concurrency() > 3


def test_stop_mid_run_keeps_finished_results_and_starts_nothing_after(celery_worker, fake_llm, make_dataset, alice):
    fake_llm.set_latency(0.4)
    dataset = make_dataset(12, kind=Agent.Kind.LLM)
    worker = celery_worker(concurrency=4)
    run = _start(dataset, alice)
    wait_for(lambda: Result.objects.filter(run=run, status=Result.Status.PASS).count() >= 3, what="3 finished cases")

    run = services.run_stop(run=run)
    run = wait_settled(run, worker=worker)

    assert run.status == Run.Status.STOPPED
    results = Result.objects.filter(run=run)
    started = results.exclude(status=Result.Status.SKIPPED)
    skipped = results.filter(status=Result.Status.SKIPPED)
    assert 3 <= started.count() < 12
    assert all(result.status == Result.Status.PASS for result in started)  # in-flight ones finished and were kept
    assert run.completed == run.passed == started.count()
    assert all(result.error == "Not run: the run was stopped." for result in skipped)
    assert not started.filter(claimed_at__gt=run.stop_requested_at).exists()
    asked = {request.trace["case"] for request in fake_llm.requests if request.task == "agent"}
    assert asked == {str(result.pk) for result in started}


@pytest.mark.chaos
def test_a_killed_worker_loses_nothing_and_scores_every_case_exactly_once(
    celery_worker, fake_llm, make_dataset, alice, settings
):
    # Short, so the test needn't wait two minutes; live cases refresh their claims every 2 s.
    settings.EVALSITE_STALE_CLAIM_SECONDS = 8
    fake_llm.set_latency(0.2)
    # Cases 5-10 hang in their first judge call, so the kill lands mid-case at a known point
    # (~40%), when every lane hangs: a lane claims its next case ahead, so a marked case may
    # wait unstarted behind another, but six in a row give each of the three lanes one.
    marks = tuple(f"Question {number:02d}" for number in range(5, 11))
    for mark in marks:
        fake_llm.add_rule(task="judge", contains=mark, hang=True, times=1)
    dataset = make_dataset(12, kind=Agent.Kind.LLM)
    first = celery_worker(concurrency=3)
    run = _start(dataset, alice)

    def hanging() -> list:
        return [
            r for r in fake_llm.requests if r.task == "judge" and r.seq_out is None and any(m in r.text for m in marks)
        ]

    wait_for(lambda: len(hanging()) == 3, what="the three hanging judge calls")
    interrupted_ids = {r.trace.get("case") for r in hanging()}

    first.kill()
    fake_llm.clear_rules()  # the marked cases that never started would hang on the second worker
    second = celery_worker(concurrency=3, beat=True)
    run = wait_settled(run, worker=second)

    assert run.status == Run.Status.COMPLETED
    results = list(Result.objects.filter(run=run))
    assert len(results) == 12
    statuses = [(r.question[:11], r.status, r.attempts, r.error) for r in results]
    assert (run.completed, run.passed) == (12, 12), "; ".join(map(str, statuses))
    for result in results:
        answered = [
            r
            for r in fake_llm.requests
            if r.task == "judge" and r.trace.get("case") == str(result.pk) and r.status == 200
        ]
        calls = [(r.status, r.seq_in, r.seq_out) for r in fake_llm.requests if r.trace.get("case") == str(result.pk)]
        assert len(answered) == 1, f"result {result.pk} ({result.question[:12]}, attempts {result.attempts}): {calls}"
    interrupted = [r for r in results if str(r.pk) in interrupted_ids]
    assert len(interrupted) == 3 and [r.attempts for r in interrupted] == [2, 2, 2]


def test_faults_stay_in_their_case_and_the_run_completes(celery_worker, fake_llm, make_dataset, alice, settings):
    settings.EVALSITE_LLM_TIMEOUT = 1.5
    settings.EVALSITE_LLM_RETRIES = 2
    fake_llm.add_rule(task="judge", contains="RATE-LIMITED", status=429, headers={"Retry-After": "0"}, times=2)
    fake_llm.add_rule(task="agent", contains="HANGING", hang=True)
    fake_llm.add_rule(task="judge", contains="BROKEN-JUDGE", broken_json=True)
    questions = [
        "Question 01: RATE-LIMITED judge, how long is the refund window?",
        "Question 02: HANGING agent, how long is the refund window?",
        "Question 03: BROKEN-JUDGE, how long is the refund window?",
        "Question 04: how long is the refund window?",
    ]
    dataset = make_dataset(4, kind=Agent.Kind.LLM, questions=questions)
    worker = celery_worker(concurrency=3)

    run = wait_settled(_start(dataset, alice), worker=worker)

    assert run.status == Run.Status.COMPLETED
    assert (run.completed, run.passed, run.errored) == (4, 2, 2)
    limited, hanging, broken, plain = Result.objects.filter(run=run).order_by("case__position")
    assert limited.status == Result.Status.PASS
    assert fake_llm.count(task="judge", case=limited.pk) == 3  # two 429s, then the answer
    assert hanging.status == Result.Status.ERROR
    # A timeout is not retried (EVALSITE_LLM_RETRY_TIMEOUTS): the server may still be generating.
    assert hanging.error == "The model did not answer within 1.5 s."
    assert fake_llm.count(task="agent", case=hanging.pk) == 1
    assert fake_llm.count(task="judge", case=hanging.pk) == 0
    assert broken.status == Result.Status.ERROR
    assert broken.error.startswith("The judge failed: The model's answer was not valid JSON after one repair attempt")
    assert broken.score is None
    assert broken.actual_answer.startswith("Fake answer to:")  # the agent's answer is kept
    assert fake_llm.count(task="judge", case=broken.pk) == 2
    assert plain.status == Result.Status.PASS


def test_multi_turn_repeats_and_smoke_variants(celery_worker, fake_llm, make_dataset, alice):
    fake_llm.add_rule(task="paraphrase", reply="Paraphrased: when do I stop getting my money back?")
    fake_llm.add_rule(
        task="judge", contains="Paraphrased:", json={"score": 3, "verdict": "Incorrect", "reasoning": "Off."}
    )
    fake_llm.add_rule(
        task="judge", contains="Question 01", json={"score": 6, "verdict": "Partial", "reasoning": "Half."}, times=1
    )
    # The judge asked once per result: re-asking it near the line (tests/runs/test_judge_stability.py)
    # would turn case 1's 6 into the median of 6, 8, 8.
    dataset = make_dataset(3, kind=Agent.Kind.LLM, dataset={"number_of_requests": 2, "judge_resamples": 0})
    cases = list(dataset.cases.order_by("position"))
    cases[1].turns = [{"user": "I bought the Team plan last week.", "expected": "Noted."}]
    cases[1].save()
    cases[2].smoke_count = 2
    cases[2].smoke_guidance = "Sound like a customer in a hurry."
    cases[2].save()
    worker = celery_worker(concurrency=3)

    run = wait_settled(_start(dataset, alice), worker=worker)

    assert run.status == Run.Status.COMPLETED
    assert run.total == 8  # 3 cases x 2 repeats + 2 variants
    assert (run.completed, run.passed, run.failed) == (8, 5, 1)  # variants count in neither
    multi = Result.objects.filter(run=run, case__position=1)
    assert multi.count() == 2
    for result in multi:
        assert [m["role"] for m in result.conversation] == ["user", "assistant", "user", "assistant"]
        agent_calls = [r for r in fake_llm.requests if r.task == "agent" and r.trace["case"] == str(result.pk)]
        assert len(agent_calls) == 2
        assert [m["role"] for m in agent_calls[1].messages] == ["system", "user", "assistant", "user"]
        assert fake_llm.count(task="judge", case=result.pk) == 1  # scored once, on the whole conversation
    variants = Result.objects.filter(run=run, variant__gt=0)
    assert {v.question for v in variants} == {"Paraphrased: when do I stop getting my money back?"}
    assert {v.status for v in variants} == {Result.Status.FAIL}
    assert run.robustness == 0.0
    assert run.average_score == pytest.approx((6 + 8 * 5) / 6)  # variants excluded
    assert run.consistency == pytest.approx(2 / 3)  # case 1 scored 6 and 8, the others 8 and 8


def test_a_knowledge_agent_runs_end_to_end_with_no_model(celery_worker, no_llm, make_dataset, alice):
    questions = ["How long is the refund window?", "When is support open?", "What is the support phone number?"]
    dataset = make_dataset(3, questions=questions)
    cases = list(dataset.cases.order_by("position"))
    cases[1].expected_answer = "Support is open 9-17 CET on weekdays."
    cases[2].expected_answer = "Call +1 555 0100 for support."
    for case in cases[1:]:
        case.save()
    worker = celery_worker(concurrency=2)

    run = wait_settled(_start(dataset, alice), worker=worker)

    assert run.status == Run.Status.COMPLETED
    assert run.scorer == Run.Scorer.OFFLINE
    assert (run.passed, run.failed, run.errored) == (2, 1, 0)
    refund, hours, phone = Result.objects.filter(run=run).order_by("case__position")
    assert refund.actual_answer == "Refunds are available within 30 days of purchase."
    assert refund.retrieval_context == ["Refunds are available within 30 days of purchase."]
    assert refund.score == 10
    assert refund.reasoning.startswith("Offline reference scorer (no judge model configured)")
    assert hours.score == 10
    assert phone.score == 0
    assert "Missed:" in phone.reasoning
    assert run.summary == ""
    assert run.summary_note.startswith("No summary: no model is configured")


@pytest.mark.chaos
def test_a_flushed_redis_loses_no_case(celery_worker, fake_llm, make_dataset, alice, settings):
    settings.EVALSITE_STALE_QUEUE_SECONDS = 4
    fake_llm.set_latency(0.3)
    dataset = make_dataset(8, kind=Agent.Kind.LLM)
    # One process for a window of three: two queued messages wait in Redis at any moment.
    worker = celery_worker(concurrency=1, beat=True, env={"EVALSITE_STALE_QUEUE_SECONDS": "4"})
    run = _start(dataset, alice)
    wait_for(lambda: Result.objects.filter(run=run, status=Result.Status.PASS).count() >= 2, what="2 finished cases")

    client = redis.Redis.from_url(settings.REDIS_CLIENT_URL)
    wait_for(lambda: waiting(client) >= 1, what="a case message waiting in Redis")
    client.flushall()  # that message is gone: only the reaper can bring its case back
    client.close()
    run = wait_settled(run, worker=worker)

    assert run.status == Run.Status.COMPLETED
    assert (run.completed, run.passed) == (8, 8)
    for result in Result.objects.filter(run=run):
        answered = [
            r
            for r in fake_llm.requests
            if r.task == "judge" and r.trace.get("case") == str(result.pk) and r.status == 200
        ]
        assert len(answered) == 1


def test_a_case_taken_back_from_a_dead_worker_goes_ahead_of_the_waiting_lanes(
    celery_worker, fake_llm, make_dataset, alice, settings
):
    # With more lanes than worker processes (20 runs on 12), the queue always holds lanes
    # waiting for their turn: a case the reaper takes back from a killed worker goes to the
    # front, or its run waits behind all of them with a slot of its window empty. One worker
    # process (not the shipped 4) makes the order the worker takes its messages in visible.
    dataset = make_dataset(6, kind=Agent.Kind.LLM)
    waiting = _start(dataset, alice)  # its 3 messages wait in Redis: no worker yet
    lost = _start(make_dataset(1, kind=Agent.Kind.LLM), alice)
    # Say a worker that died long ago had claimed the lost run's case.
    stale = timezone.now() - timedelta(seconds=settings.EVALSITE_STALE_CLAIM_SECONDS + 1)
    Result.objects.filter(run=lost).update(status=Result.Status.RUNNING, claimed_at=stale, attempts=1)
    assert services.run_reap() == 1

    worker = celery_worker(concurrency=1)
    lost = wait_settled(lost, worker=worker)

    assert lost.status == Run.Status.COMPLETED
    first = min((r for r in fake_llm.requests if r.task == "agent"), key=lambda r: r.seq_in)
    assert first.trace["run"] == str(lost.pk), "the lost case waited behind the queued lanes"
    assert wait_settled(waiting, worker=worker).completed == 6

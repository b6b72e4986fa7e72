"""The rewrite job behind the Apply dialog (suggestions/rewrite.py): one task per field, progress
on the row, Cancel, a failure per field with Try again or Keep, and the reaper of a dead job."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import time_machine
from django.core.exceptions import ValidationError
from django.utils import timezone

from evalsite.models import WorkerHeartbeat
from suggestions import rewrite
from suggestions.models import RewriteJob
from suggestions.tasks import rewrite_field_run as rewrite_field_run_task
from tests.suggestions.conftest import suggestion

TASK = "suggestions.tasks.rewrite_field_run"
Field = RewriteJob.FieldStatus


@pytest.fixture
def three_fields(failing_run):
    """Suggestions aimed at three fields: the knowledge, the guardrails, the instructions ("other")."""
    return [
        suggestion(failing_run, 0, title="Add the hotline", category="knowledge"),
        suggestion(failing_run, 1, title="Never guess", category="guardrails"),
        suggestion(failing_run, 2, title="Be brief", category="other"),
    ]


def _rewritten(request: dict) -> dict:
    """The fake model's rewrite: the field's text plus a line naming it, so each can be told apart."""
    field = request["messages"][0]["content"].split(" section")[0].rsplit(" ", 1)[-1]
    current = request["messages"][1]["content"].split(":\n", 1)[1].split("\n\nChanges to make:")[0]
    return {"json": {"text": f"{current}\nRewritten {field}.".lstrip()}}


def _added(text: str) -> str:
    return text.rsplit("\n", 1)[-1]


def _start(run, alice, chosen, capture):
    with capture() as callbacks:
        job = rewrite.rewrite_job_start(run=run, user=alice, suggestions=chosen)
    return job, callbacks


@pytest.mark.django_db
def test_starting_records_each_field_and_sends_one_message_after_commit(
    failing_run, alice, three_fields, fake_llm, django_capture_on_commit_callbacks, tasks_run_here
):
    job, callbacks = _start(failing_run, alice, three_fields, django_capture_on_commit_callbacks)

    assert tasks_run_here == []  # nothing before the commit
    assert job.status == RewriteJob.Status.QUEUED and job.base_version == failing_run.agent.current_version
    # In review order (instructions, skills, knowledge, guardrails), each with the text it rewrites.
    assert [(e["name"], e["status"]) for e in job.fields] == [
        ("instructions", Field.PENDING),
        ("knowledge", Field.PENDING),
        ("guardrails", Field.PENDING),
    ]
    assert job.fields[1]["current"] == failing_run.agent.current_version.knowledge
    assert job.suggestion_ids == [s.pk for s in three_fields]
    assert len(callbacks) == 1 and fake_llm.count() == 0


@pytest.mark.django_db
def test_the_job_rewrites_one_field_per_task_and_settles_done(
    failing_run, alice, three_fields, fake_llm, django_capture_on_commit_callbacks, tasks_run_here
):
    fake_llm.add_rule(task="rewrite", handler=_rewritten)

    with django_capture_on_commit_callbacks(execute=True):
        job = rewrite.rewrite_job_start(run=failing_run, user=alice, suggestions=three_fields)

    job.refresh_from_db()
    assert job.status == RewriteJob.Status.DONE and job.finished_at is not None
    assert [(e["name"], e["status"], _added(e["text"])) for e in job.fields] == [
        ("instructions", Field.DONE, "Rewritten instructions."),
        ("knowledge", Field.DONE, "Rewritten knowledge."),
        ("guardrails", Field.DONE, "Rewritten guardrails."),
    ]
    assert job.fields[1]["text"].startswith(job.fields[1]["current"])
    # One task, one model call per field, each task handing on to the next field.
    assert [(name, args[2]) for name, args, _ in tasks_run_here] == [
        (TASK, "instructions"),
        (TASK, "knowledge"),
        (TASK, "guardrails"),
    ]
    assert fake_llm.count(task="rewrite") == 3
    assert "Be brief" in fake_llm.requests[0].messages[1]["content"]  # the instructions got the "other" one


@pytest.mark.django_db(transaction=True)
def test_progress_is_on_the_row_while_a_field_is_rewritten(failing_run, alice, three_fields, fake_llm, tasks_run_here):
    seen: list[list[tuple[str, str]]] = []

    def look(request: dict) -> dict:
        # The fake answers from its own thread: what the dialog's poll would read now.
        job = RewriteJob.objects.get(run=failing_run)
        seen.append([(e["name"], e["status"]) for e in job.fields])
        return _rewritten(request)

    fake_llm.add_rule(task="rewrite", handler=look)

    rewrite.rewrite_job_start(run=failing_run, user=alice, suggestions=three_fields)  # commits: the tasks run

    assert seen[1] == [("instructions", Field.DONE), ("knowledge", Field.RUNNING), ("guardrails", Field.PENDING)]
    assert len(seen) == 3


@pytest.mark.django_db(transaction=True)
def test_cancel_stops_the_job_and_no_model_call_follows(failing_run, alice, three_fields, fake_llm, tasks_run_here):
    def cancel_meanwhile(request: dict) -> dict:
        # The user presses Cancel while the first field's call is in flight.
        rewrite.rewrite_job_cancel(job=RewriteJob.objects.get(run=failing_run))
        return _rewritten(request)

    fake_llm.add_rule(task="rewrite", handler=cancel_meanwhile)

    job = rewrite.rewrite_job_start(run=failing_run, user=alice, suggestions=three_fields)  # commits: the task runs

    job.refresh_from_db()
    assert job.status == RewriteJob.Status.CANCELLED
    assert fake_llm.count(task="rewrite") == 1  # the call in flight, and none after it
    assert [(e["status"], e["text"]) for e in job.fields] == [
        (Field.RUNNING, ""),  # its answer was dropped
        (Field.PENDING, ""),
        (Field.PENDING, ""),
    ]
    # A message that arrives late (a duplicate, a redelivery) does nothing either.
    rewrite_field_run_task.delay(job.pk, job.token, "knowledge")
    assert fake_llm.count(task="rewrite") == 1


@pytest.mark.django_db
def test_a_cancelled_job_never_calls_the_model(
    failing_run, alice, three_fields, fake_llm, django_capture_on_commit_callbacks, tasks_run_here
):
    job, callbacks = _start(failing_run, alice, three_fields, django_capture_on_commit_callbacks)
    rewrite.rewrite_job_cancel(job=job)

    callbacks[0]()  # the message reaches a worker after Cancel

    assert fake_llm.count() == 0
    job.refresh_from_db()
    assert job.status == RewriteJob.Status.CANCELLED and job.field_count(Field.PENDING) == 3


@pytest.mark.django_db
def test_a_field_that_fails_keeps_its_message_and_the_others_are_rewritten(
    failing_run, alice, three_fields, fake_llm, settings, django_capture_on_commit_callbacks, tasks_run_here
):
    settings.EVALSITE_LLM_RETRIES = 0
    fake_llm.add_rule(task="rewrite", contains="Current knowledge", status=500)
    fake_llm.add_rule(task="rewrite", handler=_rewritten)

    with django_capture_on_commit_callbacks(execute=True):
        job = rewrite.rewrite_job_start(run=failing_run, user=alice, suggestions=three_fields)

    job.refresh_from_db()
    assert job.status == RewriteJob.Status.DONE
    statuses = {e["name"]: e["status"] for e in job.fields}
    assert statuses == {"instructions": Field.DONE, "knowledge": Field.FAILED, "guardrails": Field.DONE}
    knowledge = job.fields[1]
    assert knowledge["error"].startswith("The model could not rewrite the knowledge: ")
    assert "Traceback" not in knowledge["error"] and "Error(" not in knowledge["error"]


@pytest.mark.django_db
def test_a_rewrite_that_loses_the_field_fails_that_field_with_the_reason(
    failing_run, alice, fake_llm, django_capture_on_commit_callbacks, tasks_run_here
):
    fake_llm.add_rule(task="rewrite", json={"text": "the whole rewritten section"})

    with django_capture_on_commit_callbacks(execute=True):
        job = rewrite.rewrite_job_start(run=failing_run, user=alice, suggestions=[suggestion(failing_run, 0)])

    job.refresh_from_db()
    assert job.fields[0]["status"] == Field.FAILED
    assert "returned its instructions' own wording" in job.fields[0]["error"]


@pytest.mark.django_db
def test_a_rewrite_cut_at_its_length_limit_is_refused_with_the_reason(
    failing_run, alice, fake_llm, django_capture_on_commit_callbacks, tasks_run_here
):
    # Complete JSON, but the model stopped at its limit: the text may have lost its end.
    fake_llm.add_rule(task="rewrite", handler=_rewritten, finish_reason="length")

    with django_capture_on_commit_callbacks(execute=True):
        job = rewrite.rewrite_job_start(run=failing_run, user=alice, suggestions=[suggestion(failing_run, 0)])

    job.refresh_from_db()
    limit = next(r for r in fake_llm.requests if r.task == "rewrite").body["max_tokens"]
    assert job.fields[0]["status"] == Field.FAILED and job.fields[0]["text"] == ""
    assert f"was cut at its length limit of {limit} tokens" in job.fields[0]["error"]
    assert "EVALSITE_LLM_MAX_TOKENS_REWRITE" in job.fields[0]["error"]


@pytest.mark.django_db
def test_a_failed_field_can_be_tried_again_alone(
    failing_run, alice, three_fields, fake_llm, settings, django_capture_on_commit_callbacks, tasks_run_here
):
    settings.EVALSITE_LLM_RETRIES = 0
    fake_llm.add_rule(task="rewrite", contains="Current knowledge", status=500, times=1)
    fake_llm.add_rule(task="rewrite", handler=_rewritten)
    with django_capture_on_commit_callbacks(execute=True):
        job = rewrite.rewrite_job_start(run=failing_run, user=alice, suggestions=three_fields)
    job.refresh_from_db()
    old_token = job.token

    with django_capture_on_commit_callbacks(execute=True):
        job = rewrite.rewrite_job_retry(job=job, field="knowledge")

    job.refresh_from_db()
    assert job.status == RewriteJob.Status.DONE and job.token != old_token
    assert [(e["status"], _added(e["text"])) for e in job.fields][1] == (Field.DONE, "Rewritten knowledge.")
    assert fake_llm.count(task="rewrite") == 4  # three, then the knowledge again, and only it
    # The message of the first attempt is stale: it does nothing.
    rewrite_field_run_task.delay(job.pk, old_token, "knowledge")
    assert fake_llm.count(task="rewrite") == 4


@pytest.mark.django_db
def test_a_failed_field_can_keep_its_original_text(
    failing_run, alice, three_fields, fake_llm, settings, django_capture_on_commit_callbacks, tasks_run_here
):
    settings.EVALSITE_LLM_RETRIES = 0
    fake_llm.add_rule(task="rewrite", contains="Current knowledge", status=500)
    fake_llm.add_rule(task="rewrite", handler=_rewritten)
    with django_capture_on_commit_callbacks(execute=True):
        job = rewrite.rewrite_job_start(run=failing_run, user=alice, suggestions=three_fields)

    job = rewrite.rewrite_field_keep(job=job, field="knowledge")

    assert job.fields[1]["status"] == Field.KEPT
    assert job.field_count(Field.FAILED) == 0 and job.field_count(Field.DONE) == 2
    with pytest.raises(ValidationError, match="not a failed rewrite"):
        rewrite.rewrite_field_keep(job=job, field="guardrails")


@pytest.mark.django_db
def test_trying_a_cancelled_job_again_rewrites_what_it_left_and_keeps_what_was_done(
    failing_run, alice, three_fields, fake_llm, django_capture_on_commit_callbacks, tasks_run_here
):
    fake_llm.add_rule(task="rewrite", handler=_rewritten)
    job, _ = _start(failing_run, alice, three_fields, django_capture_on_commit_callbacks)
    fields = [{**job.fields[0], "status": Field.DONE, "text": "Kept from before."}, *job.fields[1:]]
    RewriteJob.objects.filter(pk=job.pk).update(fields=fields, status=RewriteJob.Status.CANCELLED)
    job.refresh_from_db()

    with django_capture_on_commit_callbacks(execute=True):
        rewrite.rewrite_job_retry(job=job)

    job.refresh_from_db()
    assert job.status == RewriteJob.Status.DONE
    assert job.fields[0]["text"] == "Kept from before."
    assert [args[2] for _, args, _ in tasks_run_here] == ["knowledge", "guardrails"]
    with pytest.raises(ValidationError, match="Choose the field"):
        rewrite.rewrite_job_retry(job=job)  # a finished job is retried field by field


@pytest.mark.django_db
def test_retry_and_keep_wait_for_the_job_to_settle(
    failing_run, alice, three_fields, django_capture_on_commit_callbacks
):
    job, _ = _start(failing_run, alice, three_fields, django_capture_on_commit_callbacks)

    with pytest.raises(ValidationError, match="still going"):
        rewrite.rewrite_job_retry(job=job)
    with pytest.raises(ValidationError, match="still going"):
        rewrite.rewrite_field_keep(job=job, field="knowledge")


@pytest.mark.django_db
def test_a_new_rewrite_cancels_the_one_still_going(
    failing_run, alice, three_fields, django_capture_on_commit_callbacks
):
    first, _ = _start(failing_run, alice, three_fields, django_capture_on_commit_callbacks)
    second, _ = _start(failing_run, alice, three_fields[:1], django_capture_on_commit_callbacks)

    first.refresh_from_db()
    assert first.status == RewriteJob.Status.CANCELLED
    assert second.status == RewriteJob.Status.QUEUED


@pytest.mark.django_db
def test_http_agents_get_no_rewrite(team, alice, make_run):
    from tests.factories import AgentFactory

    run = make_run([("fail", "Fact.", "No.", 1)], average=1.0, agent=AgentFactory(team=team, kind="http"))

    with pytest.raises(ValidationError, match="change request"):
        rewrite.rewrite_job_start(run=run, user=alice, suggestions=[suggestion(run, 0)])
    assert not RewriteJob.objects.exists()


@pytest.mark.django_db
def test_an_unexpected_error_settles_the_job_through_on_failure(
    failing_run, alice, three_fields, django_capture_on_commit_callbacks
):
    job, _ = _start(failing_run, alice, three_fields, django_capture_on_commit_callbacks)
    RewriteJob.objects.filter(pk=job.pk).update(status=RewriteJob.Status.RUNNING)

    rewrite_field_run_task.on_failure(RuntimeError("boom"), "task-id", (job.pk, job.token, "knowledge"), {}, None)

    job.refresh_from_db()
    assert job.status == RewriteJob.Status.FAILED and job.error == rewrite.INTERNAL_ERROR


# ---- the reaper ------------------------------------------------------------------------


def _claimed_by(job: RewriteJob, worker: str, at) -> None:  # type: ignore[no-untyped-def]
    fields = [{**e, "status": Field.RUNNING if i == 0 else e["status"]} for i, e in enumerate(job.fields)]
    RewriteJob.objects.filter(pk=job.pk).update(
        status=RewriteJob.Status.RUNNING, fields=fields, claimed_by=worker, claimed_at=at
    )


@pytest.mark.django_db
def test_the_reaper_fails_a_job_whose_worker_died(failing_run, alice, three_fields, django_capture_on_commit_callbacks):
    now = timezone.now()
    job, _ = _start(failing_run, alice, three_fields, django_capture_on_commit_callbacks)
    WorkerHeartbeat.objects.create(name="dead-worker", started_at=now, last_seen=now - timedelta(minutes=5))
    _claimed_by(job, "dead-worker", now - timedelta(minutes=1))

    rewrite.rewrite_job_reap()

    job.refresh_from_db()
    assert job.status == RewriteJob.Status.FAILED and job.error == rewrite.WORKER_LOST
    assert job.fields[0]["status"] == Field.FAILED and job.fields[0]["error"] == rewrite.WORKER_LOST
    assert job.fields[1]["status"] == Field.PENDING  # Try again rewrites it and the ones after


@pytest.mark.django_db
def test_the_reaper_leaves_a_live_workers_slow_field_alone(
    failing_run, alice, three_fields, django_capture_on_commit_callbacks
):
    now = timezone.now()
    job, _ = _start(failing_run, alice, three_fields, django_capture_on_commit_callbacks)
    WorkerHeartbeat.objects.create(name="live-worker", started_at=now, last_seen=now)
    _claimed_by(job, "live-worker", now - timedelta(minutes=5))

    rewrite.rewrite_job_reap()

    job.refresh_from_db()
    assert job.status == RewriteJob.Status.RUNNING


@pytest.mark.django_db
def test_the_reaper_fails_a_claim_older_than_any_task_can_live(
    failing_run, alice, three_fields, settings, django_capture_on_commit_callbacks
):
    # A claim made outside a worker (no identity to check) still ends at the hard time limit.
    job, _ = _start(failing_run, alice, three_fields, django_capture_on_commit_callbacks)
    _claimed_by(job, "", timezone.now())

    with time_machine.travel(timezone.now() + timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 61), tick=False):
        rewrite.rewrite_job_reap()

    job.refresh_from_db()
    assert job.status == RewriteJob.Status.FAILED and job.error == rewrite.WORKER_LOST


@pytest.mark.django_db
def test_the_reaper_resends_a_lost_message_once_per_period_then_gives_up(
    failing_run, alice, three_fields, settings, django_capture_on_commit_callbacks, tasks_run_here, fake_llm
):
    fake_llm.add_rule(task="rewrite", handler=_rewritten)
    job, _ = _start(failing_run, alice, three_fields, django_capture_on_commit_callbacks)  # its message is lost
    later = timezone.now() + timedelta(seconds=settings.EVALSITE_STALE_QUEUE_SECONDS + 1)

    with time_machine.travel(later, tick=False), django_capture_on_commit_callbacks() as callbacks:
        rewrite.rewrite_job_reap()
        rewrite.rewrite_job_reap()  # the next pass, seconds later: not again

    assert len(callbacks) == 1
    callbacks[0]()
    assert [args[2] for _, args, _ in tasks_run_here] == ["instructions"]
    assert RewriteJob.objects.get(pk=job.pk).fields[0]["status"] == Field.DONE

    other, _ = _start(failing_run, alice, three_fields, django_capture_on_commit_callbacks)
    with time_machine.travel(timezone.now() + rewrite.QUEUE_GIVE_UP + timedelta(seconds=1), tick=False):
        rewrite.rewrite_job_reap()
    other.refresh_from_db()
    assert other.status == RewriteJob.Status.FAILED and other.error == rewrite.NOT_PICKED_UP


@pytest.mark.django_db
def test_the_reaper_runs_on_beat(settings):
    entries = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert "suggestions.tasks.rewrite_job_reap" in entries
    assert json.dumps(settings.CELERY_BEAT_SCHEDULE)  # plain data, as beat stores it

"""The suggestion job: queued when a run completes (or by the button), done, failed, or lost."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from evalsite.llm import LLMError
from runs.models import Run
from suggestions.models import SuggestionGeneration
from suggestions.services import suggestion_generate, suggestion_generation_start
from suggestions.tasks import suggestion_generate as suggestion_generate_task
from tests.suggestions.conftest import PHONE, REFUND


@pytest.mark.django_db
def test_starting_queues_the_task_once_committed(
    failing_run, no_llm, django_capture_on_commit_callbacks, tasks_run_here
):
    with django_capture_on_commit_callbacks() as callbacks:
        generation = suggestion_generation_start(run=failing_run)
    assert generation.status == SuggestionGeneration.Status.QUEUED
    assert tasks_run_here == []  # nothing before the commit
    assert len(callbacks) == 1
    callbacks[0]()

    assert tasks_run_here == [("suggestions.tasks.suggestion_generate", (), {"run_id": failing_run.pk})]
    generation.refresh_from_db()
    assert generation.status == SuggestionGeneration.Status.DONE
    assert failing_run.suggestions.count() == 2


@pytest.mark.django_db
def test_starting_again_while_queued_or_done_sends_nothing(failing_run, alice, django_capture_on_commit_callbacks):
    suggestion_generation_start(run=failing_run)
    with django_capture_on_commit_callbacks() as callbacks:
        again = suggestion_generation_start(run=failing_run)
    assert again.status == SuggestionGeneration.Status.QUEUED
    assert callbacks == []

    SuggestionGeneration.objects.filter(run=failing_run).update(status=SuggestionGeneration.Status.DONE)
    with django_capture_on_commit_callbacks() as callbacks:
        suggestion_generation_start(run=failing_run)  # the run's finish again (reaper): no second job
    assert callbacks == []


@pytest.mark.django_db
def test_a_lost_job_can_be_started_again(failing_run, django_capture_on_commit_callbacks):
    suggestion_generation_start(run=failing_run)
    SuggestionGeneration.objects.filter(run=failing_run).update(queued_at=timezone.now() - timedelta(hours=2))

    with django_capture_on_commit_callbacks() as callbacks:
        generation = suggestion_generation_start(run=failing_run)

    assert len(callbacks) == 1
    assert generation.queued_at > timezone.now() - timedelta(minutes=1)


@pytest.mark.django_db
@pytest.mark.parametrize("status", [Run.Status.RUNNING, Run.Status.STOPPED, Run.Status.FAILED])
def test_only_completed_runs_get_suggestions(make_run, status):
    run = make_run([("fail", REFUND, "No.", 1)], status=status)

    with pytest.raises(ValidationError, match="completed runs"):
        suggestion_generation_start(run=run)


@pytest.mark.django_db
def test_the_offline_job_ends_done_and_records_it_was_offline(failing_run, no_llm):
    suggestion_generation_start(run=failing_run)

    suggestions = suggestion_generate(run_id=failing_run.pk)

    generation = SuggestionGeneration.objects.get(run=failing_run)
    assert len(suggestions) == 2
    assert generation.status == SuggestionGeneration.Status.DONE
    assert generation.offline and generation.attempts == 1 and generation.finished_at is not None


@pytest.mark.django_db
def test_a_model_failure_is_recorded_readably(failing_run, fake_llm, settings):
    settings.EVALSITE_LLM_RETRIES = 0
    fake_llm.add_rule(task="suggest", status=500)
    suggestion_generation_start(run=failing_run)

    with pytest.raises(LLMError):
        suggestion_generate(run_id=failing_run.pk)

    generation = SuggestionGeneration.objects.get(run=failing_run)
    assert generation.status == SuggestionGeneration.Status.FAILED
    assert generation.error.startswith("The model could not suggest changes: ")
    assert "Traceback" not in generation.error and "Exception" not in generation.error
    assert not failing_run.suggestions.exists()


@pytest.mark.django_db
def test_a_job_whose_worker_keeps_dying_gives_up(failing_run, no_llm):
    suggestion_generation_start(run=failing_run)
    SuggestionGeneration.objects.filter(run=failing_run).update(attempts=3, status=SuggestionGeneration.Status.RUNNING)

    assert suggestion_generate(run_id=failing_run.pk) == []

    generation = SuggestionGeneration.objects.get(run=failing_run)
    assert generation.status == SuggestionGeneration.Status.FAILED
    assert "stopped 3 times" in generation.error


@pytest.mark.django_db
def test_the_task_runs_the_service(failing_run, no_llm):
    suggestion_generate_task.apply(kwargs={"run_id": failing_run.pk})

    assert failing_run.suggestions.count() == 2


@pytest.mark.django_db
def test_a_run_that_completes_with_failures_queues_its_suggestions(
    make_run, django_capture_on_commit_callbacks, tasks_run_here
):
    from runs.services import run_finish

    run = make_run([("pass", REFUND, REFUND, 9), ("fail", REFUND, "No.", 1)], status=Run.Status.RUNNING)

    with django_capture_on_commit_callbacks() as callbacks:
        run_finish(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    assert SuggestionGeneration.objects.get(run=run).status == SuggestionGeneration.Status.QUEUED
    for callback in callbacks:
        callback()
    assert ("suggestions.tasks.suggestion_generate", (), {"run_id": run.pk}) in tasks_run_here
    assert [name for name, _, _ in tasks_run_here].count("suggestions.tasks.suggestion_generate") == 1


@pytest.mark.django_db
def test_a_run_that_completes_cleanly_queues_nothing(make_run):
    from runs.services import run_finish

    run = make_run([("pass", REFUND, REFUND, 9)], status=Run.Status.RUNNING)

    run_finish(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED and run.average_score == 9
    assert not SuggestionGeneration.objects.filter(run=run).exists()


@pytest.mark.django_db
def test_offline_suggestions_leave_out_facts_the_knowledge_already_has(make_run, agent, no_llm):
    # The factory's knowledge states the refund window; the failing answer just did not find it.
    run = make_run([("fail", REFUND, "I do not know.", 1)], average=1.0)

    assert suggestion_generate(run_id=run.pk) == []
    assert SuggestionGeneration.objects.get(run=run).status == SuggestionGeneration.Status.DONE


@pytest.mark.django_db
def test_offline_suggestions_skip_cases_whose_expected_answer_is_a_refusal(make_run, agent, no_llm, client_alice):
    """Adding "The knowledge does not say..." to the knowledge would teach nothing: skipped, with the reason."""
    from django.urls import reverse

    refusal = "The knowledge does not say what the support phone number is; the agent should say so."
    run = make_run([("fail", refusal, "Call +1 555 0199.", 2), ("fail", PHONE, "I do not know.", 1)], average=1.5)

    suggestions = suggestion_generate(run_id=run.pk)

    assert len(suggestions) == 1
    assert "+1 555 0100" in suggestions[0].proposed_text
    assert all("does not say" not in s.proposed_text for s in suggestions)
    generation = SuggestionGeneration.objects.get(run=run)
    assert generation.notes == [
        "Case #1 was skipped: its expected answer is a refusal (“The knowledge does not say what the support "
        "phone number is; the agent should say so.”), so it has no fact to add to the knowledge. Check how the "
        "instructions or guardrails tell the agent to decline."
    ]
    page = client_alice.get(reverse("runs:detail", args=[agent.pk, run.pk]), {"tab": "suggestions"}).content.decode()
    assert "Case #1 was skipped: its expected answer is a refusal" in page


@pytest.mark.parametrize(
    ("expected", "refusal"),
    [
        ("The knowledge does not say; the agent should say it does not know.", True),
        ("I don't know the phone number.", True),
        ("The policy doesn’t mention a student discount.", True),
        ("Sorry, I cannot answer questions about other customers' orders.", True),
        ("Refunds do not include shipping costs.", False),
        ("Enterprise customers get a 10% credit when uptime falls below 99.95%.", False),
    ],
)
def test_refusals_are_told_from_facts(expected, refusal):
    from evalsite.text import is_refusal

    assert is_refusal(expected) is refusal

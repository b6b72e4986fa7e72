"""Suggestions learn that a run finished through the run-finished hook they register in
SuggestionsConfig.ready() (runs/hooks.py), not through an import in runs/."""

import pytest

from runs import hooks
from runs.models import Run
from runs.services import run_finish
from suggestions.models import SuggestionGeneration
from suggestions.services import suggestion_generation_on_run_finished
from tests.suggestions.conftest import REFUND

pytestmark = pytest.mark.django_db


def test_the_app_registers_its_hook():
    assert suggestion_generation_on_run_finished in hooks._run_finished


def test_a_finished_run_starts_its_suggestions_through_the_hook(
    make_run, monkeypatch, django_capture_on_commit_callbacks, tasks_run_here
):
    run = make_run([("pass", REFUND, REFUND, 9), ("fail", REFUND, "No.", 1)], status=Run.Status.RUNNING)
    monkeypatch.setattr(hooks, "_run_finished", [suggestion_generation_on_run_finished])

    with django_capture_on_commit_callbacks(execute=True):
        run_finish(run_id=run.pk)

    assert SuggestionGeneration.objects.filter(run=run).exists()
    assert [name for name, _, _ in tasks_run_here].count("suggestions.tasks.suggestion_generate") == 1


def test_without_the_hook_a_finished_run_starts_no_suggestions(make_run, monkeypatch):
    run = make_run([("pass", REFUND, REFUND, 9), ("fail", REFUND, "No.", 1)], status=Run.Status.RUNNING)
    monkeypatch.setattr(hooks, "_run_finished", [])

    run_finish(run_id=run.pk)

    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED
    assert not SuggestionGeneration.objects.filter(run=run).exists()


def test_a_stopped_run_gets_no_suggestions_from_the_hook(make_run):
    run = make_run([("fail", REFUND, "No.", 1)], status=Run.Status.STOPPED)

    suggestion_generation_on_run_finished(run)

    assert not SuggestionGeneration.objects.filter(run=run).exists()

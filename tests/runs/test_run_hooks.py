"""runs/hooks.py: the run-finished hooks that features above runs register (suggestions does)."""

import logging

import pytest

from runs import hooks, services
from runs.models import Run
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db


@pytest.fixture
def finished_hooks(monkeypatch):
    """The registered hooks for this test only (the apps' own ones stay registered after it)."""
    registered: list = list(hooks._run_finished)
    monkeypatch.setattr(hooks, "_run_finished", registered)
    return registered


def _start(make_dataset, alice, cases=2):
    dataset = make_dataset(cases)
    return services.run_start(agent=dataset.agent, dataset=dataset, user=alice)


def test_every_hook_gets_the_run_once_its_final_figures_are_saved(make_dataset, alice, no_llm, finished_hooks):
    seen = []
    hooks.register_run_finished(lambda run: seen.append((run.pk, run.status, run.completed)))

    run = drive(_start(make_dataset, alice))

    assert seen == [(run.pk, Run.Status.COMPLETED, 2)]


def test_a_failing_hook_is_logged_and_the_run_still_finishes(make_dataset, alice, no_llm, finished_hooks, caplog):
    after = []

    def broken(run: Run) -> None:
        raise RuntimeError("the hook broke")

    hooks.register_run_finished(broken)
    hooks.register_run_finished(lambda run: after.append(run.pk))

    with caplog.at_level(logging.ERROR, logger="runs.hooks"):
        run = drive(_start(make_dataset, alice))

    assert run.status == Run.Status.COMPLETED
    assert run.summary_note.startswith("No summary: no model is configured.")  # the summary came after it
    assert after == [run.pk]  # the next hook still ran
    assert f"The run-finished hook {broken.__qualname__} failed for run {run.pk}" in caplog.text
    assert "the hook broke" in caplog.text  # with its traceback, for the worker log


def test_a_failing_hook_leaves_none_of_its_writes(make_dataset, alice, no_llm, finished_hooks):
    def half_done(run: Run) -> None:
        Run.objects.filter(pk=run.pk).update(error="written by a hook that then failed")
        raise RuntimeError("the hook broke")

    hooks.register_run_finished(half_done)

    run = drive(_start(make_dataset, alice))

    assert run.error == ""


def test_a_hook_registered_twice_is_called_once(make_dataset, alice, no_llm, finished_hooks):
    calls = []

    def count(run: Run) -> None:
        calls.append(run.pk)

    hooks.register_run_finished(count)
    hooks.register_run_finished(count)  # ready() may run twice

    run = drive(_start(make_dataset, alice))

    assert calls == [run.pk]

"""Run-finished hooks: how a feature built on runs learns that a run has finished.

runs/ never imports the apps above it (docs/architecture.md, "Apps and dependencies"), yet
suggestions must queue its job when a run completes. So the apps above register a callable
here from their `AppConfig.ready()` (`suggestions/apps.py`), and `run_finish` calls each one
with the finished run.

Why a plain list of callables: it is explicit, typed and found by grep, with the caller and
the registration one search apart; the house has no Django signals. A periodic sweep for
finished runs without a suggestion job was the other choice: it would delay suggestions by
a beat interval and query every recently finished run on every pass.

The contract for a hook:
- It gets the run once its final status and figures are saved: `run_finish` runs in its
  own task, outside any transaction, so they are committed before the hooks run.
- It is called for every finish (Completed, Stopped, Failed) and may be called again for
  the same run (Stop and the reaper may ask for a finish too): it decides what applies
  and must be idempotent.
- It should only queue work: the run's summary is written after the hooks return.
- One that raises is logged and skipped: the run still finishes and the other hooks still
  run. Each runs in a savepoint of its own, so a failed one leaves no half-done writes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import transaction

from runs.models import Run

logger = logging.getLogger(__name__)

RunFinishedHook = Callable[[Run], None]

_run_finished: list[RunFinishedHook] = []


def register_run_finished(hook: RunFinishedHook) -> None:
    """Call `hook(run)` whenever a run finishes. Registering the same hook twice adds it once."""
    if hook not in _run_finished:
        _run_finished.append(hook)


def run_finished_notify(run: Run) -> None:
    """Call every registered hook with the finished run, in registration order."""
    for hook in list(_run_finished):
        try:
            with transaction.atomic():
                hook(run)
        except Exception:
            logger.exception("The run-finished hook %s failed for run %s", getattr(hook, "__qualname__", hook), run.pk)

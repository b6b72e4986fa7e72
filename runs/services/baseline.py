"""Pinning a dataset's baseline run: the run that every new run of the dataset is measured
against, with the paired test (runs.comparing.pairing), on its page and in the CI gate."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from runs.models import DatasetBaseline, Run


def dataset_baseline_pin(*, run: Run, user: User | None) -> DatasetBaseline:
    """Make `run` its dataset's baseline (replacing the one pinned before)."""
    if run.dataset_id is None:
        raise ValidationError("This run's dataset was deleted: there is nothing to pin it to.")
    if run.status != Run.Status.COMPLETED:
        raise ValidationError("Only a completed run can be the baseline: it must have scored every case.")
    baseline, _ = DatasetBaseline.objects.update_or_create(
        dataset_id=run.dataset_id, defaults={"run": run, "pinned_by": user}
    )
    return baseline


def dataset_baseline_unpin(*, run: Run) -> None:
    """Unpin `run` if it is its dataset's baseline (a no-op otherwise: a second click, a stale page)."""
    DatasetBaseline.objects.filter(run=run).delete()

"""Reads for a dataset's pinned baseline run: the run page's baseline box and `evalrun --baseline pinned`."""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import reverse

from runs.judging import judges_differ
from runs.models import DatasetBaseline, Run
from runs.pairing import pairing_test, run_pairing
from runs.stats import PairedTest


@dataclass
class BaselineBox:
    """What the run page says about its dataset's baseline."""

    run: Run
    baseline: Run | None
    test: PairedTest | None = None  # this run against the baseline, once both are settled
    judges: str | None = None
    compare_url: str = ""

    @property
    def is_baseline(self) -> bool:
        return self.baseline is not None and self.baseline.pk == self.run.pk

    @property
    def can_pin(self) -> bool:
        return self.run.status == Run.Status.COMPLETED and not self.is_baseline


def baseline_run_get(*, dataset_id: int | None) -> Run | None:
    """The dataset's pinned baseline run, or None."""
    if dataset_id is None:
        return None
    pinned = DatasetBaseline.objects.filter(dataset_id=dataset_id).select_related("run__agent_version").first()
    return pinned.run if pinned else None


def baseline_box_get(*, run: Run) -> BaselineBox | None:
    """None for a run whose dataset was deleted; one query without a baseline, about seven with one."""
    if run.dataset_id is None:
        return None
    baseline = baseline_run_get(dataset_id=run.dataset_id)
    box = BaselineBox(run=run, baseline=baseline)
    if baseline is None or box.is_baseline or run.is_active:
        return box
    box.test = pairing_test(run_pairing(a=baseline, b=run))
    box.judges = judges_differ(baseline, run)
    box.compare_url = reverse("runs:compare", args=[run.agent_id]) + f"?a={baseline.pk}&b={run.pk}"
    return box

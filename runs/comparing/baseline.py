"""Reads for a dataset's pinned baseline run: the run page's baseline box and `evalrun --baseline pinned`."""

from __future__ import annotations

from dataclasses import dataclass

from django.urls import reverse

from runs.comparing.pairing import pairing_test, run_pairing
from runs.comparing.stats import PairedTest
from runs.judging.configs import judges_differ
from runs.models import DatasetBaseline, Run


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
    """None for a run whose dataset was deleted. A run read with `run_get(with_baseline=True)`
    knows its baseline's id: no query without a baseline or on the baseline itself, about
    seven with one to compare with (one otherwise)."""
    if run.dataset_id is None:
        return None
    if hasattr(run, "baseline_run_id"):
        pinned_id = run.baseline_run_id
        baseline = run if pinned_id == run.pk else None
        if pinned_id is not None and baseline is None:
            baseline = Run.objects.select_related("agent_version").filter(pk=pinned_id).first()
    else:
        baseline = baseline_run_get(dataset_id=run.dataset_id)
    box = BaselineBox(run=run, baseline=baseline)
    if baseline is None or box.is_baseline or run.is_active:
        return box
    box.test = pairing_test(run_pairing(a=baseline, b=run))
    box.judges = judges_differ(baseline, run)
    box.compare_url = reverse("runs:compare", args=[run.agent_id]) + f"?a={baseline.pk}&b={run.pk}"
    return box

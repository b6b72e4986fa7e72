"""Case stability: how often a dataset case's verdict flipped across the dataset's runs
with nothing changed, written onto TestCase (flips, flip_chances) so the dataset page can
mark and filter flaky cases without reading runs (datasets sits below runs).

"Nothing changed" means the same agent version, the same case snapshot (question, expected
answer and settings, provenance aside) and the same judge: results are grouped on those,
and each group's verdicts (pass or not, repeats included, in run order) are counted with
runs.comparing.stats.verdict_flips. A case's figures are the sums over its groups. Called when a run
finishes; the newest STABILITY_RUNS runs of the dataset count.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from datasets.models import TestCase
from runs.comparing.stats import verdict_flips
from runs.models import Result, Run, RunCase

STABILITY_RUNS = 50
# Where a case came from says nothing about what it tests (as in runs.comparing.comparison).
_PROVENANCE = {"source_file", "source_location", "source_span", "tags", "extra", "tests_rule"}


def case_stability_refresh(*, dataset_id: int | None) -> int:
    """Recount the flips of every case of the dataset; returns how many cases changed (three queries and an update)."""
    if dataset_id is None:
        return 0
    recent = Run.objects.filter(dataset_id=dataset_id).order_by("-created_at", "-id")[:STABILITY_RUNS]
    # The judge: its recorded configuration (runs.judging.configs), else for older runs its inputs.
    judges = {
        pk: (version, config_id or (scorer, judge_model, _judge_settings(scoring)))
        for pk, version, config_id, scorer, judge_model, scoring in recent.values_list(
            "pk", "agent_version_id", "judge_config_id", "scorer", "judge_model", "scoring"
        )
    }
    runs = list(judges)
    groups = _case_groups(judges)
    verdicts: dict[tuple[Any, ...], list[bool]] = defaultdict(list)
    results = (
        # An abstention is no verdict: it neither holds nor flips one.
        Result.objects.filter(run_id__in=runs, variant=0, status__in=Result.FINISHED_STATUSES)
        .exclude(status=Result.Status.ABSTAINED)
        .order_by("run__created_at", "run_id", "repeat")
        .values_list("case_id", "status")
    )
    for case_pk, status in results:
        if case_pk in groups:
            verdicts[groups[case_pk]].append(status == Result.Status.PASS)
    totals: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for key, sequence in verdicts.items():
        flips, chances = verdict_flips(sequence)
        totals[key[0]][0] += flips
        totals[key[0]][1] += chances
    changed = []
    for case in TestCase.objects.filter(dataset_id=dataset_id).only("pk", "flips", "flip_chances"):
        flips, chances = totals.get(case.pk, (0, 0))
        if (case.flips, case.flip_chances) != (flips, chances):
            case.flips, case.flip_chances = flips, chances
            changed.append(case)
    TestCase.objects.bulk_update(changed, ["flips", "flip_chances"], batch_size=500)
    return len(changed)


def _judge_settings(scoring: dict[str, Any] | None) -> str:
    # Repeats add results, they do not change what a verdict means.
    return json.dumps({k: v for k, v in (scoring or {}).items() if k != "number_of_requests"}, sort_keys=True)


def _case_groups(runs: dict[int, tuple[Any, ...]]) -> dict[int, tuple[Any, ...]]:
    """{RunCase pk: (dataset case pk, case fingerprint, agent version and judge)} for cases still in the dataset."""
    rows = RunCase.objects.filter(run_id__in=list(runs), source_case__isnull=False).values_list(
        "pk", "run_id", "source_case_id", "question", "expected_answer", "data"
    )
    groups = {}
    for pk, run_id, source, question, expected, data in rows:
        settings = {key: value for key, value in (data or {}).items() if key not in _PROVENANCE and value}
        fingerprint = json.dumps([question.strip(), expected.strip(), settings], sort_keys=True, default=str)
        groups[pk] = (source, fingerprint, runs[run_id])
    return groups

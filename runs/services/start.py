"""Starting runs: snapshot the dataset, pin the version, pre-create results, queue the first window;
re-runs of a run's failed cases, and the verify runs of a change."""

from __future__ import annotations

import random
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Literal

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q

from agents import selectors as agent_selectors
from agents.models import Agent, AgentVersion
from datasets.fields import CASE_FIELD_NAMES
from datasets.models import Dataset, TestCase
from evalsite import llm
from runs import selectors
from runs.engine.dispatch import enqueue_finish, fill_window
from runs.judging import configs as judging
from runs.models import Result, Run, RunCase

# The ValidationError code of a start refused because of the agent (not the dataset):
# the API answers it with 422.
AGENT_NOT_RUNNABLE = "agent_not_runnable"

NEEDS_SIMULATOR = Result.NEEDS_SIMULATOR
# A case's fields that RunCase keeps in its `data` snapshot; the rest are RunCase columns.
SNAPSHOT_FIELDS = tuple(name for name in CASE_FIELD_NAMES if name not in ("question", "expected_answer", "case_id"))


# run_start's budget_cap when the caller names none: the team's default cap (Team.run_budget).
TEAM_DEFAULT: Literal["team"] = "team"

# What run_start does with a model judge never preflighted (runs/services/preflight.py):
# PREFLIGHT_RUN asks it the calibration set first (evalrun); PREFLIGHT_REQUIRE refuses with
# JUDGE_NOT_PREFLIGHTED, for a caller that runs it as a job and asks again (the start
# dialog, the API); PREFLIGHT_LATER starts the run, which is marked if its judge fails later.
# A judge that failed its preflight is refused in every case (JUDGE_FAILED_PREFLIGHT) unless
# allow_failed_preflight, and the run is then marked judge_failed_preflight.
PreflightMode = Literal["run", "require", "later"]
PREFLIGHT_RUN: PreflightMode = "run"
PREFLIGHT_REQUIRE: PreflightMode = "require"
PREFLIGHT_LATER: PreflightMode = "later"
JUDGE_NOT_PREFLIGHTED = "judge_not_preflighted"
JUDGE_FAILED_PREFLIGHT = "judge_failed_preflight"


def run_start(
    *,
    agent: Agent,
    dataset: Dataset,
    user: User | None,
    request_key: str = "",
    budget_cap: Decimal | None | Literal["team"] = TEAM_DEFAULT,
    preflight: PreflightMode = PREFLIGHT_LATER,
    allow_failed_preflight: bool = False,
) -> Run:
    """Snapshot the dataset, pin the agent's current version and queue the first cases.

    The same request_key (a form's one-time token, an API Idempotency-Key) never makes a
    second run: a double click or a replayed POST gets the first run back. `budget_cap`
    (USD, None for none) is the run's hard cost cap, by default the team's. `preflight` and
    `allow_failed_preflight`: what to do about the judge's preflight (PreflightMode above).
    """
    request_key = request_key.strip()[:64]
    if request_key and (existing := _run_for_key(agent, request_key)):
        return existing
    _check_startable(agent, dataset)
    scoring = judging.dataset_scoring(dataset)
    _check_judge(dataset, scoring, preflight=preflight, allow_failed=allow_failed_preflight)
    cases = list(dataset.cases.prefetch_related("documents").order_by("position", "id"))
    try:
        with transaction.atomic():
            version = agent.current_version
            assert version is not None  # _check_startable refused an agent without one
            return _run_create(
                agent=agent,
                version=version,
                dataset=dataset,
                scoring=scoring,
                snapshots=[_case_snapshot(case, number=index) for index, case in enumerate(cases, start=1)],
                user=user,
                request_key=request_key,
                budget_cap=agent.team.run_budget if isinstance(budget_cap, str) else budget_cap,
            )
    except IntegrityError:
        # Two submissions raced past the lookup; the unique (agent, request_key) kept one.
        if request_key and (existing := _run_for_key(agent, request_key)):
            return existing
        raise


def run_rerun(
    *,
    run: Run,
    user: User | None,
    request_key: str = "",
    version: AgentVersion | None = None,
    purpose: str = Run.Purpose.RERUN,
    positions: list[int] | None = None,
) -> Run:
    """A new run of the parent's failed and errored cases (same snapshot and scoring).

    Pinned to the parent's version unless `version` is given (verifying a fix).
    The cases at `positions` instead, when given (the verify runs of suggestions).
    """
    if run.is_active:
        raise ValidationError("Wait for the run to finish before re-running its failed cases.")
    request_key = request_key.strip()[:64]
    if request_key and (existing := _run_for_key(run.agent, request_key)):
        return existing
    failed = Q(results__variant=0, results__status__in=(Result.Status.FAIL, Result.Status.ERROR))
    chosen = failed if positions is None else Q(position__in=positions)
    cases = list(run.cases.filter(chosen).distinct().order_by("position"))
    if not cases:
        raise ValidationError("This run has no failed cases to re-run.")
    if blocker := agent_selectors.version_run_blocker(version=version or run.agent_version):
        raise ValidationError(blocker, code=AGENT_NOT_RUNNABLE)
    snapshots = [case.copy_fields() for case in cases]
    with transaction.atomic():
        return _run_create(
            agent=run.agent,
            version=version or run.agent_version,
            dataset=run.dataset,
            dataset_name=run.dataset_name,
            scoring=run.scoring,
            snapshots=snapshots,
            user=user,
            request_key=request_key,
            parent=run,
            purpose=purpose,
            budget_cap=run.agent.team.run_budget,
        )


def run_verify_start(
    *,
    parent: Run,
    user: User | None,
    version: AgentVersion,
    sample_passing: int | None = None,
    request_key: str = "",
) -> Run:
    """Re-run the parent's case snapshot against `version` (a new run, purpose "verify").

    All cases, or (cheaper) the cases that did not pass plus a random sample of
    `sample_passing` passing ones, to catch regressions without paying for every case.
    Suggestions' Verify calls it, to test the version made from them.
    """
    if parent.is_active:
        raise ValidationError("Wait for the run to finish before verifying a change against it.")
    if version.agent_id != parent.agent_id:
        raise ValidationError("That version belongs to another agent.")
    if sample_passing is None:
        positions = sorted(parent.cases.values_list("position", flat=True))
    else:
        if sample_passing < 0:
            raise ValidationError("The number of passing cases to sample cannot be negative.")
        outcomes = selectors.case_outcomes(run=parent)
        failing = [p for p, outcome in outcomes.items() if outcome != Result.Status.PASS]
        passing = [p for p, outcome in outcomes.items() if outcome == Result.Status.PASS]
        positions = sorted(failing + random.sample(passing, min(sample_passing, len(passing))))
    if not positions:
        raise ValidationError(
            "There are no cases to verify: this run has no failing cases and no passing ones were sampled."
        )
    return run_rerun(
        run=parent, user=user, request_key=request_key, version=version, purpose=Run.Purpose.VERIFY, positions=positions
    )


def _run_for_key(agent: Agent, request_key: str) -> Run | None:
    run = Run.objects.filter(agent=agent, request_key=request_key).first()
    if run is not None:
        run.replayed = True
    return run


def _check_startable(agent: Agent, dataset: Dataset) -> None:
    if dataset.agent_id != agent.pk:
        raise ValidationError("This dataset belongs to another agent.")
    if dataset.status == Dataset.Status.EXTRACTING:
        raise ValidationError("This dataset is still being prepared. Run it once it is Ready.")
    if dataset.status == Dataset.Status.FAILED:
        raise ValidationError("This dataset failed to import, so it has no cases to run.")
    if not dataset.cases.exists():
        raise ValidationError("This dataset has no test cases yet. Add or generate some first.")
    if blocker := agent_selectors.agent_run_blocker(agent=agent):
        # The agent itself cannot answer (e.g. an llm agent with no model): refused here
        # rather than started and failed on its first case.
        raise ValidationError(blocker, code=AGENT_NOT_RUNNABLE)


def _check_judge(dataset: Dataset, scoring: dict[str, Any], *, preflight: PreflightMode, allow_failed: bool) -> None:
    from runs.services.preflight import judge_config_preflight, judge_preflight_needed

    config = judging.judge_config_for(dataset=dataset, scoring=scoring)
    if judge_preflight_needed(config):
        if preflight == PREFLIGHT_REQUIRE:
            raise ValidationError(
                f"The judge ({config.label}) has not been preflighted yet: it is checked on a small "
                "calibration set before it scores a run. Start again once its preflight has finished.",
                code=JUDGE_NOT_PREFLIGHTED,
            )
        if preflight == PREFLIGHT_RUN:
            config = judge_config_preflight(config=config)
    if config.preflight_status == "failed" and not allow_failed:
        reasons = " ".join(config.preflight.get("reasons") or [])
        raise ValidationError(
            f"The judge ({config.label}) failed its preflight on the calibration set: {reasons} "
            "Its scores cannot be trusted. Start anyway to run it marked “judge failed preflight”.",
            code=JUDGE_FAILED_PREFLIGHT,
        )


def _case_snapshot(case: TestCase, *, number: int) -> dict[str, Any]:
    data = {name: getattr(case, name) for name in SNAPSHOT_FIELDS}
    data["documents"] = [{"id": d.pk, "name": d.original_name, "file_type": d.file_type} for d in case.documents.all()]
    return {
        "source_case_id": case.pk,
        "number": number,  # as the dataset page numbers it
        "case_id": case.case_id,
        "question": case.question,
        "expected_answer": case.expected_answer,
        "data": data,
    }


def _run_create(
    *,
    agent: Agent,
    version: AgentVersion,
    dataset: Dataset | None,
    scoring: dict[str, Any],
    snapshots: list[dict[str, Any]],
    user: User | None,
    request_key: str,
    dataset_name: str = "",
    parent: Run | None = None,
    purpose: str = Run.Purpose.RUN,
    budget_cap: Decimal | None = None,
    results_for: Callable[[Run, list[RunCase]], list[Result]] | None = None,
) -> Run:
    """The run, its case snapshot and its pending results (`results_for`, by default one per
    repeat and variant of each case), then the first window."""
    judge_model = llm.model_for("judge", scoring.get("judge_model") or None)
    judge_config = judging.judge_config_for(dataset=dataset, scoring=scoring)
    run = Run.objects.create(
        agent=agent,
        agent_version=version,
        dataset=dataset,
        dataset_name=dataset_name or (dataset.name if dataset else ""),
        parent=parent,
        purpose=purpose,
        scoring=scoring,
        judge_model=judge_model or "",
        judge_config=judge_config,
        # Every run its judge scores says so, the ones started anyway and re-runs alike.
        judge_failed_preflight=judge_config.preflight_status == "failed",
        scorer=Run.Scorer.LLM if judge_model else Run.Scorer.OFFLINE,
        concurrency=max(1, settings.EVALSITE_RUN_CONCURRENCY),
        request_key=request_key,
        budget_cap=budget_cap,
        created_by=user if user is not None and user.is_authenticated else None,
    )
    cases = RunCase.objects.bulk_create(
        [RunCase(run=run, position=position, **snapshot) for position, snapshot in enumerate(snapshots)]
    )
    if results_for is not None:
        results = results_for(run, cases)
    else:
        results = _results_for(run, cases, repeats=max(1, int(scoring.get("number_of_requests") or 1)))
    Result.objects.bulk_create(results, batch_size=500)
    run.total = sum(1 for result in results if result.status == Result.Status.PENDING)
    Run.objects.filter(pk=run.pk).update(total=run.total)
    fill_window(run)
    if not run.total:  # every case was skipped (scenarios with no simulator model): nothing will finish it
        enqueue_finish(run.pk)
    return run


def _results_for(run: Run, cases: list[RunCase], *, repeats: int) -> list[Result]:
    """Every repeat of every case, then its smoke-test variants (paraphrases need a model)."""
    can_paraphrase = can_simulate = llm.is_configured("llm")
    results: list[Result] = []
    for case in cases:
        if case.data.get("scenario") and not can_simulate:
            # Skipped, not failed: the run goes on and the pass rate leaves them out.
            skipped = Result.Status.SKIPPED
            results += [
                Result(run=run, case=case, repeat=r, question=case.question, status=skipped, error=NEEDS_SIMULATOR)
                for r in range(repeats)
            ]
            continue
        results += [Result(run=run, case=case, repeat=r, question=case.question) for r in range(repeats)]
        for variant in range(1, int(case.data.get("smoke_count") or 0) + 1):
            result = Result(run=run, case=case, variant=variant)
            if not can_paraphrase:
                result.status = Result.Status.SKIPPED
                result.error = (
                    "Not run: smoke-test variants need a model to paraphrase the question, and none is configured."
                )
            results.append(result)
    return results

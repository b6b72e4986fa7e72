"""Build finished (or half-finished) runs straight in the database, for the review pages'
tests: the pages read rows, so a test can say exactly which case passed with what score
without running an agent. The engine's own path is covered by tests that call run_start
and drive (tests/runs/conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone

from agents.models import Agent, AgentVersion
from datasets.models import Dataset
from runs.models import Result, Run, RunCase

XSS = (
    '<script>alert("x")</script><img src=x onerror=alert(1)>'
    '<b hx-get="/accounts/logout/" hx-trigger="load">bold</b> {{ 7*7 }}'
)


@dataclass
class CaseSpec:
    """A case and its results: one (status, score) per repeat, and smoke variants."""

    question: str = "How long is the refund window?"
    expected: str = "Refunds are available within 30 days of purchase."
    repeats: list[tuple[str, float | None]] = field(default_factory=lambda: [("pass", 9.0)])
    variants: list[tuple[str, float | None]] = field(default_factory=list)
    answer: str = "Within 30 days."
    tags: list[str] = field(default_factory=list)
    case_id: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    source_case_id: int | None = None
    # Set on every result of the case: what other parts of the engine record (an unusable
    # judge answer with its reason, answers cut at their token limit).
    error_kind: str = ""
    error: str = ""
    cut: list[dict[str, Any]] = field(default_factory=list)


def build_run(
    *,
    agent: Agent,
    cases: list[CaseSpec],
    dataset: Dataset | None = None,
    status: str = Run.Status.COMPLETED,
    version: AgentVersion | None = None,
    scoring: dict[str, Any] | None = None,
    scorer: str = Run.Scorer.OFFLINE,
    judge_model: str = "",
    parent: Run | None = None,
    error: str = "",
    request_key: str = "",
    judge_failed_preflight: bool = False,
) -> Run:
    now = timezone.now()
    run = Run.objects.create(
        agent=agent,
        agent_version=version or agent.current_version,
        dataset=dataset,
        dataset_name=dataset.name if dataset else "Deleted dataset",
        status=status,
        error=error,
        scoring={"pass_threshold": 7, "number_of_requests": 1, **(scoring or {})},
        scorer=scorer,
        judge_model=judge_model,
        parent=parent,
        request_key=request_key,
        judge_failed_preflight=judge_failed_preflight,
        started_at=now - timedelta(seconds=30),
        finished_at=None if status in Run.ACTIVE_STATUSES else now,
        summary_note="" if status in Run.ACTIVE_STATUSES else "No summary: no model is configured.",
    )
    results: list[Result] = []
    for position, spec in enumerate(cases):
        case = RunCase.objects.create(
            run=run,
            position=position,
            case_id=spec.case_id,
            question=spec.question,
            expected_answer=spec.expected,
            source_case_id=spec.source_case_id,
            data={"tags": spec.tags, "documents": [], **spec.data},
        )
        for repeat, (state, score) in enumerate(spec.repeats):
            results.append(_result(run, case, state, score, spec, repeat=repeat, minutes=position))
        for variant, (state, score) in enumerate(spec.variants, start=1):
            results.append(_result(run, case, state, score, spec, variant=variant, minutes=position))
    Result.objects.bulk_create(results, batch_size=500)
    _count(run)
    return run


def _result(
    run: Run,
    case: RunCase,
    state: str,
    score: float | None,
    spec: CaseSpec,
    *,
    repeat: int = 0,
    variant: int = 0,
    minutes: int = 0,
) -> Result:
    finished = state in Result.FINISHED_STATUSES
    abstained = state == Result.Status.ABSTAINED
    verdicts = {
        Result.Status.PASS: "Correct",
        Result.Status.FAIL: "Incorrect",
        Result.Status.ABSTAINED: "Needs a judge model",
    }
    return Result(
        run=run,
        case=case,
        repeat=repeat,
        variant=variant,
        status=state,
        question=spec.question if not variant else f"Paraphrase {variant}: {spec.question}",
        # An unusable judge answer still judged an answer the agent gave.
        actual_answer=spec.answer if finished and (state != Result.Status.ERROR or spec.error_kind) else "",
        error=spec.error or ("The agent timed out after 30 s." if state == Result.Status.ERROR else ""),
        error_kind=spec.error_kind,
        cut=spec.cut,
        score=score if finished and not abstained else None,
        verdict=verdicts.get(state, ""),
        reasoning=(
            "Offline reference scorer: the expected answer describes what the agent should do."
            if abstained
            else "Offline reference scorer: 1 of 1 key points covered."
        )
        if finished and not spec.error_kind
        else "",
        scorers=[{"name": "rouge_l", "label": "ROUGE-L", "score": 0.5, "passed": None, "detail": "LCS F1"}]
        if finished
        else [],
        duration_ms=400 + 10 * repeat if finished else None,
        agent_tokens=10 if finished else 0,
        judge_tokens=5 if finished else 0,
        agent_cost=Decimal("0.001") if finished else Decimal(0),
        judge_cost=Decimal("0.0005") if finished else Decimal(0),
        finished_at=timezone.now() + timedelta(seconds=minutes) if finished else None,
    )


def _count(run: Run) -> None:
    main = Result.objects.filter(run=run, variant=0)
    scores = [r.score for r in main if r.score is not None and r.is_finished]
    run.total = Result.objects.filter(run=run).exclude(status=Result.Status.SKIPPED).count()
    run.completed = Result.objects.filter(run=run, status__in=Result.FINISHED_STATUSES).count()
    run.passed = main.filter(status=Result.Status.PASS).count()
    run.failed = main.filter(status=Result.Status.FAIL).count()
    run.errored = main.filter(status=Result.Status.ERROR).count()
    run.abstained = main.filter(status=Result.Status.ABSTAINED).count()
    run.score_total = sum(scores)
    if run.status not in Run.ACTIVE_STATUSES:
        run.average_score = sum(scores) / len(scores) if scores else None
    run.agent_cost = Decimal("0.001") * run.completed
    run.judge_cost = Decimal("0.0005") * run.completed
    run.save()


def finish_case(run: Run, position: int, state: str = Result.Status.PASS, score: float = 9.0) -> None:
    """Finish every result of one case of an active run (as a worker would)."""
    Result.objects.filter(run=run, case__position=position).update(
        status=state, score=score, actual_answer=f"Answer {position}", finished_at=timezone.now(), duration_ms=300
    )
    _count(run)

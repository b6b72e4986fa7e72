"""Apply's preview with a model: before the new version exists, the changed agent answers the
cases its new text reaches, scored by the run's own judge, as a worker job.

- `preview_start` (the review step's "Preview with the model") records the job: the texts
  under review, and which cases to answer (suggestions.affected: the other cases first, since
  a regression hides there, then the cases the change is for; at most PREVIEW_MAX_CASES). It
  sends one message after commit.
- `preview_execute` (the task) claims the job (queued → running, a conditional update, so a
  redelivered message does nothing), answers each case through runs.engine.case.execute with a
  copy of the base version holding the new texts (never saved: Apply alone makes versions),
  and saves each result as it comes, so the dialog shows them one by one.
- A job whose worker died is shown as lost once PREVIEW_LOST_AFTER has passed (`preview_lost`);
  nothing depends on it, so no reaper is needed: the user starts another.
"""

import copy
import logging
from datetime import timedelta

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from agents.adapters import AgentConfigError
from agents.models import Agent, AgentVersion
from evalsite import llm
from evalsite.text import cut
from runs.models import Result, Run, RunCase
from suggestions.affected import affected_cases
from suggestions.models import PreviewJob, Suggestion
from suggestions.services import EDITABLE_FIELDS

logger = logging.getLogger(__name__)

PREVIEW_MAX_CASES = 10
# Longer than the task's hard time limit: a job still active after this lost its worker.
PREVIEW_LOST_AFTER = timedelta(minutes=20)
PREVIEW_INTERNAL_ERROR = "An internal error stopped the preview. The details are in the worker log."


def preview_start(
    *, run: Run, user: User | None, base: AgentVersion, texts: dict[str, str], suggestions: list[Suggestion]
) -> PreviewJob:
    if not llm.is_configured("llm"):
        raise ValidationError("A preview needs a model. The cases listed above are what the new text reaches.")
    if run.agent.kind == Agent.Kind.HTTP:
        raise ValidationError("HTTP agents are configured elsewhere: there is no new version to preview.")
    changed = {
        name: text
        for name, text in texts.items()
        if name in EDITABLE_FIELDS and text.strip() != getattr(base, name).strip()
    }
    motivating = {case.display_number for suggestion in suggestions for case in suggestion.cases.all()}
    positions = _positions(run, base, changed, motivating)
    if not positions:
        raise ValidationError("No case of this run would answer differently: there is nothing to preview.")
    with transaction.atomic():
        job = PreviewJob.objects.create(
            run=run,
            base_version=base,
            texts=changed,
            positions=positions,
            requested_by=user if user is not None and user.is_authenticated else None,
            queued_at=timezone.now(),
        )
        transaction.on_commit(lambda: _enqueue(job.pk), robust=True)
    return job


def _enqueue(job_id: int) -> None:
    from suggestions.tasks import preview_execute as preview_execute_task

    preview_execute_task.delay(job_id=job_id)


def _positions(run: Run, base: AgentVersion, changed: dict[str, str], motivating: set[int]) -> list[int]:
    """The cases to answer: every case some changed field reaches, the others before the ones
    the change is for, capped."""
    reached: dict[int, bool] = {}
    for name, text in changed.items():
        found, _how = affected_cases(
            run=run, agent=run.agent, field=name, before=getattr(base, name), after=text, motivating=motivating
        )
        for case in found:
            reached[case.number] = reached.get(case.number, False) or case.motivating
    numbers = sorted(reached, key=lambda number: (reached[number], number))[:PREVIEW_MAX_CASES]
    by_number = {case.display_number: case.position for case in RunCase.objects.filter(run=run)}
    return [by_number[number] for number in numbers if number in by_number]


def preview_execute(*, job_id: int) -> None:
    claimed = PreviewJob.objects.filter(pk=job_id, status=PreviewJob.Status.QUEUED).update(
        status=PreviewJob.Status.RUNNING, started_at=timezone.now()
    )
    if not claimed:
        return  # a redelivered message, or a job already settled
    job = PreviewJob.objects.select_related("run", "run__agent", "base_version").get(pk=job_id)
    try:
        _answer_cases(job)
    except AgentConfigError as error:
        _settle(job, PreviewJob.Status.FAILED, f"The changed agent cannot run: {error.message}")
    except Exception:
        logger.exception("Preview job %s failed unexpectedly", job_id)
        _settle(job, PreviewJob.Status.FAILED, PREVIEW_INTERNAL_ERROR)
        raise
    else:
        _settle(job, PreviewJob.Status.DONE)


def _answer_cases(job: PreviewJob) -> None:
    from runs.engine.case import execute

    run = job.run
    version = copy.copy(job.base_version)  # in memory only: Apply alone makes versions
    for name, text in job.texts.items():
        setattr(version, name, text)
    before = {
        result.case_id: result.status
        for result in Result.objects.filter(run=run, variant=0, repeat=0).only("case_id", "status")
    }
    cases = {case.position: case for case in RunCase.objects.filter(run=run, position__in=job.positions)}
    for position in job.positions:
        case = cases[position]
        outcome = execute(Result(run=run, case=case, repeat=0, variant=0), run, version)
        job.results.append({
            "number": case.display_number,
            "question": cut(case.question, 200),
            "before": before.get(case.pk, ""),
            "status": outcome.status,
            "score": outcome.score,
            "answer": cut(outcome.actual_answer, 300),
            "error": cut(outcome.error, 300),
            "cost": outcome.agent_cost + outcome.judge_cost + outcome.simulator_cost,
        })  # fmt: skip
        PreviewJob.objects.filter(pk=job.pk).update(results=job.results)


def _settle(job: PreviewJob, status: str, error: str = "") -> None:
    PreviewJob.objects.filter(pk=job.pk).update(status=status, error=error, finished_at=timezone.now())


def preview_lost(job: PreviewJob) -> bool:
    """Still waiting or running long after any task could have ended: its worker was lost."""
    return job.is_active and job.queued_at < timezone.now() - PREVIEW_LOST_AFTER

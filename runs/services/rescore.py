"""Re-scoring (issue 18, section 6): a finished run's stored answers judged again, by the dataset's
current judge configuration or a chosen one, as a new run (purpose "rescore") linked to it.

The new run goes through the ordinary window (claims, heartbeats, the reaper): each of its results
carries a copy of its source result's answer and `rescored_from`, and `runs.engine.case.execute` scores
that answer instead of asking the agent. So no agent call is made, and no paraphrase either.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction

from runs.judging import configs as judging
from runs.models import JudgeConfig, Result, Run, RunCase
from runs.services.start import _run_create, _run_for_key


def run_rescore(*, run: Run, user: User | None, request_key: str = "", judge_config: JudgeConfig | None = None) -> Run:
    """A new run judging the finished answers of `run` again; no agent is asked."""
    if run.is_active:
        raise ValidationError("Wait for the run to finish before re-scoring it.")
    request_key = request_key.strip()[:64]
    if request_key and (existing := _run_for_key(run.agent, request_key)):
        return existing
    if judge_config is not None and judge_config.dataset_id != run.dataset_id:
        raise ValidationError("Pick a judge configuration of this run's dataset.")
    sources = list(
        Result.objects.filter(run=run, status__in=Result.FINISHED_STATUSES)
        .select_related("case")
        .order_by("case__position", "repeat", "variant")
    )
    if not any(_has_answer(result) for result in sources):
        raise ValidationError("This run has no answers to judge again.")
    scoring = {**run.scoring, **_judge_settings(run, judge_config)}
    cases = sorted({result.case_id: result.case for result in sources}.values(), key=lambda case: case.position)
    snapshots = [case.copy_fields() for case in cases]

    def results_for(child: Run, copies: list[RunCase]) -> list[Result]:
        copy_of = {case.pk: copy for case, copy in zip(cases, copies, strict=True)}
        return [_result_copy(child, copy_of[source.case_id], source) for source in sources]

    with transaction.atomic():
        child = _run_create(
            agent=run.agent,
            version=run.agent_version,
            dataset=run.dataset,
            dataset_name=run.dataset_name,
            scoring=scoring,
            snapshots=snapshots,
            user=user,
            request_key=request_key,
            parent=run,
            purpose=Run.Purpose.RESCORE,
            results_for=results_for,
        )
        if judge_config is not None:
            _pin_judge(child, judge_config)
        return child


def _pin_judge(child: Run, chosen: JudgeConfig) -> None:
    """Make the new run use and record exactly the configuration it was asked for.

    `_run_create` resolves the judge from the scoring settings, and an empty judge model there
    means "the default model": an offline configuration re-scored after a model was configured
    would be judged by that model. The run's first cases are sent after commit (runs.services.
    dispatch), so setting the judge here, in the same transaction, is what they read."""
    child.judge_config = chosen
    child.judge_model = chosen.judge_model
    child.scorer = Run.Scorer.LLM if chosen.judge_model else Run.Scorer.OFFLINE
    Run.objects.filter(pk=child.pk).update(judge_config=chosen, judge_model=child.judge_model, scorer=child.scorer)


def _judge_settings(run: Run, chosen: JudgeConfig | None) -> dict[str, Any]:
    """The judge keys to lay over the source run's scoring: the chosen configuration's, or the
    dataset's as they are now (the source run's own when its dataset was deleted)."""
    if chosen is not None:
        return dict(chosen.settings)
    current = judging.dataset_scoring(run.dataset) if run.dataset is not None else run.scoring
    return {key: current[key] for key in judging.JUDGE_KEYS if key in current}


def _has_answer(result: Result) -> bool:
    # An error before the agent answered (a timeout, a refused request) left nothing to judge.
    return result.status != Result.Status.ERROR or bool(result.actual_answer or result.conversation)


def _result_copy(run: Run, case: RunCase, source: Result) -> Result:
    copy = Result(
        run=run,
        case=case,
        repeat=source.repeat,
        variant=source.variant,
        question=source.question,
        actual_answer=source.actual_answer,
        conversation=source.conversation,
        tool_calls=source.tool_calls,
        retrieval_context=source.retrieval_context,
        trace_id=source.trace_id,
        # The agent's answers that ended at their token limit: the same answers, judged again.
        cut=[entry for entry in source.cut if entry.get("call") == "agent"],
        rescored_from=source,
    )
    if not _has_answer(source):
        copy.status = Result.Status.SKIPPED
        copy.error = f"Not re-scored: the agent gave no answer in run #{source.run_id} ({source.error})"[:2000]
    return copy

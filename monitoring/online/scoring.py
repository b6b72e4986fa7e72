"""Scoring one claimed OnlineScore with the same judge as runs.

The judge configuration is runs.judging.configs.judge_config_for(dataset=None, scoring=...) of
the evaluator's scoring settings: the same model resolution, prompt, criteria, threshold,
re-samples, output checks (runs.judging.checks, through runs.judging.scoring.score_case) and
fingerprint as a run's, recorded on every score. A judge that failed its preflight scores
nothing (SKIPPED, "judge failed preflight"); one never preflighted has its preflight started
through runs.services.preflight and its scores wait (SKIPPED, "judge preflight pending") until
the reaper sees it pass and sends them again. The offline scorer cannot judge production
traffic, which has no expected answer: ABSTAINED. An answer the checks reject is UNUSABLE with
the reason, never counted.

Production has no expected answer: the Evaluation is built from the trace (or the whole
conversation) with expected_answer "" and a guideline that tells the judge to judge by the
criteria. The guideline sits on the Evaluation, not in the prompt template, so it changes no
configuration's fingerprint (runs' own prompt for a case without an expected answer is unchanged).

Idempotent: a worker takes a pending score with a lease (claimed_at, a conditional update, and
claimed_by, the worker's id) and refreshes it while the judge works; only the lease holder writes
the outcome. The daily cost cap
is checked under a lock on the evaluator's row with the call's reservation counted (see
`_reserve`), so two workers at once cannot both spend its last dollar.
"""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models import F, Q, QuerySet, Sum
from django.utils import timezone

from evalsite import llm, workers
from monitoring.models import OnlineEvaluator, OnlineScore, Trace
from runs.judging import configs as judging
from runs.judging.scoring import Evaluation, JudgeError, judge_messages, score_case
from runs.models import JudgeConfig

PREFLIGHT_PENDING = "judge preflight pending"
PREFLIGHT_FAILED = "judge failed preflight"
CAP_REACHED = "daily cost cap reached"
NEEDS_JUDGE = (
    "Needs a judge model: the offline reference scorer compares with an expected answer, and production "
    "traffic has none. Set the evaluator's judge model or EVALSITE_JUDGE_MODEL."
)
DISABLED = "evaluator disabled"
GONE = "the trace or conversation was deleted before it was scored"
PRODUCTION_GUIDELINE = (
    "This is production traffic: nobody wrote an expected answer. Judge the agent's reply by the "
    "criteria above; where they say nothing, by whether it answers the user's request correctly, "
    "helpfully and safely, consistent with any documents and tool results shown. Do not lower the "
    "score because no expected answer was given."
)
# Judge reads at most this many retrieved documents, as runs cap document context.
MAX_DOCUMENTS = 8


def evaluator_scoring(evaluator: OnlineEvaluator) -> dict[str, Any]:
    """The evaluator's judge settings as judge_config_for reads them (no reviewers' examples:
    those belong to a dataset)."""
    return {**(evaluator.scoring or {}), "alignment": []}


def evaluator_judge_config(evaluator: OnlineEvaluator) -> JudgeConfig:
    return judging.judge_config_for(dataset=None, scoring=evaluator_scoring(evaluator))


# ---- the job -------------------------------------------------------------------------------------


def online_score_run(*, score_id: int) -> OnlineScore | None:
    """Judge one pending score; returns it finished, or None when it was not ours to do."""
    lease = _take(score_id)
    if lease is None:
        return None
    score = OnlineScore.objects.select_related("evaluator", "trace", "conversation").get(pk=score_id)
    evaluator = score.evaluator
    if not evaluator.enabled:
        return _finish(lease, status=OnlineScore.Status.SKIPPED, error=DISABLED)
    config = evaluator_judge_config(evaluator)
    if not config.judge_model:
        return _finish(lease, status=OnlineScore.Status.ABSTAINED, judge_config=config, error=NEEDS_JUDGE)
    blocked = preflight_gate(config)
    if blocked:
        return _finish(lease, status=OnlineScore.Status.SKIPPED, judge_config=config, error=blocked)
    evaluation = evaluation_for(score)
    if evaluation is None:
        return _finish(lease, status=OnlineScore.Status.SKIPPED, judge_config=config, error=GONE)
    scoring = _judge_scoring(config)
    if not _reserve(lease, evaluator, estimate=_estimate(evaluation, scoring, evaluator)):
        return _finish(lease, status=OnlineScore.Status.SKIPPED, judge_config=config, error=CAP_REACHED)
    with lease.kept():
        outcome = _judge(evaluation, scoring, score)
    finished = _finish(lease, judge_config=config, **outcome)
    if finished is not None and finished.status == OnlineScore.Status.SCORED:
        from monitoring.online.alerts import alert_check

        alert_check(evaluator=evaluator, judge_config=config)
    return finished


def _judge(evaluation: Evaluation, scoring: dict[str, Any], score: OnlineScore) -> dict[str, Any]:
    trace: dict[str, str | int] = {"online_score": score.pk, "evaluator": score.evaluator_id}
    try:
        scored = score_case(evaluation=evaluation, scoring=scoring, offline=False, trace=trace)
    except JudgeError as error:
        unusable = error.kind == JudgeError.UNUSABLE
        return {
            "status": OnlineScore.Status.UNUSABLE if unusable else OnlineScore.Status.ERROR,
            "error": error.message,
            "tokens": error.tokens,
            "cost": Decimal(str(round(error.cost, 6))),
        }
    return {
        "status": OnlineScore.Status.SCORED,
        "score": scored.score,
        "passed": scored.passed,
        "verdict": scored.verdict,
        "reasoning": scored.reasoning,
        "tokens": scored.tokens,
        "cost": Decimal(str(round(scored.cost, 6))),
    }


def _judge_scoring(config: JudgeConfig) -> dict[str, Any]:
    """What the judge is asked with: the configuration's own settings (its model pinned)."""
    scoring = dict(config.settings)
    scoring["judge_model"] = config.judge_model
    scoring["pass_threshold"] = config.threshold
    scoring["alignment"] = list(config.examples)
    return scoring


# ---- the preflight gate -------------------------------------------------------------------------


def preflight_gate(config: JudgeConfig) -> str:
    """ "" when the judge may score; else why not, its preflight started when it never ran."""
    from runs.services.preflight import judge_preflight_needed, judge_preflight_start

    if config.preflight_status == "failed":
        return PREFLIGHT_FAILED
    if judge_preflight_needed(config):
        judge_preflight_start(config=config)  # False when one is already under way: it is
        return PREFLIGHT_PENDING
    return ""


# ---- building the Evaluation -------------------------------------------------------------------


def evaluation_for(score: OnlineScore) -> Evaluation | None:
    if score.trace is not None:
        return trace_evaluation(score.trace)
    if score.conversation is not None:
        traces = list(score.conversation.traces.order_by("started_at", "id"))
        return conversation_evaluation(traces) if traces else None
    return None


def trace_evaluation(trace: Trace) -> Evaluation:
    messages = _messages(trace)
    users = [message for message in messages if message["role"] == "user"]
    documents = [str(doc.get("content") or "") for doc in trace.retrieval_documents or [] if isinstance(doc, dict)]
    return Evaluation(
        question=trace.question or (users[-1]["content"] if users else ""),
        answer=trace.answer,
        expected_answer="",
        # A single exchange reads as question and answer; more turns as the conversation.
        conversation=messages if len(users) > 1 else [],
        document_context=_documents_text(documents),
        guideline=PRODUCTION_GUIDELINE + _error_note(trace),
        tool_calls=[_tool_call(call) for call in trace.tool_calls or [] if isinstance(call, dict)],
        retrieval_context=documents,
    )


def conversation_evaluation(traces: list[Trace]) -> Evaluation:
    """The whole conversation: each trace's messages, without repeating the history a chat API
    sends again with every request."""
    transcript: list[dict[str, str]] = []
    tool_calls: list[dict[str, Any]] = []
    documents: list[str] = []
    for trace in traces:
        messages = [message for message in _messages(trace) if message["role"] != "system"]
        if messages[: len(transcript)] == transcript:
            transcript = messages
        else:
            transcript += messages
        tool_calls += [_tool_call(call) for call in trace.tool_calls or [] if isinstance(call, dict)]
        documents += [str(doc.get("content") or "") for doc in trace.retrieval_documents or [] if isinstance(doc, dict)]
    users = [message for message in transcript if message["role"] == "user"]
    last = traces[-1]
    return Evaluation(
        question=users[-1]["content"] if users else last.question,
        answer=last.answer,
        expected_answer="",
        conversation=transcript,
        document_context=_documents_text(documents),
        guideline=PRODUCTION_GUIDELINE + " Judge the conversation as a whole.",
        tool_calls=tool_calls,
        retrieval_context=documents,
    )


def _messages(trace: Trace) -> list[dict[str, str]]:
    """The trace's messages as text, its answer last (ingestion may keep it apart from them)."""
    messages = [
        {"role": str(message.get("role") or "user"), "content": _text(message.get("content"))}
        for message in trace.messages or []
        if isinstance(message, dict)
    ]
    if not messages and trace.question:
        messages = [{"role": "user", "content": trace.question}]
    if trace.answer and not (messages and messages[-1] == {"role": "assistant", "content": trace.answer}):
        messages.append({"role": "assistant", "content": trace.answer})
    return messages


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "\n".join(str(part.get("text") or "") if isinstance(part, dict) else str(part) for part in content)
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def _tool_call(call: dict[str, Any]) -> dict[str, Any]:
    arguments = call.get("args", call.get("arguments"))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            arguments = {"arguments": arguments}
    if not isinstance(arguments, dict):
        arguments = {} if arguments is None else {"arguments": arguments}
    return {"name": str(call.get("name") or "?"), "args": arguments}


def _documents_text(documents: list[str]) -> str:
    shown = [text for text in documents if text.strip()][:MAX_DOCUMENTS]
    return "\n\n".join(f"[Retrieved document {number}]\n{text}" for number, text in enumerate(shown, 1))


def _error_note(trace: Trace) -> str:
    if trace.status != Trace.Status.ERROR:
        return ""
    return f" The request ended in an error: {trace.error or 'no message'}."


# ---- the lease --------------------------------------------------------------------------------


class Lease:
    """A worker's hold on a pending score: the claimed_at it wrote. Refreshed while the judge
    works (every quarter of EVALSITE_STALE_CLAIM_SECONDS, as runs' claims are), so only a dead
    worker's score goes stale and is sent again."""

    def __init__(self, score_id: int, at: datetime) -> None:
        self.score_id, self.at = score_id, at
        self._lock = threading.Lock()

    def rows(self) -> QuerySet[OnlineScore]:
        return OnlineScore.objects.filter(pk=self.score_id, status=OnlineScore.Status.PENDING, claimed_at=self.at)

    def refresh(self) -> None:
        with self._lock:
            now = timezone.now()
            # Taken before this worker lost its broker connection: Celery is ending this task and
            # the reaper takes the score back, which a refresh stamped after the loss would hide.
            # (Read after `now`: a refresh stamped before the loss is taken back with the claim.)
            if workers.claim_forfeit(self.at + workers.BROKER_LOSS_MARGIN):
                return
            if self.rows().update(claimed_at=now):
                self.at = now

    def kept(self) -> _Keeper:
        return _Keeper(self)


class _Keeper:
    def __init__(self, lease: Lease) -> None:
        self.lease, self.stop = lease, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> None:
        self.thread.start()

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()

    def _run(self) -> None:
        interval = settings.EVALSITE_STALE_CLAIM_SECONDS / 4
        try:
            while not self.stop.wait(interval):
                try:
                    self.lease.refresh()
                except Exception:  # a database blip: the next beat tries again
                    close_old_connections()
        finally:
            connection.close()  # this thread's own connection


def _take(score_id: int) -> Lease | None:
    now = timezone.now()
    stale = now - timedelta(seconds=settings.EVALSITE_STALE_CLAIM_SECONDS)
    taken = (
        OnlineScore.objects.filter(pk=score_id, status=OnlineScore.Status.PENDING)
        .filter(Q(claimed_at__isnull=True) | Q(claimed_at__lt=stale))
        # Who holds the lease: the reaper sends the score again at once when that worker dies.
        .update(claimed_at=now, claimed_by=workers.WORKER_ID)
    )
    return Lease(score_id, now) if taken else None


def _finish(lease: Lease, **fields: Any) -> OnlineScore | None:
    fields.setdefault("scored_at", timezone.now())
    with lease._lock:
        if not lease.rows().update(**fields):
            return None  # another worker took it over (this one was thought dead): its outcome stands
    return OnlineScore.objects.get(pk=lease.score_id)


# ---- the daily cost cap ---------------------------------------------------------------------------


def day_start(now: datetime | None = None) -> datetime:
    return timezone.localtime(now or timezone.now()).replace(hour=0, minute=0, second=0, microsecond=0)


def spent_today(evaluator: OnlineEvaluator, *, excluding: int | None = None) -> Decimal:
    """What the evaluator's judge spent today plus what calls under way have reserved."""
    start = day_start()
    today = Q(scored_at__gte=start) | Q(status=OnlineScore.Status.PENDING, claimed_at__gte=start)
    scores = OnlineScore.objects.filter(today, evaluator=evaluator)
    if excluding is not None:
        scores = scores.exclude(pk=excluding)
    return scores.aggregate(total=Sum("cost"))["total"] or Decimal(0)


def _reserve(lease: Lease, evaluator: OnlineEvaluator, *, estimate: Decimal) -> bool:
    """Under a lock on the evaluator's row, count today's spend and the reservations of calls
    under way; room for this call's upper estimate: reserve it on the score (its `cost` until
    the real one replaces it) and say yes."""
    if evaluator.daily_cost_cap is None:
        return True
    with transaction.atomic():
        # An UPDATE locks the row on PostgreSQL and takes SQLite's write lock: one check at a time.
        OnlineEvaluator.objects.filter(pk=evaluator.pk).update(updated_at=F("updated_at"))
        spent = spent_today(evaluator, excluding=lease.score_id)
        if spent + estimate > evaluator.daily_cost_cap:
            return False
        return bool(lease.rows().update(cost=estimate))


def _estimate(evaluation: Evaluation, scoring: dict[str, Any], evaluator: OnlineEvaluator) -> Decimal:
    """An upper bound of what judging this will cost: the prompt's tokens (4 characters each)
    and a full answer, for every call the judge may make (a checks retry, the re-samples), or
    the dearest of the evaluator's recent scores when that is more."""
    messages = judge_messages(evaluation, scoring)
    prompt_tokens = sum(len(message["content"]) for message in messages) // 4 + 50
    calls = 2 * (1 + int(scoring.get("judge_resamples") or 0))
    each = llm.price(scoring["judge_model"], prompt_tokens, settings.EVALSITE_LLM_MAX_TOKENS["judge"]) or 0.0
    recent = (
        OnlineScore.objects.filter(evaluator=evaluator, scored_at__isnull=False)
        .order_by("-scored_at")
        .values_list("cost", flat=True)[:20]
    )
    return max([Decimal(str(round(each * calls, 6))), *recent], default=Decimal(0))

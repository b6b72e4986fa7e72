"""Picking what an online evaluator scores: its filters and sampling rate over new traces, or idle
conversations, each pick claimed as a pending OnlineScore (unique per evaluator and trace or
conversation) and its scoring job sent after commit.

Three ways in, all idempotent (a second look at a trace finds its claim, and the sampling is a
hash, so it decides the same):
- `online_traces_select`: the ingestion hook's job (monitoring.online.traces_ingested), at once;
- `online_traces_sweep`: the beat's safety net, every trace received since the evaluator's
  `swept_until`, for a hook message lost with a Redis restart;
- `online_conversations_select`: the beat's pick of conversations idle for `idle_minutes`.
A claim whose scoring message is lost is re-sent by the reaper (monitoring/online/reaper.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from evalsite.enqueue import after_commit
from monitoring.models import Conversation, Feedback, OnlineEvaluator, OnlineScore, Trace
from monitoring.online.filters import needs_feedback, trace_matches
from monitoring.online.sampling import sampled

# The sweep leaves the last moments to the hook: a batch is still committing.
SWEEP_GRACE = timedelta(minutes=2)
BATCH = 500
# Fields the filters read: a trace's texts and spans stay in the database.
_TRACE_FIELDS = (
    "id",
    "agent_id",
    "otel_trace_id",
    "service_name",
    "status",
    "duration_ms",
    "tags",
    "attributes",
    "answer",
)


def online_traces_select(*, trace_ids: Iterable[int]) -> int:
    """Claim a score for every enabled per-trace evaluator whose filters and sample take one of
    these traces; returns how many claims are waiting for a worker."""
    traces = list(
        Trace.objects.filter(pk__in=list(trace_ids), agent__isnull=False)
        .exclude(answer="", status=Trace.Status.OK)  # not answered yet: a later export request will be
        .only(*_TRACE_FIELDS)
    )
    evaluators = OnlineEvaluator.objects.filter(
        enabled=True, scope=OnlineEvaluator.Scope.TRACE, agent_id__in={trace.agent_id for trace in traces}
    )
    return _claim(list(evaluators), traces)


def _claim(evaluators: list[OnlineEvaluator], traces: list[Trace]) -> int:
    if not evaluators or not traces:
        return 0
    feedback: dict[int, list[Feedback]] = defaultdict(list)
    if any(needs_feedback(evaluator.filters) for evaluator in evaluators):
        for item in Feedback.objects.filter(trace__in=traces):
            if item.trace_id is not None:  # always, as the filter is on its trace; the check tells mypy
                feedback[item.trace_id].append(item)
    picks = [
        OnlineScore(evaluator=evaluator, trace=trace)
        for evaluator in evaluators
        for trace in traces
        if trace.agent_id == evaluator.agent_id
        and trace_matches(evaluator.filters, trace, feedback[trace.pk])
        and sampled(evaluator.pk, trace.otel_trace_id, evaluator.sampling_rate)
    ]
    if not picks:
        return 0
    with transaction.atomic():
        OnlineScore.objects.bulk_create(picks, ignore_conflicts=True)
        waiting = list(
            OnlineScore.objects.filter(
                evaluator__in=evaluators,
                trace__in=[pick.trace for pick in picks],
                status=OnlineScore.Status.PENDING,
                claimed_at__isnull=True,
            ).values_list("pk", flat=True)
        )
        scores_send(waiting)
    return len(waiting)


def scores_send(score_ids: list[int]) -> None:
    """Send each score's job once the transaction commits (a broker that is down loses nothing:
    the claims stay pending and the reaper sends them again)."""
    if not score_ids:
        return
    from monitoring.tasks import online_score_run as online_score_run_task

    def send() -> None:
        for score_id in score_ids:
            online_score_run_task.delay(score_id)

    after_commit(send)


def online_traces_sweep(*, now: datetime | None = None) -> int:
    """Beat: each enabled per-trace evaluator looks at the traces received since its last sweep."""
    now = now or timezone.now()
    claimed = 0
    for evaluator_id in OnlineEvaluator.objects.filter(enabled=True, scope=OnlineEvaluator.Scope.TRACE).values_list(
        "pk", flat=True
    ):
        claimed += _sweep_one(evaluator_id, until=now - SWEEP_GRACE)
    return claimed


def _sweep_one(evaluator_id: int, *, until: datetime) -> int:
    with transaction.atomic():
        # The UPDATE locks the row (PostgreSQL) or the database (SQLite): one sweep per evaluator at a time.
        if not OnlineEvaluator.objects.filter(pk=evaluator_id).update(updated_at=F("updated_at")):
            return 0
        evaluator = OnlineEvaluator.objects.get(pk=evaluator_id)
        start = evaluator.swept_until or evaluator.created_at
        if start >= until:
            return 0
        window = Trace.objects.filter(agent_id=evaluator.agent_id, received_at__gt=start, received_at__lte=until)
        window = window.exclude(answer="", status=Trace.Status.OK).only(*_TRACE_FIELDS, "received_at")
        traces = list(window.order_by("received_at", "id")[:BATCH])
        # A full batch: the next sweep goes on from its last trace.
        reached = traces[-1].received_at if len(traces) == BATCH else until
        claimed = _claim([evaluator], traces)
        OnlineEvaluator.objects.filter(pk=evaluator_id).update(swept_until=reached)
    return claimed


def online_conversations_select(*, now: datetime | None = None) -> int:
    """Beat: claim a score for each conversation idle for its evaluator's `idle_minutes` whose
    traces match the filters (any one of them) and whose sample is taken."""
    now = now or timezone.now()
    claimed = 0
    for evaluator in OnlineEvaluator.objects.filter(enabled=True, scope=OnlineEvaluator.Scope.CONVERSATION):
        idle = Conversation.objects.filter(
            agent_id=evaluator.agent_id,
            last_activity_at__lte=now - timedelta(minutes=evaluator.idle_minutes),
            last_activity_at__gte=evaluator.created_at,
        ).exclude(scores__evaluator=evaluator)
        picks = []
        for conversation in idle.order_by("last_activity_at")[:BATCH]:
            if not sampled(evaluator.pk, f"conversation:{conversation.pk}", evaluator.sampling_rate):
                continue
            traces = list(conversation.traces.only(*_TRACE_FIELDS))
            feedback: dict[int, list[Feedback]] = defaultdict(list)
            if needs_feedback(evaluator.filters):
                for item in Feedback.objects.filter(trace__in=traces):
                    if item.trace_id is not None:  # always, as the filter is on its trace; the check tells mypy
                        feedback[item.trace_id].append(item)
            if any(trace_matches(evaluator.filters, trace, feedback[trace.pk]) for trace in traces):
                picks.append(OnlineScore(evaluator=evaluator, conversation=conversation))
        with transaction.atomic():
            made = OnlineScore.objects.bulk_create(picks, ignore_conflicts=True)
            waiting = list(
                OnlineScore.objects.filter(
                    evaluator=evaluator,
                    conversation__in=[pick.conversation for pick in made],
                    status=OnlineScore.Status.PENDING,
                    claimed_at__isnull=True,
                ).values_list("pk", flat=True)
            )
            scores_send(waiting)
        claimed += len(waiting)
    return claimed

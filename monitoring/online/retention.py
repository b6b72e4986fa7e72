"""Retention: traces older than their team's `TeamMonitoring.retention_days` (30 when the team set
none) are deleted by a beat job, a batch at a time.

What outlives a trace: its learning cases keep their own text and provenance (LearningCase.trace
is SET_NULL), and its online scores keep their numbers, judge configuration and time, so the
monitoring page's series keep their history (OnlineScore.trace is SET_NULL); a score's reasoning,
which quotes the trace, is cleared with it. Conversations with no trace left and end-user
feedback that never met its trace go too.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from accounts.models import Team
from monitoring.models import DEFAULT_RETENTION_DAYS, Conversation, Feedback, OnlineScore, Span, Trace

BATCH = 500
# Batches per team in one beat pass: the rest waits for the next hour.
MAX_BATCHES = 200


def retention_cutoff(team: Team, *, now: datetime | None = None) -> datetime:
    monitoring = getattr(team, "monitoring", None)
    days = monitoring.retention_days if monitoring is not None else DEFAULT_RETENTION_DAYS
    return (now or timezone.now()) - timedelta(days=days)


def traces_retention(*, now: datetime | None = None) -> int:
    """Delete every team's expired traces; returns how many."""
    now = now or timezone.now()
    deleted = 0
    teams = Team.objects.filter(pk__in=Trace.objects.values("team_id")).select_related("monitoring")
    for team in teams:
        deleted += team_traces_expire(team=team, cutoff=retention_cutoff(team, now=now))
    return deleted


def team_traces_expire(*, team: Team, cutoff: datetime) -> int:
    deleted = 0
    for _ in range(MAX_BATCHES):
        ids = list(Trace.objects.filter(team=team, started_at__lt=cutoff).values_list("pk", flat=True)[:BATCH])
        if not ids:
            break
        with transaction.atomic():
            OnlineScore.objects.filter(trace_id__in=ids).update(reasoning="")
            Span.objects.filter(trace_id__in=ids).delete()  # first, in one statement (no per-row cascade)
            Trace.objects.filter(pk__in=ids).delete()
        deleted += len(ids)
    _leftovers_expire(team, cutoff)
    return deleted


def _leftovers_expire(team: Team, cutoff: datetime) -> None:
    empty = Conversation.objects.filter(team=team, last_activity_at__lt=cutoff, traces__isnull=True)
    OnlineScore.objects.filter(conversation__in=empty).update(reasoning="")
    Conversation.objects.filter(pk__in=list(empty.values_list("pk", flat=True)[: BATCH * 10])).delete()
    Feedback.objects.filter(team=team, trace__isnull=True, created_at__lt=cutoff).delete()

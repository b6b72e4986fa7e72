"""Storing what an app sends: OTLP spans (`traces_ingest`), plain JSON traces (`trace_record`) and
end-user feedback (`feedback_record`).

One request is a few queries whatever its size: the team's service mappings, the agents its spans
name, their masking switches, the traces already stored (and their spans, to merge), the
conversations; then one bulk insert of traces, one bulk update, one bulk insert of spans and one
update linking feedback that came before its trace. Spans of one trace may come in several
requests (the SDK's batch processor exports as spans end): each request adds its spans and the
trace's summary is read again from all of them. A span sent twice (an exporter's retry) is kept
once. After commit, `monitoring.online.hooks.traces_ingested` may enqueue the online evaluators'
selection; it never scores in the request.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, F, Max, Min, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from accounts.models import Team
from agents.models import Agent
from monitoring.ingest import conventions, masking
from monitoring.ingest.otlp import DecodedSpan, clip, nanos_to_datetime
from monitoring.models import AgentMonitoring, Conversation, Feedback, ServiceMapping, Span, Trace

MAX_COST = 999_999
AGENT_ATTRIBUTE = "evalsite.agent"  # an agent's id or name, on the resource or any span
_SUMMARY_FIELDS = [
    "agent",
    "conversation",
    "service_name",
    "name",
    "started_at",
    "ended_at",
    "duration_ms",
    "status",
    "error",
    "model",
    "messages",
    "question",
    "answer",
    "tool_calls",
    "retrieval_documents",
    "input_tokens",
    "output_tokens",
    "cost",
    "user_id",
    "tags",
    "attributes",
    "masked",
    "span_count",
]


@dataclass
class _Group:
    """One trace's spans of this request, with what the rest of the request says of it."""

    trace_id: str
    service_name: str = ""
    resource: dict[str, Any] = field(default_factory=dict)
    spans: list[Span] = field(default_factory=list)
    agent: Agent | None = None
    masked: dict[str, int] = field(default_factory=dict)


@dataclass
class IngestResult:
    trace_ids: list[int]
    spans_stored: int


def traces_ingest(*, team: Team, spans: list[DecodedSpan]) -> IngestResult:
    """Store the request's spans for `team`: new traces made, known ones merged, conversations
    and agents found, personal data masked (unless the agent turned it off), early feedback linked."""
    groups = _groups(spans)
    if not groups:
        return IngestResult(trace_ids=[], spans_stored=0)
    _assign_agents(team, groups)
    _mask(groups)
    with transaction.atomic():
        traces, stored = _store(team, groups)
        trace_ids = [trace.pk for trace in traces]
        _link_feedback(team, trace_ids)
        _after_commit(trace_ids)
    return IngestResult(trace_ids=trace_ids, spans_stored=stored)


def _groups(spans: list[DecodedSpan]) -> dict[str, _Group]:
    groups: dict[str, _Group] = {}
    seen: set[tuple[str, str]] = set()
    for decoded in spans:
        key = (decoded.trace_id, decoded.span.span_id)
        if key in seen:
            continue  # the same span twice in one request
        seen.add(key)
        group = groups.setdefault(decoded.trace_id, _Group(trace_id=decoded.trace_id))
        group.spans.append(decoded.span)
        if not group.service_name and decoded.service_name:
            group.service_name = decoded.service_name
        group.resource = {**decoded.resource, **group.resource}
    return groups


def _assign_agents(team: Team, groups: dict[str, _Group]) -> None:
    """The agent of each trace: an explicit `evalsite.agent` attribute, else the team's mapping of
    its service name, else none (the trace is kept, shown under its service)."""
    explicit = {trace_id: _explicit_agent(group) for trace_id, group in groups.items()}
    wanted = {value for value in explicit.values() if value}
    by_key: dict[str, Agent] = {}
    if wanted:
        ids = [int(value) for value in wanted if value.isdigit() and len(value) < 10]
        for agent in Agent.objects.filter(team=team).filter(Q(pk__in=ids) | Q(name__in=wanted)).order_by("pk"):
            by_key[str(agent.pk)] = agent
            by_key.setdefault(agent.name, agent)
    services = {group.service_name for group in groups.values()}
    mapped = {
        mapping.service_name: mapping.agent
        for mapping in ServiceMapping.objects.filter(team=team, service_name__in=services).select_related("agent")
    }
    for trace_id, group in groups.items():
        group.agent = by_key.get(explicit[trace_id] or "") or mapped.get(group.service_name)


def _explicit_agent(group: _Group) -> str:
    for attributes in (group.resource, *(span.attributes for span in group.spans)):
        value = attributes.get(AGENT_ATTRIBUTE)
        if value not in (None, ""):
            return clip(value, 120).strip()
    return ""


def masking_off(agent_ids: set[int]) -> set[int]:
    """The agents (of these) whose team turned masking off; masking is on for every other agent
    and for traces of no agent."""
    if not agent_ids:
        return set()
    return set(
        AgentMonitoring.objects.filter(agent_id__in=agent_ids, mask_personal_data=False).values_list(
            "agent_id", flat=True
        )
    )


def _mask(groups: dict[str, _Group]) -> None:
    off = masking_off({group.agent.pk for group in groups.values() if group.agent})
    for group in groups.values():
        if group.agent and group.agent.pk in off:
            continue
        for span in group.spans:
            group.masked = masking.add_counts(group.masked, masking.mask_span(span))
        group.resource, counts = masking.mask(group.resource)
        group.masked = masking.add_counts(group.masked, counts)


def _store(team: Team, groups: dict[str, _Group]) -> tuple[list[Trace], int]:
    existing = {
        trace.otel_trace_id: trace
        for trace in Trace.objects.filter(team=team, otel_trace_id__in=list(groups))
        .select_related("agent")
        .select_for_update(of=("self",))
    }
    stored_spans: dict[int, list[Span]] = defaultdict(list)
    if existing:
        for span in Span.objects.filter(trace__in=list(existing.values())):
            stored_spans[span.trace_id].append(span)
    summaries: dict[str, dict[str, Any]] = {}
    new_spans: dict[str, list[Span]] = {}
    for trace_id, group in groups.items():
        known = existing.get(trace_id)
        before = stored_spans.get(known.pk, []) if known else []
        ids = {span.span_id for span in before}
        new_spans[trace_id] = [span for span in group.spans if span.span_id not in ids]
        summaries[trace_id] = _summary(group, before, new_spans[trace_id], known)
    conversations, agentless = _conversations(team, groups, summaries)
    traces = _write_traces(team, groups, summaries, existing, conversations)
    rows = []
    for trace in traces:
        for span in new_spans[trace.otel_trace_id]:
            span.trace = trace
            rows.append(span)
    _insert_spans(rows)
    _count_conversation_traces(conversations, agentless)
    return traces, len(rows)


_SPAN_COLUMNS = [
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "kind",
    "start_time_unix_nano",
    "end_time_unix_nano",
    "status_code",
    "status_message",
    "attributes",
    "events",
    "links",
    "scope",
]
_JSON_COLUMNS = {"attributes", "events", "links"}


def _insert_spans(rows: list[Span]) -> None:
    """One INSERT … ON CONFLICT DO NOTHING run for every row (executemany: psycopg pipelines it).
    The ORM's bulk_create spent about four times the CPU preparing each field of each row, the
    most of a request of 512 spans; a span sent twice is kept once, as with ignore_conflicts."""
    if not rows:
        return
    table = connection.ops.quote_name(Span._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(column) for column in _SPAN_COLUMNS)
    placeholders = ", ".join(["%s"] * len(_SPAN_COLUMNS))
    sql = f"INSERT INTO {table} ({columns}) VALUES ({placeholders}) ON CONFLICT DO NOTHING"
    values = [
        tuple(
            json.dumps(getattr(row, column)) if column in _JSON_COLUMNS else getattr(row, column)
            for column in _SPAN_COLUMNS
        )
        for row in rows
    ]
    with connection.cursor() as cursor:
        cursor.executemany(sql, values)


def _summary(group: _Group, before: list[Span], new: list[Span], known: Trace | None) -> dict[str, Any]:
    spans = before + new
    found = conventions.summarise(spans)
    root = found.pop("root")
    start = min(span.start_time_unix_nano for span in spans)
    end = max(span.end_time_unix_nano for span in spans)
    attributes = {**(known.attributes if known else {}), **group.resource, **root.attributes}
    return {
        **{key: found[key] for key in ("messages", "question", "answer", "tool_calls", "tags")},
        "model": clip(found["model"], 200),
        "retrieval_documents": found["retrieval_documents"],
        "input_tokens": found["input_tokens"],
        "output_tokens": found["output_tokens"],
        # The column holds under a million dollars: a sender's absurd figure is capped, not a 503 forever.
        "cost": Decimal(str(round(min(max(found["cost"], 0), MAX_COST), 6))),
        "status": found["status"],
        "error": found["error"],
        "user_id": clip(found["user_id"], 200),
        "session_id": clip(found["session_id"], 200),
        "agent": group.agent or (known.agent if known else None),
        "service_name": group.service_name or (known.service_name if known else ""),
        "name": clip(root.name, 300),
        "started_at": nanos_to_datetime(start),
        "ended_at": nanos_to_datetime(end),
        "duration_ms": min(max(0, end - start) // 1_000_000, 2**31 - 1),
        "attributes": attributes,
        "masked": masking.add_counts(known.masked if known else {}, group.masked),
        "span_count": len(spans),
    }


def _conversations(
    team: Team, groups: dict[str, _Group], summaries: dict[str, dict[str, Any]]
) -> tuple[dict[str, Conversation], list[Conversation]]:
    """The conversation of each session named, made when new (a concurrent request making the same
    one is no error); its count and times are set once the traces are stored. Returned with those
    stored without an agent: they are given their session's here, and _count_conversation_traces saves it."""
    sessions: dict[str, dict[str, Any]] = {}
    for summary in summaries.values():
        session = summary["session_id"]
        if not session:
            continue
        seen = sessions.setdefault(session, {"start": summary["started_at"], "end": summary["ended_at"]})
        seen["start"], seen["end"] = min(seen["start"], summary["started_at"]), max(seen["end"], summary["ended_at"])
        seen.setdefault("agent", summary["agent"])
    if not sessions:
        return {}, []
    Conversation.objects.bulk_create(
        [
            Conversation(
                team=team,
                agent=seen["agent"],
                session_id=session,
                started_at=seen["start"],
                last_activity_at=seen["end"],
            )
            for session, seen in sessions.items()
        ],
        ignore_conflicts=True,
    )
    found = {c.session_id: c for c in Conversation.objects.filter(team=team, session_id__in=list(sessions))}
    agentless: list[Conversation] = []
    for session, conversation in found.items():
        if conversation.agent_id is None:
            conversation.agent = sessions[session]["agent"]
            agentless.append(conversation)
    return found, agentless


def _write_traces(
    team: Team,
    groups: dict[str, _Group],
    summaries: dict[str, dict[str, Any]],
    existing: dict[str, Trace],
    conversations: dict[str, Conversation],
) -> list[Trace]:
    new: list[Trace] = []
    for trace_id, summary in summaries.items():
        values = {key: value for key, value in summary.items() if key != "session_id"}
        values["conversation"] = conversations.get(summary["session_id"])
        trace = existing.get(trace_id)
        if trace is None:
            new.append(Trace(team=team, otel_trace_id=trace_id, **values))
        else:
            for key, value in values.items():
                setattr(trace, key, value)
    if new:
        # An upsert: a concurrent request that made the same trace first is updated, never an error.
        Trace.objects.bulk_create(
            new,
            update_conflicts=True,
            unique_fields=["team", "otel_trace_id"],
            update_fields=_SUMMARY_FIELDS,
            batch_size=500,
        )
    if existing:
        now = timezone.now()
        for trace in existing.values():
            trace.updated_at = now
        Trace.objects.bulk_update(list(existing.values()), _SUMMARY_FIELDS + ["updated_at"], batch_size=500)
    return new + list(existing.values())


def _count_conversation_traces(conversations: dict[str, Conversation], agentless: list[Conversation]) -> None:
    """Each conversation's count and times from its traces, in one UPDATE (the traces are all
    stored by now); an agent for those that had none (rare: one query each)."""
    if not conversations:
        return
    traces = Trace.objects.filter(conversation=OuterRef("pk")).order_by().values("conversation")
    Conversation.objects.filter(pk__in=[c.pk for c in conversations.values()]).update(
        trace_count=Coalesce(Subquery(traces.annotate(n=Count("id")).values("n")), 0),
        started_at=Coalesce(Subquery(traces.annotate(at=Min("started_at")).values("at")), F("started_at")),
        last_activity_at=Coalesce(Subquery(traces.annotate(at=Max("ended_at")).values("at")), F("last_activity_at")),
    )
    for conversation in agentless:
        if conversation.agent_id is not None:
            Conversation.objects.filter(pk=conversation.pk, agent__isnull=True).update(agent=conversation.agent)


def _link_feedback(team: Team, trace_ids: list[int]) -> None:
    """Feedback that came before its trace is linked now (one update)."""
    if not trace_ids:
        return
    Feedback.objects.filter(
        team=team,
        trace__isnull=True,
        otel_trace_id__in=Trace.objects.filter(pk__in=trace_ids).values("otel_trace_id"),
    ).update(trace=Subquery(Trace.objects.filter(team=team, otel_trace_id=OuterRef("otel_trace_id")).values("pk")[:1]))


def _after_commit(trace_ids: list[int]) -> None:
    from monitoring.online import hooks

    transaction.on_commit(lambda: hooks.traces_ingested(trace_ids), robust=True)


def feedback_record(
    *, team: Team, otel_trace_id: str, kind: str, value: float, comment: str = "", user_id: str = ""
) -> Feedback:
    """An end user's feedback on a trace, linked to it when it is in (else when it comes); the
    comment masked as the trace's would be. The online evaluators hear of it, for their filters."""
    trace = Trace.objects.filter(team=team, otel_trace_id=otel_trace_id).select_related("agent").first()
    if not (trace and trace.agent_id and trace.agent_id in masking_off({trace.agent_id})):
        comment, _ = masking.mask(comment)
    feedback = Feedback.objects.create(
        team=team,
        trace=trace,
        otel_trace_id=otel_trace_id,
        kind=kind,
        value=value,
        comment=comment,
        user_id=clip(user_id, 200),
    )
    if trace is not None:
        _after_commit([trace.pk])
    return feedback

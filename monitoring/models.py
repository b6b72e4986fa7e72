"""Production traffic (issue 47): what an agent's deployed app sends over OpenTelemetry, the online
judges' scores of it, end users' feedback and the learning cases a reviewer makes of it.

A team's app exports spans (OTLP/HTTP at /v1/traces, or plain JSON at /api/traces) with an
`IngestionKey`. Spans are grouped into a `Trace` by their trace id and traces into a
`Conversation` by `session.id` / `gen_ai.conversation.id`; a trace belongs to the agent its service
maps to (`ServiceMapping`, or the explicit `evalsite.agent` attribute). Every attribute a span sent
is kept on its `Span`, known or not. An `OnlineEvaluator` samples an agent's traces into
`OnlineScore`s made by a judge configuration (runs.JudgeConfig, the same judges as runs); a
`LearningCase` turns a trace into a candidate test case that a reviewer approves into a dataset.
"""

from __future__ import annotations

import hashlib
import secrets
from decimal import Decimal

from django.conf import settings
from django.db import models
from django.db.models import Q

DEFAULT_RETENTION_DAYS = 30


class IngestionKey(models.Model):
    """A team's key for sending traces. Only a SHA-256 hash of the secret is stored; the raw key is
    shown once, when it is made."""

    PREFIX = "evi_"

    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="ingestion_keys")
    name = models.CharField(max_length=100)
    hint = models.CharField(max_length=12)  # the raw key's first characters, to tell keys apart
    key_hash = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.hint}…)"

    @staticmethod
    def hash(raw: str) -> str:
        return hashlib.sha256(raw.encode()).hexdigest()

    @classmethod
    def generate_raw(cls) -> str:
        return cls.PREFIX + secrets.token_urlsafe(32)

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class TeamMonitoring(models.Model):
    """A team's monitoring settings: how long traces are kept."""

    team = models.OneToOneField("accounts.Team", on_delete=models.CASCADE, related_name="monitoring")
    retention_days = models.PositiveIntegerField(default=DEFAULT_RETENTION_DAYS)

    def __str__(self) -> str:
        return f"{self.team} monitoring"


class AgentMonitoring(models.Model):
    """An agent's monitoring settings: personal data masked before a trace is stored (on by default)."""

    agent = models.OneToOneField("agents.Agent", on_delete=models.CASCADE, related_name="monitoring")
    mask_personal_data = models.BooleanField(default=True)

    def __str__(self) -> str:
        return f"{self.agent} monitoring"


class ServiceMapping(models.Model):
    """Traces whose `service.name` is `service_name` belong to `agent`."""

    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="service_mappings")
    service_name = models.CharField(max_length=200)
    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, related_name="service_mappings")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["service_name"]
        constraints = [
            models.UniqueConstraint(fields=["team", "service_name"], name="unique_service_mapping_per_team"),
        ]

    def __str__(self) -> str:
        return f"{self.service_name} → {self.agent}"


class Conversation(models.Model):
    """The traces of one session (`session.id` or `gen_ai.conversation.id`), in time order."""

    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="conversations")
    agent = models.ForeignKey(
        "agents.Agent", on_delete=models.CASCADE, null=True, blank=True, related_name="conversations"
    )
    session_id = models.CharField(max_length=200)
    started_at = models.DateTimeField()
    last_activity_at = models.DateTimeField()
    trace_count = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-last_activity_at"]
        constraints = [
            models.UniqueConstraint(fields=["team", "session_id"], name="unique_conversation_session_per_team"),
        ]
        indexes = [models.Index(fields=["agent", "last_activity_at"], name="conversation_agent_activity")]

    def __str__(self) -> str:
        return self.session_id


class Trace(models.Model):
    """One request to the agent in production: its spans, and what they said, read once at ingestion
    (the conversation's messages, the answer, tool calls, retrieved documents, tokens, cost)."""

    class Status(models.TextChoices):
        OK = "ok", "OK"
        ERROR = "error", "Error"

    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="traces")
    # None: the service maps to no agent yet (the team's Settings list such services).
    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, null=True, blank=True, related_name="traces")
    conversation = models.ForeignKey(
        Conversation, on_delete=models.SET_NULL, null=True, blank=True, related_name="traces"
    )
    otel_trace_id = models.CharField(max_length=32)  # 32 lowercase hex digits, as OTLP's 16 bytes
    service_name = models.CharField(max_length=200, blank=True)
    name = models.CharField(max_length=300, blank=True)  # the root span's name
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField()
    duration_ms = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.OK)
    error = models.TextField(blank=True)
    model = models.CharField(max_length=200, blank=True)
    # The conversation as the spans sent it: [{"role", "content"}], the last user message the question.
    messages = models.JSONField(default=list, blank=True)
    question = models.TextField(blank=True)
    answer = models.TextField(blank=True)
    tool_calls = models.JSONField(default=list, blank=True)  # [{"name", "arguments", "result", "id"}]
    retrieval_documents = models.JSONField(default=list, blank=True)  # [{"id", "content", "score"}]
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=12, decimal_places=6, default=Decimal(0))
    user_id = models.CharField(max_length=200, blank=True)
    tags = models.JSONField(default=list, blank=True)
    # The resource's and the root span's attributes, as sent (the spans keep their own).
    attributes = models.JSONField(default=dict, blank=True)
    # What the personal-data rules masked: {"email": 2, "card": 1}; empty when nothing was.
    masked = models.JSONField(default=dict, blank=True)
    span_count = models.PositiveIntegerField(default=0)
    received_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["team", "otel_trace_id"], name="unique_trace_id_per_team")]
        indexes = [
            models.Index(fields=["agent", "-started_at"], name="trace_agent_started"),
            models.Index(fields=["team", "-started_at"], name="trace_team_started"),
            models.Index(fields=["started_at"], name="trace_started"),  # retention
        ]

    def __str__(self) -> str:
        return self.otel_trace_id


class Span(models.Model):
    """One OTLP span, every attribute and event kept as sent."""

    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, related_name="spans")
    span_id = models.CharField(max_length=16)
    parent_span_id = models.CharField(max_length=16, blank=True)
    name = models.CharField(max_length=300)
    kind = models.CharField(max_length=16, blank=True)  # internal, server, client, producer, consumer
    # Unix nanoseconds, as OTLP sends them (a DateTimeField would cut them to microseconds).
    start_time_unix_nano = models.BigIntegerField()
    end_time_unix_nano = models.BigIntegerField()
    status_code = models.CharField(max_length=8, blank=True)  # "", "ok", "error"
    status_message = models.TextField(blank=True)
    attributes = models.JSONField(default=dict, blank=True)
    events = models.JSONField(default=list, blank=True)  # [{"name", "time_unix_nano", "attributes"}]
    links = models.JSONField(default=list, blank=True)
    scope = models.CharField(max_length=200, blank=True)  # the instrumentation scope's name

    class Meta:
        ordering = ["start_time_unix_nano", "id"]
        constraints = [models.UniqueConstraint(fields=["trace", "span_id"], name="unique_span_id_per_trace")]

    def __str__(self) -> str:
        return f"{self.name} ({self.span_id})"

    @property
    def duration_ms(self) -> float:
        return max(0, self.end_time_unix_nano - self.start_time_unix_nano) / 1_000_000


class Feedback(models.Model):
    """An end user's word on a trace: thumbs up or down, or a 0-10 score, with a comment."""

    class Kind(models.TextChoices):
        THUMBS = "thumbs", "Thumbs"
        SCORE = "score", "Score"

    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="trace_feedback")
    # Feedback may come before its trace: it is matched by otel_trace_id, and linked once the trace is in.
    trace = models.ForeignKey(Trace, on_delete=models.CASCADE, null=True, blank=True, related_name="feedback")
    otel_trace_id = models.CharField(max_length=32)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    # thumbs: 1 up, 0 down; score: 0-10.
    value = models.FloatField()
    comment = models.TextField(blank=True)
    user_id = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["team", "otel_trace_id"], name="feedback_team_trace")]
        constraints = [
            models.CheckConstraint(condition=Q(value__gte=0, value__lte=10), name="feedback_value_in_range"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.value:g} on {self.otel_trace_id}"

    @property
    def negative(self) -> bool:
        return self.value == 0 if self.kind == self.Kind.THUMBS else self.value < 5


class OnlineEvaluator(models.Model):
    """A rule that scores a sample of an agent's production traces with a judge.

    `filters` picks the traces (service, attributes, tags, user feedback, latency, errors);
    `sampling_rate` of those are scored, until `daily_cost_cap` (USD) is spent in a day. `scoring`
    holds the judge's settings with the same keys as a dataset's (judge_model, acceptance,
    rejection and evaluation criteria, pass_threshold, judge_prompt); the judge configuration they
    make (runs.judging.configs.judge_config_for, no dataset) is recorded on every score, and a judge
    whose preflight failed scores nothing.
    """

    class Scope(models.TextChoices):
        TRACE = "trace", "Each trace"
        CONVERSATION = "conversation", "Whole conversation, once idle"

    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, related_name="online_evaluators")
    name = models.CharField(max_length=120)
    enabled = models.BooleanField(default=True)
    scope = models.CharField(max_length=12, choices=Scope.choices, default=Scope.TRACE)
    idle_minutes = models.PositiveIntegerField(default=30)  # a conversation is scored once idle this long
    filters = models.JSONField(default=dict, blank=True)
    sampling_rate = models.FloatField(default=0.1)  # 0-1
    daily_cost_cap = models.DecimalField(max_digits=12, decimal_places=2, null=True, blank=True)
    scoring = models.JSONField(default=dict, blank=True)
    # Alert: the pass rate of the last `alert_window` scores below `alert_below` (0-1).
    alert_window = models.PositiveIntegerField(default=20)
    alert_below = models.FloatField(null=True, blank=True)
    alert_webhook = models.URLField(max_length=500, blank=True)
    alert_email = models.EmailField(blank=True)
    # Traces received up to here have been through the beat's selection sweep (monitoring/online/selection.py).
    swept_until = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "name"], name="unique_online_evaluator_name"),
            models.CheckConstraint(
                condition=Q(sampling_rate__gte=0, sampling_rate__lte=1), name="online_evaluator_sampling_rate"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class OnlineScore(models.Model):
    """One online judgment of a trace (or of a whole conversation), by one judge configuration."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        SCORED = "scored", "Scored"
        # The judge's output failed its checks (runs.judging.checks): shown, never counted.
        UNUSABLE = "unusable", "Judge answer unusable"
        ABSTAINED = "abstained", "Needs a judge model"
        ERROR = "error", "Error"
        # Not scored: over the day's cost cap, or the judge failed its preflight.
        SKIPPED = "skipped", "Skipped"

    evaluator = models.ForeignKey(OnlineEvaluator, on_delete=models.CASCADE, related_name="scores")
    judge_config = models.ForeignKey(
        "runs.JudgeConfig", on_delete=models.PROTECT, null=True, blank=True, related_name="online_scores"
    )
    # SET_NULL: retention deletes old traces but keeps their scores' numbers, so the series keep
    # their history (monitoring/online/retention.py clears the reasoning, which quotes the trace).
    trace = models.ForeignKey(Trace, on_delete=models.SET_NULL, null=True, blank=True, related_name="scores")
    conversation = models.ForeignKey(
        Conversation, on_delete=models.SET_NULL, null=True, blank=True, related_name="scores"
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    score = models.FloatField(null=True, blank=True)
    passed = models.BooleanField(null=True, blank=True)
    verdict = models.CharField(max_length=40, blank=True)
    reasoning = models.TextField(blank=True)
    error = models.TextField(blank=True)
    tokens = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=12, decimal_places=6, default=Decimal(0))
    created_at = models.DateTimeField(auto_now_add=True)
    # When a worker took the pending score up (a lease: the reaper re-queues it once stale).
    claimed_at = models.DateTimeField(null=True, blank=True)
    # The worker that took it up (evalsite.workers.WORKER_ID): when that worker is dead or lost
    # its broker connection, the reaper sends the score again at once (monitoring/online/reaper.py).
    claimed_by = models.CharField(max_length=200, blank=True)
    scored_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["evaluator", "trace"], condition=Q(trace__isnull=False), name="unique_online_score_trace"
            ),
            models.UniqueConstraint(
                fields=["evaluator", "conversation"],
                condition=Q(conversation__isnull=False),
                name="unique_online_score_conversation",
            ),
        ]
        indexes = [
            models.Index(fields=["evaluator", "judge_config", "scored_at"], name="online_score_series"),
            # The reapers' look at the pending scores, every few seconds (a few rows among many).
            models.Index(
                fields=["claimed_at", "created_at"], condition=Q(status="pending"), name="online_score_pending"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.evaluator}: {self.status}"


class Alert(models.Model):
    """An evaluator's pass rate fell below its threshold: shown in the console and sent on."""

    evaluator = models.ForeignKey(OnlineEvaluator, on_delete=models.CASCADE, related_name="alerts")
    judge_config = models.ForeignKey("runs.JudgeConfig", on_delete=models.PROTECT, related_name="+")
    pass_rate = models.FloatField()
    window = models.PositiveIntegerField()
    threshold = models.FloatField()
    triggered_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    # {"webhook": "sent" | "failed: ...", "email": "sent" | ...}
    delivery = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-triggered_at", "-id"]

    def __str__(self) -> str:
        return f"{self.evaluator}: {self.pass_rate:.0%} < {self.threshold:.0%}"


class LearningCase(models.Model):
    """A candidate test case made from a production trace; a reviewer writes or corrects its expected
    answer, then approves it into a dataset (with provenance back to the trace) or rejects it."""

    class Status(models.TextChoices):
        CANDIDATE = "candidate", "Candidate"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"

    class Reason(models.TextChoices):
        LOW_SCORE = "low_score", "Low online score"
        THUMBS_DOWN = "thumbs_down", "Negative user feedback"
        PICKED = "picked", "Picked by a reviewer"

    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, related_name="learning_cases")
    # The trace may be deleted by retention: the case keeps its text and the provenance below.
    trace = models.ForeignKey(Trace, on_delete=models.SET_NULL, null=True, blank=True, related_name="learning_cases")
    otel_trace_id = models.CharField(max_length=32)
    trace_time = models.DateTimeField()
    service_name = models.CharField(max_length=200, blank=True)
    reason = models.CharField(max_length=12, choices=Reason.choices)
    # Higher first in the queue: a low score, a judge that disagrees with the user's feedback.
    doubt = models.FloatField(default=0)
    question = models.TextField()
    conversation = models.JSONField(default=list, blank=True)
    actual_answer = models.TextField(blank=True)
    expected_answer = models.TextField(blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.CANDIDATE)
    reject_reason = models.CharField(max_length=500, blank=True)
    dataset = models.ForeignKey(
        "datasets.Dataset", on_delete=models.SET_NULL, null=True, blank=True, related_name="learning_cases"
    )
    test_case = models.ForeignKey(
        "datasets.TestCase", on_delete=models.SET_NULL, null=True, blank=True, related_name="learning_cases"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-doubt", "-created_at", "-id"]
        constraints = [
            # One open candidate per trace: a second pick of the same trace finds the first.
            models.UniqueConstraint(
                fields=["agent", "otel_trace_id"], condition=Q(status="candidate"), name="unique_open_learning_case"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.question[:60]} ({self.status})"

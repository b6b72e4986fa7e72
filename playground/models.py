"""The playground: one message sent to one agent version outside any run.

An Exchange is one turn of a chat: the user's message (and attachments), then the
agent's reply, its tool calls, timing and cost, or the error. For http agents it also
keeps the request we sent and the raw response, which is what the "test endpoint"
button shows. Turns of one chat share `chat`; each sends the earlier answered turns
as the conversation, as a multi-turn case would.
"""

import uuid

from django.conf import settings
from django.db import models


class Exchange(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Answered"
        FAILED = "failed", "Failed"

    SETTLED = (Status.DONE, Status.FAILED)

    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, related_name="playground_exchanges")
    version = models.ForeignKey("agents.AgentVersion", on_delete=models.CASCADE, related_name="playground_exchanges")
    chat = models.UUIDField(default=uuid.uuid4, db_index=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    message = models.TextField()
    documents = models.ManyToManyField("datasets.Document", blank=True, related_name="playground_exchanges")

    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    answer = models.TextField(blank=True)
    tool_calls = models.JSONField(default=list, blank=True)
    retrieval_context = models.JSONField(default=list, blank=True)
    trace_id = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    tokens = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    # http agents: [{"request": {method, url, headers (secrets masked), body}, "status", "response", "error"}],
    # one entry per attempt, as sent and as received.
    http_attempts = models.JSONField(default=list, blank=True)
    saved_case = models.ForeignKey(
        "datasets.TestCase", on_delete=models.SET_NULL, null=True, blank=True, related_name="playground_exchanges"
    )

    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["agent", "created_by", "-created_at"])]

    def __str__(self) -> str:
        return self.message[:80]

    @property
    def is_settled(self) -> bool:
        return self.status in self.SETTLED

from functools import cached_property

from django.conf import settings
from django.db import models


class Agent(models.Model):
    class Kind(models.TextChoices):
        LLM = "llm", "LLM agent"
        HTTP = "http", "HTTP endpoint"
        KNOWLEDGE = "knowledge", "Knowledge retrieval (offline)"

    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=120)
    description = models.CharField(max_length=500, blank=True)
    kind = models.CharField(max_length=12, choices=Kind.choices, default=Kind.LLM)
    current_version = models.ForeignKey(
        "AgentVersion", on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="unique_agent_name_per_team")]

    def __str__(self) -> str:
        return self.name

    @cached_property
    def checks_that_cannot_apply(self) -> dict[str, str]:
        """Case checks this agent can never satisfy, with why: said on the case form before a case is
        written, instead of every run reading "no retrieval context"."""
        cannot: dict[str, str] = {}
        if self.kind == self.Kind.LLM:
            cannot["context"] = (
                "This LLM agent never returns retrieval context, so this check would read "
                "“no retrieval context” on every run. It applies to HTTP agents that return "
                "retrieval_context and to the knowledge agent."
            )
        tools = self.current_version.tools if self.current_version else []
        if self.kind == self.Kind.KNOWLEDGE or (self.kind == self.Kind.LLM and not tools):
            cannot["tools"] = (
                "This agent has no tools to call, so expected tool calls would fail on every run. "
                "Add tool definitions to the agent first."
            )
        return cannot


class AgentVersion(models.Model):
    """An immutable snapshot of an agent's configuration. Never updated once created."""

    # Everything a version stores that can differ between two versions (header values included).
    STORED_CONFIG_FIELDS = (
        "instructions",
        "skills",
        "knowledge",
        "guardrails",
        "model",
        "temperature",
        "tools",
        "llm_timeout",
        "http_url",
        "http_headers",
        "http_timeout",
    )
    # Fields compared between versions and shown in diffs, in display order: the same, but
    # header values are secrets, so only the header names take part.
    CONFIG_FIELDS = tuple("http_header_names" if name == "http_headers" else name for name in STORED_CONFIG_FIELDS)

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    instructions = models.TextField(blank=True)
    skills = models.TextField(blank=True)
    knowledge = models.TextField(blank=True)
    guardrails = models.TextField(blank=True)
    model = models.CharField(max_length=200, blank=True, help_text="litellm model string; empty = the default model")
    temperature = models.FloatField(null=True, blank=True)
    # [{"name", "description", "parameters": JSON schema, "result": canned result text}]
    tools = models.JSONField(default=list, blank=True)
    # Seconds one answer of an llm agent may take; null = the console's default for agent answers.
    llm_timeout = models.PositiveIntegerField(null=True, blank=True)
    http_url = models.URLField(max_length=500, blank=True)
    # {"Header-Name": "secret value"}: values are write-only in the UI.
    http_headers = models.JSONField(default=dict, blank=True)
    http_timeout = models.PositiveIntegerField(default=30)
    note = models.CharField(max_length=300, blank=True, help_text="Why this version was made")
    rolled_back_from = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-number"]
        constraints = [models.UniqueConstraint(fields=["agent", "number"], name="unique_version_number")]

    def __str__(self) -> str:
        return f"{self.agent.name} v{self.number}"

    @property
    def http_header_names(self) -> list[str]:
        return sorted(self.http_headers)

    def config(self) -> dict:
        """The comparable configuration (header values excluded: they are secrets)."""
        return {field: getattr(self, field) for field in self.CONFIG_FIELDS}

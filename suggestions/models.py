from django.conf import settings
from django.db import models


class Suggestion(models.Model):
    class Category(models.TextChoices):
        INSTRUCTIONS = "instructions", "Instructions"
        SKILLS = "skills", "Skills"
        KNOWLEDGE = "knowledge", "Knowledge"
        GUARDRAILS = "guardrails", "Guardrails"
        OTHER = "other", "Other"

    class State(models.TextChoices):
        PROPOSED = "proposed", "Proposed"
        APPLIED = "applied", "Applied"
        DISMISSED = "dismissed", "Dismissed"

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="suggestions")
    position = models.PositiveSmallIntegerField(default=0)
    title = models.CharField(max_length=200)
    category = models.CharField(max_length=14, choices=Category.choices)
    description = models.TextField(max_length=2000)
    # Text to add to the agent's field as it stands, when the suggestion is that concrete
    # (the offline generator always is: the missing fact). Rewrites fall back to it without a model.
    proposed_text = models.TextField(blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.PROPOSED)
    offline = models.BooleanField(default=False, help_text="Proposed by the offline generator, not a model")
    cases = models.ManyToManyField("runs.RunCase", blank=True, related_name="suggestions")
    applied_version = models.ForeignKey(
        "agents.AgentVersion", on_delete=models.SET_NULL, null=True, blank=True, related_name="suggestions"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "position", "id"]

    TITLE_MAX = 200
    DESCRIPTION_MAX = 2000

    def __str__(self) -> str:
        return self.title

    @property
    def target_field(self) -> str:
        """The agent version field this suggestion changes ("other" goes to the instructions)."""
        return "instructions" if self.category == self.Category.OTHER else self.category


class SuggestionGeneration(models.Model):
    """The suggestion job of one run: lets the run page say "generating", "failed" or "done".

    One row per run. A finished run (or the "Suggest changes" button) queues it; the task
    moves it to running and then to done or failed. Suggestions themselves are the
    Suggestion rows; this only tracks the job.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Generating"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    ACTIVE_STATUSES = (Status.QUEUED, Status.RUNNING)

    run = models.OneToOneField("runs.Run", on_delete=models.CASCADE, related_name="suggestion_generation")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    offline = models.BooleanField(default=False, help_text="Generated without a model")
    error = models.TextField(blank=True)
    # Why some failing cases got no suggestion (e.g. their expected answer is a refusal), shown on the panel.
    notes = models.JSONField(default=list, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    queued_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"Suggestions for run {self.run_id} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE_STATUSES


class RewriteJob(models.Model):
    """Step 1 of the Apply dialog done in the background: the model rewrites each affected
    field of the agent's configuration, one task per field (suggestions/rewrite.py).

    `fields` holds, in review order, one entry per field:
    {"name", "status" (a FieldStatus), "current" (the text rewritten), "text" (the rewrite),
    "error" (why it failed)}. The dialog polls the row; step 2 reviews the texts.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Rewriting"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    class FieldStatus(models.TextChoices):
        PENDING = "pending", "Waiting"
        RUNNING = "running", "Rewriting"
        DONE = "done", "Rewritten"
        FAILED = "failed", "Failed"
        KEPT = "kept", "Kept as it is"

    ACTIVE_STATUSES = (Status.QUEUED, Status.RUNNING)

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="rewrite_jobs")
    # The version the fields were read from; step 2 refuses to apply if the agent moved on since.
    base_version = models.ForeignKey("agents.AgentVersion", on_delete=models.CASCADE, related_name="+")
    suggestion_ids = models.JSONField(default=list)
    fields = models.JSONField(default=list)
    status = models.CharField(max_length=9, choices=Status.choices, default=Status.QUEUED)
    error = models.TextField(blank=True)
    # A fresh token per enqueue: a message of an earlier attempt (before a retry or a cancel) does nothing.
    token = models.CharField(max_length=32)
    # The worker and time of the field being rewritten now, for the reaper.
    claimed_by = models.CharField(max_length=200, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    queued_at = models.DateTimeField()  # when the message of the next field was sent
    resent_at = models.DateTimeField(null=True, blank=True)  # by the reaper, when that message was lost
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["status"], name="rewrite_job_status")]

    def __str__(self) -> str:
        return f"Rewrite job {self.pk} of run {self.run_id} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE_STATUSES

    def field_count(self, *statuses: str) -> int:
        return sum(1 for entry in self.fields if entry["status"] in statuses)


class PreviewJob(models.Model):
    """Before Apply, with a model: the changed agent answers the cases its new text reaches,
    scored by the run's own judge, in the background (suggestions/preview.py). Nothing is
    saved to the agent: the changed version exists only in the worker's memory.

    `results` holds one entry per case as it finishes: {"number", "question", "before" (the
    run's verdict), "status" (the preview's), "score", "answer", "error"}.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Waiting for a worker"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    ACTIVE_STATUSES = (Status.QUEUED, Status.RUNNING)

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="preview_jobs")
    base_version = models.ForeignKey("agents.AgentVersion", on_delete=models.CASCADE, related_name="+")
    texts = models.JSONField(default=dict)  # {field: the new text}
    positions = models.JSONField(default=list)  # the run's cases to answer, in order
    results = models.JSONField(default=list)
    status = models.CharField(max_length=7, choices=Status.choices, default=Status.QUEUED)
    error = models.TextField(blank=True)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    queued_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"Preview job {self.pk} of run {self.run_id} ({self.status})"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE_STATUSES

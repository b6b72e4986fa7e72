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

    @property
    def target_field(self) -> str:
        """The agent version field this suggestion changes ("other" goes to the instructions)."""
        return "instructions" if self.category == self.Category.OTHER else self.category

    def __str__(self) -> str:
        return self.title

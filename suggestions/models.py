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
    state = models.CharField(max_length=10, choices=State.choices, default=State.PROPOSED)
    offline = models.BooleanField(default=False, help_text="Proposed by the offline generator, not a model")
    cases = models.ManyToManyField("runs.RunCase", blank=True, related_name="suggestions")
    applied_version = models.ForeignKey(
        "agents.AgentVersion", on_delete=models.SET_NULL, null=True, blank=True, related_name="suggestions"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "position", "id"]

    def __str__(self) -> str:
        return self.title

from django.conf import settings
from django.db import models
from django.db.models import Q


class Review(models.Model):
    """A person's verdict on one result, beside the judge's: never replacing it.

    `agrees` is the one-key review (the judge's verdict and score stand); an override
    gives the reviewer's own verdict and, optionally, score. One review per (result,
    reviewer): reviewing again changes your review; several reviewers may review one result.
    """

    result = models.ForeignKey("runs.Result", on_delete=models.CASCADE, related_name="reviews")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="reviews")
    agrees = models.BooleanField(default=False)
    passed = models.BooleanField(help_text="The reviewer's verdict (the judge's when agreeing)")
    score = models.FloatField(null=True, blank=True, help_text="The reviewer's score 0-10, when given")
    note = models.TextField(blank=True, max_length=2000)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    NOTE_MAX = 2000

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["result", "reviewer"], name="unique_review_per_result_reviewer"),
            models.CheckConstraint(
                condition=Q(score__isnull=True) | Q(score__gte=0, score__lte=10), name="review_score_0_10"
            ),
        ]

    def __str__(self) -> str:
        return f"Review of result {self.result_id} by {self.reviewer_id}"


class CaseEdit(models.Model):
    """A change to a dataset's case made from a result card ("the expected answer is
    wrong"): the old and new value, so the card and the case can say what changed after
    which run. The run's own snapshot (RunCase) is never touched."""

    class Field(models.TextChoices):
        EXPECTED_ANSWER = "expected_answer", "Expected answer"
        JUDGE_GUIDELINE = "judge_guideline", "Judge guideline"

    case = models.ForeignKey("datasets.TestCase", on_delete=models.CASCADE, related_name="review_edits")
    result = models.ForeignKey("runs.Result", on_delete=models.SET_NULL, null=True, related_name="case_edits")
    field = models.CharField(max_length=20, choices=Field.choices)
    old_value = models.TextField(blank=True)
    new_value = models.TextField(blank=True)
    # The case's revision after this edit: 1 is the first edit from a card.
    revision = models.PositiveIntegerField()
    edited_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["case", "revision", "id"]

    def __str__(self) -> str:
        return f"Case {self.case_id} revision {self.revision}"

"""Input validation for reviews and case corrections (the views hand cleaned data to services)."""

from __future__ import annotations

from typing import Any

from django import forms

from reviews.models import Review
from reviews.queue import REASONS


class ReviewForm(forms.Form):
    VERDICTS = [("agree", "Agree with the judge"), ("pass", "Pass"), ("fail", "Fail")]

    verdict = forms.ChoiceField(choices=VERDICTS, error_messages={"required": "Agree, or choose pass or fail."})
    score = forms.FloatField(required=False, min_value=0, max_value=10)
    note = forms.CharField(required=False, max_length=Review.NOTE_MAX, strip=True)
    next = forms.CharField(required=False, max_length=2000)

    def review_fields(self) -> dict[str, Any]:
        data = self.cleaned_data
        agrees = data["verdict"] == "agree"
        return {
            "agrees": agrees,
            "passed": None if agrees else data["verdict"] == "pass",
            "score": None if agrees else data.get("score"),
            "note": data.get("note") or "",
        }


class CaseCorrectionForm(forms.Form):
    expected_answer = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 4}), strip=True)
    judge_guideline = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}), strip=True)


class QueueFilterForm(forms.Form):
    reason = forms.ChoiceField(choices=[("", "Every reason"), *REASONS.items()], required=False)
    tag = forms.CharField(required=False, max_length=100)

    def filters(self) -> dict[str, str]:
        if not self.is_valid():
            return {"reason": "", "tag": ""}
        return {"reason": self.cleaned_data["reason"] or "", "tag": self.cleaned_data["tag"] or ""}


class AgreementFilterForm(forms.Form):
    tag = forms.CharField(required=False, max_length=100)

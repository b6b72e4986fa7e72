"""Forms of the monitoring pages: the trace list's filters and a learning case's review. They only
validate; the views hand what they clean to monitoring.selectors and monitoring.learning."""

from __future__ import annotations

from typing import Any

from django import forms

from agents.models import Agent
from datasets.models import Dataset
from monitoring.learning import REJECT_REASON_MAX
from monitoring.models import LearningCase
from monitoring.selectors import TraceFilters


class TraceFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=200)
    service = forms.CharField(required=False, max_length=200)
    status = forms.ChoiceField(required=False, choices=[("", "Any status"), ("ok", "OK"), ("error", "Error")])
    feedback = forms.ChoiceField(required=False, choices=[("", "Any feedback"), ("negative", "Negative feedback")])
    score = forms.ChoiceField(required=False, choices=[("", "Any score"), ("failed", "Failed online score")])
    below = forms.FloatField(required=False, min_value=0, max_value=10)
    model = forms.CharField(required=False, max_length=200)
    date_from = forms.DateField(required=False)
    date_to = forms.DateField(required=False)

    def filters(self) -> TraceFilters:
        """The filters of the valid fields (a bad one filters nothing, as an empty one)."""
        self.is_valid()
        data = getattr(self, "cleaned_data", {})
        return TraceFilters(
            service=data.get("service") or "",
            status=data.get("status") or "",
            negative_feedback=data.get("feedback") == "negative",
            failed=data.get("score") == "failed",
            score_below=data.get("below"),
            model=data.get("model") or "",
            date_from=data.get("date_from"),
            date_to=data.get("date_to"),
            q=(data.get("q") or "").strip(),
        )


class LearningCreateForm(forms.Form):
    reason = forms.ChoiceField(choices=LearningCase.Reason.choices, initial=LearningCase.Reason.PICKED)


class LearningApproveForm(forms.Form):
    dataset = forms.ModelChoiceField(queryset=Dataset.objects.none(), empty_label=None)
    expected_answer = forms.CharField(widget=forms.Textarea(attrs={"rows": 5}))

    def __init__(self, *args: Any, agent: Agent, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["dataset"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = Dataset.objects.filter(agent=agent).order_by("name")


class LearningRejectForm(forms.Form):
    reason = forms.CharField(max_length=REJECT_REASON_MAX)

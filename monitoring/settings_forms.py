"""Forms of Settings → Monitoring; they only validate, the views hand what they clean to
monitoring/services.py. The API validates with the same forms (monitoring/api_settings.py)."""

from __future__ import annotations

from typing import Any

from django import forms

from accounts.models import Team
from agents.models import Agent
from monitoring.models import DEFAULT_RETENTION_DAYS, IngestionKey, ServiceMapping
from monitoring.services import MAX_RETENTION_DAYS


class IngestionKeyForm(forms.Form):
    name = forms.CharField(
        max_length=IngestionKey._meta.get_field("name").max_length,
        label="Key name",
        help_text="The app or environment that will send traces, e.g. “support bot, production”.",
    )

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if not name:
            raise forms.ValidationError("Enter a name for the key.")
        return name


class ServiceMappingForm(forms.Form):
    service_name = forms.CharField(
        max_length=ServiceMapping._meta.get_field("service_name").max_length,
        label="Service name",
        help_text="The service.name your app's OpenTelemetry resource sends.",
    )
    agent = forms.ModelChoiceField(queryset=Agent.objects.none(), label="Agent", empty_label=None)

    def __init__(self, *args: Any, team: Team, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["agent"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = Agent.objects.filter(team=team).order_by("name")

    def clean_service_name(self) -> str:
        name = self.cleaned_data["service_name"].strip()
        if not name:
            raise forms.ValidationError("Enter the service name.")
        return name


class RetentionForm(forms.Form):
    retention_days = forms.IntegerField(
        min_value=1,
        max_value=MAX_RETENTION_DAYS,
        initial=DEFAULT_RETENTION_DAYS,
        label="Keep traces for (days)",
        help_text="Older traces are deleted every night; learning cases made from them keep their text.",
    )


class MaskingForm(forms.Form):
    mask_personal_data = forms.BooleanField(required=False, label="Mask personal data")

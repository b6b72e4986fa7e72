"""Input validation for the Apply dialog and the Verify form (services do the rest)."""

from __future__ import annotations

from typing import Any, cast

from django import forms

from agents.models import AgentVersion
from runs.models import Run
from suggestions.models import Suggestion
from suggestions.services import EDITABLE_FIELDS, SuggestionEdit

# A verify sample larger than any dataset makes no sense; the limit only stops typos.
SAMPLE_MAX = 500
SAMPLE_DEFAULT = 5


def _lines(text: str) -> str:
    # Browsers submit textareas with CRLF line ends; stored text uses LF, so an untouched
    # line must not show up as changed in a diff.
    return text.replace("\r\n", "\n").replace("\r", "\n")


class SuggestionEditForm(forms.Form):
    """One suggestion as the user left it in step 1 of the Apply dialog."""

    id = forms.IntegerField(widget=forms.HiddenInput)
    selected = forms.BooleanField(required=False)
    title = forms.CharField(max_length=Suggestion.TITLE_MAX, required=False)
    category = forms.ChoiceField(choices=Suggestion.Category.choices)
    description = forms.CharField(
        max_length=Suggestion.DESCRIPTION_MAX, required=False, widget=forms.Textarea(attrs={"rows": 3})
    )

    def clean_description(self) -> str:
        return _lines(self.cleaned_data["description"])

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("selected") and not cleaned.get("title", "").strip():
            self.add_error("title", "Give the suggestion a title, or untick it.")
        return cleaned


class BaseSuggestionEditFormSet(forms.BaseFormSet):
    def clean(self) -> None:
        super().clean()
        if any(self.errors):
            return
        if not any(form.cleaned_data.get("selected") for form in self.forms):
            raise forms.ValidationError("Select at least one suggestion to apply.")

    def edits(self) -> list[SuggestionEdit]:
        """The ticked suggestions, in the order shown."""
        return [
            SuggestionEdit(id=d["id"], title=d["title"], category=d["category"], description=d["description"])
            for d in (form.cleaned_data for form in self.forms)
            if d.get("selected")
        ]


# formset_factory is typed as returning the base BaseFormSet: keep edits() visible.
SuggestionEditFormSet = cast(
    type[BaseSuggestionEditFormSet],
    forms.formset_factory(
        SuggestionEditForm, formset=BaseSuggestionEditFormSet, extra=0, max_num=50, validate_max=True
    ),
)


def edit_formset(
    *, suggestions: list[Suggestion], data: Any = None, selected: set[int] | None = None
) -> BaseSuggestionEditFormSet:
    """Step 1 of the dialog: every proposed suggestion, ticked by default (or as `selected` says)."""
    initial = [
        {
            "id": s.pk,
            "selected": selected is None or s.pk in selected,
            "title": s.title,
            "category": s.category,
            "description": s.description,
        }
        for s in suggestions
    ]
    return SuggestionEditFormSet(data, initial=initial, prefix="s")


class _AppliesToRun(forms.Form):
    """Hidden fields that tie a step-2 post to the suggestions and the version it previewed."""

    suggestions = forms.ModelMultipleChoiceField(queryset=Suggestion.objects.none(), widget=forms.MultipleHiddenInput)
    base_version = forms.ModelChoiceField(queryset=AgentVersion.objects.none(), widget=forms.HiddenInput)

    def __init__(self, *args: Any, run: Run, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Both are model choice fields (declared above); self.fields is typed as plain Field.
        self.fields["suggestions"].queryset = run.suggestions.filter(state=Suggestion.State.PROPOSED)  # type: ignore[attr-defined]
        self.fields["base_version"].queryset = AgentVersion.objects.filter(agent_id=run.agent_id)  # type: ignore[attr-defined]
        self.fields["suggestions"].error_messages["invalid_choice"] = (
            "One of these suggestions was applied or removed meanwhile. Close the dialog and start again."
        )


class ApplyConfirmForm(_AppliesToRun):
    """Step 2: the final text of every affected field, as the user edited it."""

    fields_changed = forms.MultipleChoiceField(
        choices=[(name, name) for name in EDITABLE_FIELDS], widget=forms.MultipleHiddenInput
    )
    instructions = forms.CharField(required=False, strip=False, widget=forms.Textarea)
    skills = forms.CharField(required=False, strip=False, widget=forms.Textarea)
    knowledge = forms.CharField(required=False, strip=False, widget=forms.Textarea)
    guardrails = forms.CharField(required=False, strip=False, widget=forms.Textarea)

    def texts(self) -> dict[str, str]:
        """{field: final text} for the affected fields only."""
        return {name: _lines(self.cleaned_data[name]).strip() for name in self.cleaned_data["fields_changed"]}


class ApplyDiffForm(_AppliesToRun):
    """Step 2's live diff: one field's edited text against the version it will replace."""

    field = forms.ChoiceField(choices=[(name, name) for name in EDITABLE_FIELDS])

    def text(self) -> str:
        return _lines(self.data.get(self.cleaned_data["field"], "")).strip()


class RewriteActionForm(forms.Form):
    """The buttons of the rewrite's progress step: Cancel, Try again (a field or all), Keep the original."""

    CANCEL, RETRY, KEEP = "cancel", "retry", "keep"

    action = forms.ChoiceField(choices=[(CANCEL, "Cancel"), (RETRY, "Try again"), (KEEP, "Keep the original")])
    field = forms.ChoiceField(
        choices=[("", "every field"), *[(name, name) for name in EDITABLE_FIELDS]], required=False
    )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("action") == self.KEEP and not cleaned.get("field"):
            self.add_error("field", "Say which field keeps its text.")
        return cleaned


class VerifyForm(forms.Form):
    SCOPE_ALL = "all"
    SCOPE_SAMPLE = "sample"

    version = forms.ModelChoiceField(queryset=AgentVersion.objects.none(), widget=forms.HiddenInput)
    scope = forms.ChoiceField(choices=[(SCOPE_ALL, "All cases"), (SCOPE_SAMPLE, "Failing cases and a sample")])
    sample = forms.IntegerField(min_value=0, max_value=SAMPLE_MAX, required=False, initial=SAMPLE_DEFAULT)
    request_key = forms.CharField(max_length=64, required=False, widget=forms.HiddenInput)

    def __init__(self, *args: Any, run: Run, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # A model choice field (declared above); self.fields is typed as plain Field.
        self.fields["version"].queryset = AgentVersion.objects.filter(agent_id=run.agent_id)  # type: ignore[attr-defined]

    def sample_passing(self) -> int | None:
        if self.cleaned_data["scope"] == self.SCOPE_ALL:
            return None
        sample = self.cleaned_data.get("sample")
        return SAMPLE_DEFAULT if sample is None else sample

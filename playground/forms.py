"""Playground input: a message (with attachments) and the save-as-test-case form."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from agents.models import Agent
from datasets.models import Dataset
from playground.services import MAX_MESSAGE_CHARS


class MessageForm(forms.Form):
    message = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "Ask the agent something…"}),
        max_length=MAX_MESSAGE_CHARS,
        strip=True,
        error_messages={"required": "Write a message to send."},
    )
    chat = forms.UUIDField(required=False, widget=forms.HiddenInput)
    version = forms.TypedChoiceField(coerce=int, required=True)

    def __init__(self, *args: Any, agent: Agent, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        versions = agent.versions.order_by("-number").values_list("pk", "number")
        current = agent.current_version_id
        field = self.fields["version"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [(pk, f"v{number}" + (" (current)" if pk == current else "")) for pk, number in versions]


class SaveCaseForm(forms.Form):
    dataset = forms.TypedChoiceField(coerce=int, error_messages={"required": "Choose a dataset."})
    question = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), strip=True)
    expected_answer = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 5}),
        required=False,
        strip=True,
        help_text="The agent's answer, as a draft: correct it to the answer you expect before saving.",
    )
    expected_tools = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        required=False,
        help_text='The tool calls as expected tools, JSON: [{"name": "lookup_order", "args": {"id": "A1"}}].',
    )
    keep_conversation = forms.BooleanField(
        required=False, initial=True, label="Keep the chat's earlier turns (a multi-turn case)"
    )

    def __init__(self, *args: Any, datasets: list[Dataset], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["dataset"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [(dataset.pk, dataset.name) for dataset in datasets]

    def clean_expected_tools(self) -> list[dict[str, Any]]:
        raw = self.cleaned_data["expected_tools"].strip()
        if not raw:
            return []
        try:
            tools = json.loads(raw)
        except ValueError as exc:
            raise forms.ValidationError(f"Not valid JSON: {exc}.") from None
        if not isinstance(tools, list) or not all(isinstance(tool, dict) and tool.get("name") for tool in tools):
            raise forms.ValidationError('Give a list of calls, each with a "name" (and optional "args").')
        return tools

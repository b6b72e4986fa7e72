"""Agent forms: they validate and normalise input; services.py does the writes.

The agent editor is three forms: the main fields, a formset of tool definitions and a
formset of HTTP headers. Header values are write-only: an existing header's value is
never rendered back, and leaving it blank keeps the stored value.
"""

import json
from typing import Any, cast

from django import forms
from django.core.exceptions import ValidationError
from django.forms import BaseFormSet, formset_factory

from agents.models import Agent
from agents.services import (
    HEADER_NAME_RE,
    HTTP_TIMEOUT_MAX,
    KIND_FIELDS,
    LLM_TIMEOUT_MAX,
    TOOL_NAME_RE,
    kind_form_fields,
)
from evalsite.forms import optional_textarea

# Every field of some kind's sections, in KIND_FIELDS order: the page hides the sections
# of the kinds not chosen.
SECTION_FIELDS = tuple(dict.fromkeys(name for kind in Agent.Kind.values for name in kind_form_fields(kind)))


class AgentForm(forms.Form):
    name = forms.CharField(max_length=120)
    description = forms.CharField(
        max_length=500, required=False, help_text="One line: what the agent does and for whom."
    )
    kind = forms.ChoiceField(choices=Agent.Kind.choices, initial=Agent.Kind.LLM, widget=forms.RadioSelect)
    instructions = optional_textarea(8, help_text="The system prompt: role, tone, what to do and not do.")
    skills = optional_textarea(5, help_text="Procedures the agent follows, e.g. “To process a refund: …”.")
    knowledge = optional_textarea(
        10,
        help_text="Facts the agent may use. For a knowledge agent, separate passages with blank lines: "
        "it answers with the passage that best matches the question.",
    )
    guardrails = optional_textarea(
        4, help_text="Rules the agent must never break, e.g. “Never promise refunds after 30 days.”"
    )
    model = forms.CharField(
        max_length=200,
        required=False,
        help_text="A litellm model string such as openai/gpt-4o-mini. Blank uses the server's default model.",
    )
    temperature = forms.FloatField(
        required=False,
        min_value=0,
        max_value=2,
        widget=forms.NumberInput(attrs={"step": "0.1"}),
        help_text="0 = most deterministic, best for evaluations. Blank uses the model's default.",
    )
    llm_timeout = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=LLM_TIMEOUT_MAX,
        label="Timeout (seconds)",
    )
    http_url = forms.URLField(
        max_length=500,
        required=False,
        assume_scheme="https",
        label="Endpoint URL",
        help_text="Evalsite POSTs each test question here as JSON.",
    )
    http_timeout = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=HTTP_TIMEOUT_MAX,
        initial=30,
        label="Timeout (seconds)",
        help_text=f"How long to wait for one answer (1-{HTTP_TIMEOUT_MAX}).",
    )
    note = forms.CharField(
        max_length=300,
        required=False,
        label="What changed?",
        help_text="Optional. Shown in the version history, e.g. “Stricter refund guardrail”.",
    )

    def __init__(self, *args: Any, kind: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if kind is not None:  # editing: the kind is fixed once the agent exists
            del self.fields["kind"]
        self.fixed_kind = kind
        from evalsite import llm  # the gateway's default bound on an agent answer (settings only, no model call)

        self.fields["llm_timeout"].widget.attrs["placeholder"] = f"{llm.timeout_for('agent'):g}"
        self.fields["llm_timeout"].help_text = (
            f"How long to wait for one answer of the model (1-{LLM_TIMEOUT_MAX}). Blank uses the console's default "
            f"for agent answers ({llm.timeout_for('agent'):g} s). A timed-out answer is an error and is not retried "
            "unless the server sets EVALSITE_LLM_RETRY_TIMEOUTS."
        )

    @property
    def selected_kind(self) -> str:
        """The agent's kind: fixed when editing, else the submitted (or initial) choice."""
        if self.fixed_kind:
            return self.fixed_kind
        value = str(self["kind"].value() or "")
        return value if value in Agent.Kind.values else Agent.Kind.LLM

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if not name:
            raise ValidationError("Enter a name.")
        return name

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        kind = self.selected_kind
        # Sections of other kinds are hidden in the page and never saved: their errors
        # (e.g. a half-typed URL before switching kind) must not block the save.
        for name in set(SECTION_FIELDS) - set(kind_form_fields(kind)):
            self.errors.pop(name, None)
        if kind == Agent.Kind.LLM and not cleaned.get("instructions", "").strip():
            self.add_error("instructions", "An LLM agent needs instructions (its system prompt).")
        if kind == Agent.Kind.KNOWLEDGE and not cleaned.get("knowledge", "").strip():
            self.add_error("knowledge", "A knowledge agent answers from this text: add at least one passage.")
        if kind == Agent.Kind.HTTP and not cleaned.get("http_url") and "http_url" not in self.errors:
            self.add_error("http_url", "An HTTP agent needs the URL of its endpoint.")
        return cleaned


class ToolForm(forms.Form):
    name = forms.CharField(
        max_length=64, widget=forms.TextInput(attrs={"placeholder": "lookup_order", "spellcheck": "false"})
    )
    description = forms.CharField(
        max_length=1000,
        required=False,
        widget=forms.TextInput(attrs={"placeholder": "What the tool does, as the model will read it"}),
    )
    parameters = forms.CharField(
        required=False,
        label="Parameters (JSON schema)",
        widget=forms.Textarea(
            attrs={
                "rows": 5,
                "spellcheck": "false",
                "class": "mono",
                "placeholder": '{"type": "object", "properties": {"order_id": {"type": "string"}}}',
            }
        ),
    )
    result = forms.CharField(
        required=False,
        label="Canned result",
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": '{"status": "shipped", "eta": "2 days"}'}),
        help_text="Returned to the agent whenever it calls this tool during a run.",
    )

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if not TOOL_NAME_RE.match(name):
            raise ValidationError("Use 1-64 letters, digits, _ or - (no spaces).")
        return name

    def clean_parameters(self) -> dict[str, Any]:
        raw = self.cleaned_data["parameters"].strip()
        if not raw:
            return {"type": "object", "properties": {}}
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as error:
            raise ValidationError(f"Not valid JSON: {error.msg} (line {error.lineno}, column {error.colno}).") from None
        if not isinstance(value, dict) or value.get("type") != "object":
            raise ValidationError('The parameters must be a JSON schema object: {"type": "object", "properties": {…}}.')
        return value


class BaseToolFormSet(BaseFormSet):
    def clean(self) -> None:
        if any(self.errors):
            return
        names = [form.cleaned_data["name"] for form in self._kept_forms()]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValidationError(f"Tool names must be unique: {', '.join(duplicates)} is used twice.")

    def _kept_forms(self) -> list[forms.Form]:
        # Blank extra rows have empty cleaned_data; rows ticked "Remove" are dropped.
        return [form for form in self.forms if form.cleaned_data and not form.cleaned_data.get("DELETE")]

    def tools(self) -> list[dict[str, Any]]:
        return [
            {key: form.cleaned_data[key] for key in ("name", "description", "parameters", "result")}
            for form in self._kept_forms()
        ]


# formset_factory is typed as returning the base BaseFormSet: keep our subclass's methods visible.
ToolFormSet = cast(
    type[BaseToolFormSet],
    formset_factory(ToolForm, formset=BaseToolFormSet, extra=0, can_delete=True, max_num=50),
)


class HeaderForm(forms.Form):
    # Existing headers render their name read-only (and a hidden copy of it).
    existing = forms.BooleanField(required=False, widget=forms.HiddenInput)
    name = forms.CharField(
        max_length=100,
        required=False,
        widget=forms.TextInput(attrs={"placeholder": "Authorization", "spellcheck": "false", "autocomplete": "off"}),
    )
    value = forms.CharField(
        max_length=4000,
        required=False,
        strip=False,
        # render_value=False: a stored secret never travels back to the browser.
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password", "spellcheck": "false"}),
    )
    remove = forms.BooleanField(required=False)

    @property
    def is_existing(self) -> bool:
        """A row for a stored header (its name is shown read-only, its value never)."""
        if self.is_bound:
            return self.data.get(self.add_prefix("existing")) in ("True", "true", "on", "1")
        return bool(self.initial.get("existing"))

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        if name and not HEADER_NAME_RE.match(name):
            raise ValidationError("Not a valid header name (letters, digits and - only, no spaces).")
        return name

    def clean_value(self) -> str:
        value = self.cleaned_data["value"].strip()
        if "\r" in value or "\n" in value:
            raise ValidationError("A header value must be a single line.")
        return value


class BaseHeaderFormSet(BaseFormSet):
    """Merges the submitted rows with the stored values into the new headers dict."""

    def __init__(self, *args: Any, current: dict[str, str] | None = None, **kwargs: Any) -> None:
        self.current = current or {}
        if "initial" not in kwargs:
            kwargs["initial"] = [{"existing": True, "name": name} for name in sorted(self.current, key=str.lower)]
        super().__init__(*args, **kwargs)

    def clean(self) -> None:
        if any(self.errors):
            return
        headers: dict[str, str] = {}
        for form in self.forms:
            data = form.cleaned_data
            name, value = data.get("name", ""), data.get("value", "")
            if not name and not value:
                continue  # an empty new row
            if not name:
                raise ValidationError("Every header needs a name.")
            if data.get("remove"):
                continue
            if name.lower() in {existing.lower() for existing in headers}:
                raise ValidationError(f"The header {name} is listed twice.")
            if not value:
                # Blank value on a stored header = keep it. Only trust the stored dict, not the
                # client's "existing" flag: a forged flag must not conjure a value.
                if data.get("existing") and name in self.current:
                    value = self.current[name]
                else:
                    raise ValidationError(f"Enter a value for the header {name}.")
            headers[name] = value
        self.cleaned_headers = headers


HeaderFormSet = cast(
    type[BaseHeaderFormSet], formset_factory(HeaderForm, formset=BaseHeaderFormSet, extra=1, max_num=30)
)


class AgentEditor:
    """The agent form with its tool and header formsets, validated together."""

    def __init__(
        self,
        data: Any = None,
        *,
        kind: str | None = None,
        initial: dict[str, Any] | None = None,
        tools: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.form = AgentForm(data, kind=kind, initial=initial)
        tool_initial = [
            {**tool, "parameters": json.dumps(tool.get("parameters") or {}, indent=2)} for tool in (tools or [])
        ]
        self.tool_forms = ToolFormSet(data, prefix="tools", initial=tool_initial)
        self.header_forms = HeaderFormSet(data, prefix="headers", current=headers or {})

    @property
    def kind(self) -> str:
        return self.form.selected_kind

    def is_valid(self) -> bool:
        form_ok = self.form.is_valid()
        # Only the kind's own sections must be valid: hidden sections are ignored, not saved.
        fields = KIND_FIELDS[self.kind]
        tools_ok = "tools" not in fields or self.tool_forms.is_valid()
        headers_ok = "http_headers" not in fields or self.header_forms.is_valid()
        return form_ok and tools_ok and headers_ok

    def config(self) -> dict[str, Any]:
        """The settings of the agent's kind, ready for agent_create/agent_update."""
        data = self.form.cleaned_data
        values: dict[str, Any] = {key: data.get(key) for key in kind_form_fields(self.kind)}
        # The formsets hold these two; an empty URL or timeout field means the default.
        if "tools" in values:
            values["tools"] = self.tool_forms.tools()
        if "http_headers" in values:
            values["http_headers"] = self.header_forms.cleaned_headers
        if "http_url" in values:
            values["http_url"] = values["http_url"] or ""
        if "http_timeout" in values:
            values["http_timeout"] = values["http_timeout"] or 30
        return values

    def has_errors(self) -> bool:
        if not self.form.is_bound:
            return False
        fields = KIND_FIELDS[self.kind]
        tools_bad = "tools" in fields and not self.tool_forms.is_valid()
        headers_bad = "http_headers" in fields and not self.header_forms.is_valid()
        return bool(self.form.errors) or tools_bad or headers_bad

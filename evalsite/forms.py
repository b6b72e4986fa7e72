"""Form field builders shared by the apps' forms."""

from typing import Any

from django import forms


def optional_textarea(rows: int, **kwargs: Any) -> forms.CharField:
    """An optional multi-line text field `rows` rows high.

    Prompts, criteria and guidance are all this; built in one place, each declaration
    shows only what sets it apart (its help text, sometimes a label).
    """
    return forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": rows}), **kwargs)


def form_messages(form: forms.BaseForm) -> list[str]:
    """Every message of a bound, invalid form, field after field: for a refusal said in one
    line (a toast, an API's `detail`) rather than beside each field."""
    return [str(message) for messages in form.errors.values() for message in messages]

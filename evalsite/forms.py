"""Form field builders shared by the apps' forms."""

from typing import Any

from django import forms


def optional_textarea(rows: int, **kwargs: Any) -> forms.CharField:
    """An optional multi-line text field `rows` rows high.

    Prompts, criteria and guidance are all this; built in one place, each declaration
    shows only what sets it apart (its help text, sometimes a label).
    """
    return forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": rows}), **kwargs)

"""Filters of the monitoring pages. `masked` marks the personal data ingestion replaced
(monitoring/ingest/masking.py writes `[masked:email]`), so a reader sees the text was masked and
what kind it held, not a strange word in the answer."""

from __future__ import annotations

import re
from typing import Any

from django import template
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe

register = template.Library()

# The marker of monitoring.ingest.masking.MARKER: "[masked:<kind>]".
_MARKER = re.compile(r"\[masked:([a-z_]{1,20})\]")


@register.filter
def masked(value: Any) -> SafeString:
    """The text escaped, with each masking marker shown as a labelled badge."""
    text = str(conditional_escape("" if value is None else value))
    return mark_safe(  # noqa: S308 - the text was escaped above; the badges are format_html
        _MARKER.sub(
            lambda m: format_html('<mark class="masked" title="Masked before storage">{} masked</mark>', m.group(1)),
            text,
        )
    )

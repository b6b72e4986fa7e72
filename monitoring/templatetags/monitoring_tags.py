"""Filters of the monitoring pages. `masked` marks the personal data ingestion replaced
(monitoring/ingest/masking.py writes `[masked:email]`), so a reader sees the text was masked and
what kind it held, not a strange word in the answer."""

from __future__ import annotations

import re
from typing import Any

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

register = template.Library()

# The marker of monitoring.ingest.masking.MARKER: "[masked:<kind>]".
_MARKER = re.compile(r"\[masked:([a-z_]{1,20})\]")


@register.filter
def masked(value: Any) -> SafeString:
    """The text escaped, with each masking marker shown as a labelled badge."""
    parts = _MARKER.split("" if value is None else str(value))  # text, kind, text, kind, ..., text
    texts, kinds = parts[0::2], parts[1::2]
    badges = [
        format_html('<mark class="masked" title="Masked before storage">{} masked</mark>', kind) for kind in kinds
    ] + [""]
    # format_html_join escapes each piece of text; the badges are format_html's already.
    return format_html_join("", "{}{}", zip(texts, badges, strict=True))

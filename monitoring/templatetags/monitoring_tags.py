"""Filters of the monitoring pages. `masked` marks the personal data ingestion replaced
(monitoring/ingest/masking.py writes `[masked:email]`), so a reader sees the text was masked and
what kind it held, not a strange word in the answer."""

from __future__ import annotations

import json
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
    """The text escaped, with each masking marker shown as a labelled badge. A dict or a list (a
    tool call's arguments, an OTLP array attribute) is shown as the JSON it came as, not as
    Python's repr: {"order_id": "A-1042"}, never {'order_id': 'A-1042'}."""
    if value is None:
        text = ""
    elif isinstance(value, dict | list | tuple):
        text = json.dumps(value, ensure_ascii=False)
    else:
        text = str(value)
    parts = _MARKER.split(text)  # text, kind, text, kind, ..., text
    texts, kinds = parts[0::2], parts[1::2]
    badges = [
        format_html('<mark class="masked" title="Masked before storage">{} masked</mark>', kind) for kind in kinds
    ] + [""]
    # format_html_join escapes each piece of text; the badges are format_html's already.
    return format_html_join("", "{}{}", zip(texts, badges, strict=True))

import re

from django import template
from django.conf import settings
from django.forms import BoundField

from datasets.selectors import MAX_SEARCH_TERMS
from evalsite import llm

register = template.Library()


# ---- search highlighting -----------------------------------------------------------
# The filters return plain text pieces; the template wraps the matched ones in <mark>
# with autoescaping on, so no text a user or a file wrote is ever marked safe.


def _terms_pattern(query: str) -> re.Pattern[str] | None:
    terms = sorted({term for term in (query or "").split()[:MAX_SEARCH_TERMS] if term}, key=len, reverse=True)
    if not terms:
        return None
    return re.compile("|".join(re.escape(term) for term in terms), re.IGNORECASE)


@register.filter
def highlight_parts(text: object, query: str) -> list[tuple[str, bool]]:
    """`{% for piece, hit in text|highlight_parts:query %}`: the text in pieces, hit=True where a term matched."""
    text = "" if text is None else str(text)
    pattern = _terms_pattern(query)
    if pattern is None or not text:
        return [(text, False)]
    pieces: list[tuple[str, bool]] = []
    last = 0
    for match in pattern.finditer(text):
        if match.start() > last:
            pieces.append((text[last : match.start()], False))
        pieces.append((match.group(0), True))
        last = match.end()
    if last < len(text):
        pieces.append((text[last:], False))
    return pieces


@register.simple_tag
def snippet(text: object, width: int, query: str = "") -> str:
    """`{% snippet case.question 600 query as text %}`: at most `width` characters, taken
    around the first search match when the match would otherwise be cut off (so the card
    shows why it matched). Plain text: the template escapes it."""
    text = "" if text is None else str(text)
    if len(text) <= width:
        return text
    pattern = _terms_pattern(query)
    match = pattern.search(text) if pattern else None
    if match is None or match.end() <= width - 1:
        return text[: width - 1].rstrip() + "…"
    start = max(0, match.start() - width // 3)
    end = min(len(text), start + width - 2)
    return ("…" if start else "") + text[start:end].strip() + ("…" if end < len(text) else "")


@register.filter
def matches(text: object, query: str) -> bool:
    pattern = _terms_pattern(query)
    return bool(pattern and text and pattern.search(str(text)))


@register.inclusion_tag("datasets/partials/file_drop.html")
def file_drop(
    field: BoundField,
    accept: str,
    formats: str,
    *,
    field_id: str = "",
    label: str = "",
    show_help: bool = True,
    compact: bool = False,
    mark_required: bool = True,
    preserve: bool = False,
    show_errors: bool = True,
) -> dict[str, object]:
    """`{% file_drop form.file accept=".csv,.json" formats="CSV or EvalSet JSON" %}`: the one
    upload control of the console (datasets/partials/file_drop.html, static/js/file_drop.js).

    `preserve` keeps the chosen file when htmx swaps the form after an error elsewhere
    (hx-preserve), `show_errors=False` when the form lists the file's errors itself."""
    max_bytes = settings.UPLOAD_MAX_BYTES
    return {
        "field": field,
        "input_id": field_id or field.auto_id,
        "label": label or field.label,
        "show_help": show_help and bool(field.help_text),
        "accept": accept,
        "formats": formats,
        "compact": compact,
        "mark_required": mark_required and field.field.required,
        "preserve": preserve,
        "show_errors": show_errors,
        "max_bytes": max_bytes,
        "max_mb": f"{max_bytes / 1_000_000:g}",
    }


@register.simple_tag
def model_missing(purpose: str, override: str = "") -> bool:
    """`{% model_missing "judge" dataset.judge_model as no_judge %}`: no model would serve
    this purpose at run time (the override, e.g. a dataset's judge model, counts)."""
    return llm.model_for(purpose, override or None) is None

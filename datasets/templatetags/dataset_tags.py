from django import template
from django.conf import settings
from django.forms import BoundField

from datasets.selectors import url_or_empty
from evalsite import llm

register = template.Library()


@register.simple_tag
def url_if_exists(name: str, *args: object, **kwargs: object) -> str:
    """`{% url_if_exists "datasets:new" agent.pk as new_url %}`: the URL, or "" when the
    route is not there yet (features that land in later releases)."""
    return url_or_empty(name, *args, **kwargs)


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

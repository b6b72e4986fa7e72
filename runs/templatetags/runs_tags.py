import json
import uuid
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any
from urllib.parse import urlencode

from django import template
from django.conf import settings
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils import timezone

register = template.Library()


@register.simple_tag
def run_request_key() -> str:
    """A one-time key for a form that starts a run (Run, Re-run, Verify): a double click or a
    replayed POST starts one run, not two."""
    return uuid.uuid4().hex


# An integer no row has as its primary key: the slot `card_url` reverses a URL with, then fills.
_SLOT = 2_147_483_647


def card_url(name: str, *args: int) -> str:
    """reverse(name, args=args) for the URLs a page repeats once per card, whose last argument
    (a result's or a case's pk) is the only one that varies: reversed once per
    (name, leading arguments) and filled in after, so 100 cards cost one reverse() per URL name,
    not 100. The arguments are the integers of an <int:...> pattern."""
    head, tail = _card_url_parts(name, tuple(args[:-1]), get_script_prefix(), get_urlconf(), settings.ROOT_URLCONF)
    return f"{head}{int(args[-1])}{tail}"


@lru_cache(maxsize=512)
def _card_url_parts(name: str, leading: tuple[int, ...], prefix: str, urlconf: Any, root: str) -> tuple[str, str]:
    head, _slot, tail = reverse(name, args=[*leading, _SLOT], urlconf=urlconf).partition(str(_SLOT))
    return head, tail


@register.simple_tag
def card_link(name: str, *args: int) -> str:
    """{% card_link "runs:detail" agent.pk run.pk %}: `card_url` in a template (the same URL as {% url %})."""
    return card_url(name, *args)


@register.filter
def seconds(value: float | None) -> str:
    """A duration in seconds, the way people read it: "0.4 s", "42 s", "3 min 5 s", "1 h 2 min"."""
    if value is None:
        return "–"
    value = float(value)
    if value < 10:
        return f"{value:.1f} s"
    if value < 60:
        return f"{value:.0f} s"
    minutes, secs = divmod(int(round(value)), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


@register.filter
def millis(value: int | None) -> str:
    if value is None:
        return "–"
    return f"{value} ms" if value < 1000 else seconds(value / 1000)


@register.filter
def percent(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{100 * float(value):.{int(digits)}f}%"


@register.filter
def score(value: float | None) -> str:
    """A 0-10 score with at most one decimal: 7, 6.7."""
    if value is None:
        return "–"
    return f"{float(value):.1f}".removesuffix(".0")


@register.filter
def money(value: Any) -> str:
    value = float(value or 0)
    if value == 0:
        return "$0"
    return f"${value:.4f}" if value < 1 else f"${value:,.2f}"


@register.filter
def compact_json(value: Any) -> str:
    """Tool arguments on one line, without the outer braces: plan="enterprise", seats=25."""
    if isinstance(value, dict):
        return ", ".join(f"{key}={json.dumps(item, ensure_ascii=False, default=str)}" for key, item in value.items())
    return json.dumps(value, ensure_ascii=False, default=str)


@register.filter
def since(value: datetime | None, now: datetime | None = None) -> str:
    """ "just now", "5 min ago", "3 h ago", "Mar 4" (older than a day)."""
    if value is None:
        return ""
    now = now or timezone.now()
    delta = now - value
    if delta < timedelta(minutes=1):
        return "just now"
    if delta < timedelta(hours=1):
        return f"{int(delta.total_seconds() // 60)} min ago"
    if delta < timedelta(days=1):
        return f"{int(delta.total_seconds() // 3600)} h ago"
    return timezone.localtime(value).strftime("%b %-d")


@register.simple_tag
def query(**params: Any) -> str:
    """A query string of the non-empty parameters: {% query filter="failed" sort=view.sort %}."""
    kept = {name: value for name, value in params.items() if value not in (None, "", "all", "position", 0)}
    return "?" + urlencode(kept) if kept else ""


@register.filter
def scorer_value(row: dict[str, Any]) -> str:
    """A scorer row's figure: similarity as a percentage, pass/fail checks as words."""
    value = row.get("score")
    if value is None:
        return "" if row.get("passed") is not None else "not computed"
    return f"{100 * float(value):.0f}%"


@register.filter
def run_duration(run: Any, now: datetime | None = None) -> str:
    """How long the run took, or has been going."""
    from runs.selectors import run_duration_seconds

    if run.started_at is None and run.is_active:
        return "not started"
    return seconds(run_duration_seconds(run, now=now or timezone.now()))


@register.filter
def isodate(value: str | None) -> datetime | None:
    """An ISO 8601 text stored in JSON (a preflight's ran_at) as a datetime, for |date and |ago."""
    from django.utils.dateparse import parse_datetime

    return parse_datetime(value) if value else None

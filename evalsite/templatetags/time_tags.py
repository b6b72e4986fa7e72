"""Relative times the way people say them."""

from datetime import datetime, timedelta

from django import template
from django.utils import timezone
from django.utils.timesince import timesince

register = template.Library()


@register.filter
def ago(value: datetime | None) -> str:
    """`{{ run.created_at|ago }}`: "just now" under a minute, else "5 minutes ago".

    Django's timesince says "0 minutes" for anything under a minute; a time a little in
    the future (clock skew between machines) is "just now" too.
    """
    if not value:
        return ""
    if timezone.now() - value < timedelta(minutes=1):
        return "just now"
    return f"{timesince(value)} ago"

import json
from typing import Any

from django import template

register = template.Library()


@register.filter
def pretty_json(value: Any) -> str:
    """A request body as the agent received it, indented for reading."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)

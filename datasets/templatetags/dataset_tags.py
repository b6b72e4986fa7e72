from django import template

from datasets.selectors import url_or_empty

register = template.Library()


@register.simple_tag
def url_if_exists(name: str, *args: object, **kwargs: object) -> str:
    """`{% url_if_exists "datasets:new" agent.pk as new_url %}`: the URL, or "" when the
    route is not there yet (features that land in later releases)."""
    return url_or_empty(name, *args, **kwargs)

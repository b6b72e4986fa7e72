from django import template

from agents.models import Agent
from runs.models import Run
from suggestions.selectors import SuggestionPanel, suggestion_panel_get

register = template.Library()


@register.simple_tag
def suggestion_panel(agent: Agent, run: Run) -> SuggestionPanel:
    """`{% suggestion_panel agent run as panel %}`: lets the run page include the panel with
    nothing more than its agent and run in the context."""
    return suggestion_panel_get(agent=agent, run=run)

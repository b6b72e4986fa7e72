"""Finding an agent from a command line (`evalrun`, `dataset_import`): by id or exact name."""

from django.core.management.base import CommandError

from agents.models import Agent


def agent_from_argument(value: str) -> Agent:
    """The agent with this id, or the one agent with this exact name; exit code 2 otherwise."""
    agents = Agent.objects.filter(pk=int(value)) if value.isdigit() else Agent.objects.filter(name=value)
    found = list(agents.select_related("team")[:5])
    if not found:
        raise CommandError(f"No agent “{value}”. Give its id or exact name.", returncode=2)
    if len(found) > 1:
        listed = ", ".join(f"{agent.pk} ({agent.team.name})" for agent in found)
        raise CommandError(f"Several agents are called “{value}”: use the id, one of {listed}.", returncode=2)
    return found[0]

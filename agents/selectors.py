from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Count, Q, QuerySet
from django.shortcuts import get_object_or_404

from accounts.models import Team
from agents.models import Agent, AgentVersion


def agent_list(*, user: User | AnonymousUser) -> QuerySet[Agent]:
    """Agents of every team the user belongs to (none for an anonymous user: outsiders see nothing)."""
    if isinstance(user, AnonymousUser):
        return Agent.objects.none()
    return Agent.objects.filter(team__memberships__user=user).select_related("current_version", "team")


def agent_get_for_user(*, user: User | AnonymousUser, agent_id: int) -> Agent:
    """The agent, or 404 when it does not exist or belongs to a team the user is not in."""
    return get_object_or_404(agent_list(user=user), pk=agent_id)


def agent_list_for_team(*, team: Team, query: str = "") -> QuerySet[Agent]:
    """The team's agents for the list page, with their dataset and run counts."""
    agents = (
        Agent.objects.filter(team=team)
        .select_related("current_version")
        # distinct: the two joins multiply each other's rows.
        .annotate(dataset_count=Count("datasets", distinct=True), run_count=Count("runs", distinct=True))
        .order_by("-updated_at", "name")
    )
    if query:
        agents = agents.filter(Q(name__icontains=query) | Q(description__icontains=query))
    return agents


def agent_version_list(*, agent: Agent) -> QuerySet[AgentVersion]:
    return agent.versions.select_related("created_by", "rolled_back_from").order_by("-number")


def agent_version_get(*, agent: Agent, version_id: int) -> AgentVersion:
    """A version of this agent (404 for another agent's version, even in the same team)."""
    return get_object_or_404(agent_version_list(agent=agent), pk=version_id)


def agent_eval_summary(*, agent: Agent) -> dict[str, Any]:
    """Counts and the latest run, for the Evals call to action on the agent page."""
    return {
        "dataset_count": agent.datasets.count(),
        "case_count": agent.datasets.aggregate(n=Count("cases"))["n"] or 0,
        "run_count": agent.runs.count(),
        "last_run": agent.runs.select_related("agent_version").order_by("-created_at", "-id").first(),
    }


def agent_run_blocker(*, agent: Agent) -> str:
    """Why no run of this agent can start (an llm agent without a model, an http agent
    without a URL...), or "" when it can. The adapter's own check, so the dataset page's
    Run button, the API and run_start agree with what would fail the run on its first case."""
    version = agent.current_version
    if version is None:
        return "This agent has no configuration version yet."
    version.agent = agent  # the adapter reads the kind from it: not a second query for the agent
    return version_run_blocker(version=version)


def version_run_blocker(*, version: AgentVersion) -> str:
    from agents.adapters import AgentConfigError, adapter_for

    try:
        adapter_for(version).check()
    except AgentConfigError as error:
        return error.message
    return ""

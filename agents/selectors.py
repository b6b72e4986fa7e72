from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from agents.models import Agent


def agent_list(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Agent]:
    """Agents of every team the user belongs to."""
    return Agent.objects.filter(team__memberships__user=user).select_related("current_version", "team")


def agent_get_for_user(*, user: AbstractBaseUser | AnonymousUser, agent_id: int) -> Agent:
    """The agent, or 404 when it does not exist or belongs to a team the user is not in."""
    return get_object_or_404(agent_list(user=user), pk=agent_id)

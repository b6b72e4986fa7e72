"""Agent-delete hooks: how the apps above agents take part in deleting an agent.

Datasets and runs hang on an agent, and deleting it must refuse while a run is going or a
dataset is being extracted (their workers would fail half-way on missing rows), delete the
runs first (they protect the versions they pinned) and remove the documents' files once
the rows are gone. agents/ may not import those apps (docs/architecture.md, "Apps and
dependencies"), so each registers a hook here from its `AppConfig.ready()`, the way the
run-finished hook of runs/hooks.py works.

The contract for a hook: `agent_delete` calls it with the agent's row locked, inside the
deletion's transaction, before anything is deleted. It raises ValidationError (a message
for the user) to refuse: the transaction rolls back whatever earlier hooks did. Otherwise
it deletes what would block the deletion and queues file clean-up with on_commit.
"""

from __future__ import annotations

from collections.abc import Callable

from agents.models import Agent

AgentDeleteHook = Callable[[Agent], None]

_before_delete: list[AgentDeleteHook] = []


def register_before_agent_delete(hook: AgentDeleteHook) -> None:
    """Call `hook(agent)` before every agent deletion. Registering the same hook twice adds it once."""
    if hook not in _before_delete:
        _before_delete.append(hook)


def before_agent_delete_notify(agent: Agent) -> None:
    """Call every registered hook, in registration order; a ValidationError refuses the deletion."""
    for hook in list(_before_delete):
        hook(agent)

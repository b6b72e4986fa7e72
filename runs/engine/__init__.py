"""The execution engine: claiming a case, the run's window and its lanes, asking the agent (and
the simulated user), the cost cap, saving, the reaper and stalls (docs/architecture.md, "The run window")."""

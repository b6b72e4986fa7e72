"""Judging and scoring: the judge's configurations, asking it and checking its answers, the
scorers, re-asks near the line, scenario judging, the preflight calibration set, and what a
run's figures leave out (docs/architecture.md, "Apps and dependencies")."""

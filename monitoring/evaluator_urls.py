"""The online evaluators' pages of one agent, under /agents/<agent_id>/monitoring/evaluators/
(included in monitoring/urls.py, namespace "monitoring")."""

from django.urls import path  # noqa: F401

urlpatterns: list = []

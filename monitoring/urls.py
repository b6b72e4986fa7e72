"""The monitoring pages of one agent, under /agents/<agent_id>/monitoring/."""

from django.urls import path  # noqa: F401

app_name = "monitoring"

urlpatterns: list = []

"""The monitoring pages of one agent, under /agents/<agent_id>/monitoring/: the monitoring page,
traces and learning cases here; online evaluators in monitoring/evaluator_urls.py."""

from django.urls import path  # noqa: F401

from monitoring import evaluator_urls

app_name = "monitoring"

urlpatterns: list = [
    *evaluator_urls.urlpatterns,
]

"""The monitoring pages of one agent, under /agents/<agent_id>/monitoring/: the monitoring page,
traces and learning cases here; online evaluators in monitoring/evaluator_urls.py."""

from django.urls import path

from monitoring import evaluator_urls, views

app_name = "monitoring"

urlpatterns: list = [
    path("", views.monitoring_page, name="page"),
    path("traces/", views.trace_list, name="traces"),
    path("traces/<int:trace_id>/", views.trace_detail, name="trace"),
    path("traces/<int:trace_id>/learning-case/", views.learning_case_create, name="learning_case_create"),
    path("learning/", views.learning_queue, name="learning"),
    path("learning/<int:learning_case_id>/", views.learning_case_detail, name="learning_case"),
    path("learning/<int:learning_case_id>/approve/", views.learning_case_approve, name="learning_case_approve"),
    path("learning/<int:learning_case_id>/reject/", views.learning_case_reject, name="learning_case_reject"),
    *evaluator_urls.urlpatterns,
]

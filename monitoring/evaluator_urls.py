"""The online evaluators' pages of one agent, under /agents/<agent_id>/monitoring/evaluators/
(included in monitoring/urls.py, namespace "monitoring")."""

from django.urls import path

from monitoring import evaluator_views as views

urlpatterns: list = [
    path("evaluators/", views.evaluator_list, name="evaluators"),
    path("evaluators/new/", views.evaluator_new, name="evaluator_new"),
    path("evaluators/create/", views.evaluator_create, name="evaluator_create"),
    path("evaluators/<int:evaluator_id>/", views.evaluator_detail, name="evaluator"),
    path("evaluators/<int:evaluator_id>/update/", views.evaluator_update, name="evaluator_update"),
    path("evaluators/<int:evaluator_id>/enable/", views.evaluator_enable, name="evaluator_enable"),
    path("evaluators/<int:evaluator_id>/delete/", views.evaluator_delete, name="evaluator_delete"),
]

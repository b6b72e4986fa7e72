from django.urls import path

from suggestions import preview_views, views

# Mounted at /agents/<agent_id>/runs/<run_id>/suggestions/ (evalsite/urls.py).
app_name = "suggestions"
urlpatterns = [
    path("", views.panel, name="panel"),
    path("generate/", views.generate, name="generate"),
    path("apply/", views.apply, name="apply"),
    path("apply/jobs/<int:job_id>/", views.apply_job, name="apply_job"),
    path("apply/jobs/<int:job_id>/action/", views.apply_job_action, name="apply_job_action"),
    path("apply/confirm/", views.apply_confirm, name="apply_confirm"),
    path("apply/diff/", views.apply_diff, name="apply_diff"),
    path("apply/preview/", preview_views.apply_preview, name="apply_preview"),
    path("apply/preview/<int:preview_id>/", preview_views.apply_preview_job, name="apply_preview_job"),
    path("change-request/", views.change_request, name="change_request"),
    path("verify/", views.verify, name="verify"),
]

from django.urls import path

from runs import preflight_views

app_name = "judge_preflight"
urlpatterns = [
    path("", preflight_views.judge_preflight_panel, name="panel"),
    path("start/", preflight_views.judge_preflight_start, name="start"),
]

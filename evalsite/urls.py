from django.contrib import admin
from django.shortcuts import redirect
from django.urls import include, path
from django.views.decorators.http import require_GET

from evalsite.api import api
from evalsite.health import healthz

urlpatterns = [
    # GET only, as every page that changes nothing (tests/test_api_parity.py).
    path("", require_GET(lambda request: redirect("agents:list")), name="home"),
    path("accounts/", include("accounts.urls")),
    path("accounts/settings/judge-preflight/", include("runs.preflight_urls")),
    path("accounts/settings/monitoring/", include("monitoring.settings_urls")),
    path("agents/", include("agents.urls")),
    path("agents/<int:agent_id>/datasets/", include("datasets.urls")),
    path("agents/<int:agent_id>/datasets/<int:dataset_id>/coverage/", include("runs.coverage_urls")),
    path("agents/<int:agent_id>/runs/", include("runs.urls")),
    path("agents/<int:agent_id>/runs/<int:run_id>/suggestions/", include("suggestions.urls")),
    path("agents/<int:agent_id>/playground/", include("playground.urls")),
    path("agents/<int:agent_id>/", include("reviews.urls")),
    path("agents/<int:agent_id>/monitoring/", include("monitoring.urls")),
    path("v1/", include("monitoring.ingest_urls")),
    path("healthz", healthz, name="healthz"),
    path("api/", api.urls),
    path("admin/", admin.site.urls),
]

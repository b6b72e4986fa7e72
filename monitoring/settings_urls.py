"""The team's monitoring settings, under /accounts/settings/monitoring/: ingestion keys, service
mappings, retention."""

from django.urls import path  # noqa: F401

app_name = "monitoring_settings"

urlpatterns: list = []

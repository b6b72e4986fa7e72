"""OTLP/HTTP ingestion at the path OpenTelemetry exporters use by default: /v1/traces."""

from django.urls import path

from monitoring.ingest import views

app_name = "ingest"

urlpatterns = [
    path("traces", views.traces_export, name="traces"),
]

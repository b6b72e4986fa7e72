"""OTLP/HTTP ingestion at the path OpenTelemetry exporters use by default: /v1/traces."""

from django.urls import path  # noqa: F401

app_name = "ingest"

urlpatterns: list = []

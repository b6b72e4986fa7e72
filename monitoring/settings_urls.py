"""The team's monitoring settings, under /accounts/settings/monitoring/: ingestion keys, service
mappings, retention, each agent's masking."""

from django.urls import path

from monitoring import settings_views as views

app_name = "monitoring_settings"

urlpatterns = [
    path("", views.settings_page, name="page"),
    path("keys/", views.key_create, name="key_create"),
    path("keys/<int:key_id>/revoke/", views.key_revoke, name="key_revoke"),
    path("services/", views.mapping_create, name="mapping_create"),
    path("services/<int:mapping_id>/delete/", views.mapping_delete, name="mapping_delete"),
    path("retention/", views.retention_update, name="retention_update"),
    path("agents/<int:agent_id>/masking/", views.masking_update, name="masking_update"),
]

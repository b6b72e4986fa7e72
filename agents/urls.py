from django.urls import path

from agents import views

app_name = "agents"
urlpatterns = [
    path("", views.agent_list, name="list"),
    path("new/", views.agent_create, name="create"),
    path("<int:agent_id>/", views.agent_detail, name="detail"),
    path("<int:agent_id>/edit/", views.agent_edit, name="edit"),
    path("<int:agent_id>/delete/", views.agent_delete, name="delete"),
    path("<int:agent_id>/versions/", views.agent_versions, name="versions"),
    path("<int:agent_id>/versions/<int:version_id>/", views.version_detail, name="version_detail"),
    path("<int:agent_id>/versions/<int:version_id>/rollback/", views.version_rollback, name="version_rollback"),
]

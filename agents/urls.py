from django.urls import path

from agents import views

app_name = "agents"
urlpatterns = [
    path("", views.agent_list, name="list"),
    path("<int:agent_id>/", views.agent_detail, name="detail"),
    path("<int:agent_id>/versions/", views.agent_versions, name="versions"),
]

from django.urls import path

from accounts import views

app_name = "accounts"
urlpatterns = [
    path("login/", views.login, name="login"),
    path("logout/", views.logout, name="logout"),
    path("settings/", views.settings_page, name="settings"),
    path("switch-team/", views.switch_team, name="switch_team"),
]

from django.urls import path

from accounts import views

app_name = "accounts"
urlpatterns = [
    path("login/", views.login, name="login"),
    path("logout/", views.logout, name="logout"),
    path("settings/", views.settings_page, name="settings"),
    path("settings/model-test/", views.model_test, name="model_test"),
    path("settings/model-test/status/", views.model_test_status, name="model_test_status"),
    path("switch-team/", views.switch_team, name="switch_team"),
    path("teams/new/", views.team_create, name="team_create"),
    path("team/", views.team_update, name="team_update"),
    path("team/budgets/", views.team_budgets, name="team_budgets"),
    path("team/members/", views.member_add, name="member_add"),
    path("team/members/<int:membership_id>/role/", views.member_role, name="member_role"),
    path("team/members/<int:membership_id>/remove/", views.member_remove, name="member_remove"),
    path("tokens/", views.token_create, name="token_create"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke, name="token_revoke"),
    path("banners/dismiss/", views.banner_dismiss, name="banner_dismiss"),
]

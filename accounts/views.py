# Temporary: replaced by the accounts pages.
from django.contrib.auth import views as auth_views
from django.http import HttpResponse

login = auth_views.LoginView.as_view(template_name="accounts/login.html")
logout = auth_views.LogoutView.as_view()


def settings_page(request):
    return HttpResponse("settings")


def switch_team(request):
    return HttpResponse("switch")

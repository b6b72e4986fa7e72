from django.urls import path

from playground import views

app_name = "playground"
urlpatterns = [
    path("", views.playground, name="page"),
    path("send/", views.send, name="send"),
    path("exchanges/<int:exchange_id>/", views.exchange_poll, name="exchange"),
    path("exchanges/<int:exchange_id>/save-case/", views.save_case, name="save_case"),
    path("documents/<str:signed>/", views.document_signed, name="document_signed"),
]

from django.urls import path

from datasets import views

app_name = "datasets"
urlpatterns = [
    path("", views.dataset_list, name="list"),
]

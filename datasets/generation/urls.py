"""Routes of datasets/generation/views.py, included by datasets/urls.py in the "datasets" namespace."""

from django.urls import path

from datasets.generation import views

urlpatterns = [
    path("", views.dataset_generate, name="generate"),
]

from django.urls import path

from runs import coverage_views

app_name = "coverage"
urlpatterns = [
    path("", coverage_views.coverage_page, name="page"),
    path("map/", coverage_views.coverage_map, name="map"),
    path("map/adopt/", coverage_views.coverage_adopt, name="adopt"),
    path("generate/", coverage_views.coverage_generate, name="generate"),
]

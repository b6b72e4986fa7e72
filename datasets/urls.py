from django.urls import include, path

from datasets import transfer_views, upload_urls, views

app_name = "datasets"
urlpatterns = [
    path("", views.dataset_list, name="list"),
    path("rows/", views.dataset_list_rows, name="list_rows"),
    path("create/", views.dataset_create, name="create"),
    path("<int:dataset_id>/", views.dataset_detail, name="detail"),
    path("<int:dataset_id>/row/", views.dataset_row, name="row"),
    path("<int:dataset_id>/rename/", views.dataset_rename, name="rename"),
    path("<int:dataset_id>/delete/", views.dataset_delete, name="delete"),
    path("<int:dataset_id>/settings/", views.dataset_settings, name="settings"),
    path("<int:dataset_id>/cases/", views.case_search, name="case_search"),
    path("<int:dataset_id>/cases/new/", views.case_create, name="case_create"),
    path("<int:dataset_id>/cases/<int:case_pk>/edit/", views.case_edit, name="case_edit"),
    path("<int:dataset_id>/cases/<int:case_pk>/delete/", views.case_delete, name="case_delete"),
    path("<int:dataset_id>/cases/<int:case_pk>/move/", views.case_move, name="case_move"),
    path("<int:dataset_id>/import/csv/", transfer_views.import_csv, name="import_csv"),
    path("<int:dataset_id>/import/json/", transfer_views.import_json, name="import_json"),
    path("<int:dataset_id>/export/csv/", transfer_views.export_csv, name="export_csv"),
    path("<int:dataset_id>/export/json/", transfer_views.export_json, name="export_json"),
    path("generate/", include("datasets.generation.urls")),  # Generate with AI (datasets/generation/views.py)
]
# Upload, extraction status and document preview/download (the extraction issue's module).
urlpatterns += upload_urls.urlpatterns

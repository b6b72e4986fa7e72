from django.urls import path

from runs import views

app_name = "runs"
urlpatterns = [
    path("", views.run_list, name="list"),
    path("poll/", views.run_list_poll, name="list_poll"),
    path("compare/", views.run_compare, name="compare"),
    path("start/<int:dataset_id>/", views.run_start, name="start"),
    path("<int:run_id>/", views.run_detail, name="detail"),
    path("<int:run_id>/results/", views.run_results, name="results"),
    path("<int:run_id>/stop/", views.run_stop, name="stop"),
    path("<int:run_id>/rerun/", views.run_rerun, name="rerun"),
    path("<int:run_id>/rescore/", views.run_rescore, name="rescore"),
    path("<int:run_id>/export/json/", views.export_json, name="export_json"),
    path("<int:run_id>/export/csv/", views.export_csv, name="export_csv"),
    path("<int:run_id>/export/xlsx/", views.export_xlsx, name="export_xlsx"),
    path("<int:run_id>/export/html/", views.export_html, name="export_html"),
    path("documents/<str:token>/", views.document_signed, name="document_signed"),
]

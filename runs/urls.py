from django.urls import path

from runs import export_views, views

app_name = "runs"
urlpatterns = [
    path("", views.run_list, name="list"),
    path("poll/", views.run_list_poll, name="list_poll"),
    path("compare/", views.run_compare, name="compare"),
    path("history/", views.run_history, name="history"),
    path("start/<int:dataset_id>/", views.run_start, name="start"),
    path("start/<int:dataset_id>/dialog/", views.run_start_dialog, name="start_dialog"),
    path("start/<int:dataset_id>/preflight/", views.run_start_preflight, name="start_preflight"),
    path("<int:run_id>/", views.run_detail, name="detail"),
    path("<int:run_id>/results/", views.run_results, name="results"),
    path("<int:run_id>/tools/", views.run_tools, name="tools"),
    path("<int:run_id>/charts/", views.run_charts, name="charts"),
    path("<int:run_id>/stop/", views.run_stop, name="stop"),
    path("<int:run_id>/rerun/", views.run_rerun, name="rerun"),
    path("<int:run_id>/baseline/", views.run_baseline, name="baseline"),
    path("<int:run_id>/rescore/", views.run_rescore, name="rescore"),
    path("<int:run_id>/export/json/", export_views.export_json, name="export_json"),
    path("<int:run_id>/export/csv/", export_views.export_csv, name="export_csv"),
    path("<int:run_id>/export/xlsx/", export_views.export_xlsx, name="export_xlsx"),
    path("<int:run_id>/export/html/", export_views.export_html, name="export_html"),
    path("documents/<str:token>/", export_views.document_signed, name="document_signed"),
]

from django.urls import path

from reviews import views

app_name = "reviews"
urlpatterns = [
    path("review/", views.agent_queue, name="agent_queue"),
    path("review/agreement/", views.agreement, name="agreement"),
    path("review/panel/", views.agent_panel, name="agent_panel"),
    path("runs/<int:run_id>/review/", views.run_queue, name="run_queue"),
    path("runs/<int:run_id>/review/figures/", views.run_figures, name="run_figures"),
    path("runs/<int:run_id>/results/<int:result_id>/review/", views.review, name="review"),
    path("runs/<int:run_id>/results/<int:result_id>/case/", views.case_correct, name="case_correct"),
]

app_name = "suggestions"
urlpatterns: list = []

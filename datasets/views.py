# Temporary: replaced by the dataset pages.
from django.http import HttpResponse


def dataset_list(request, agent_id):
    return HttpResponse("datasets")

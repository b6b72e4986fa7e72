# Temporary: replaced by the run pages.
from django.http import HttpResponse


def run_list(request, agent_id):
    return HttpResponse("runs")

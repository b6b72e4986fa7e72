# Temporary: replaced by the agent pages.
from django.http import HttpResponse


def agent_list(request):
    return HttpResponse("agents")


def agent_detail(request, agent_id):
    return HttpResponse("agent")


def agent_versions(request, agent_id):
    return HttpResponse("versions")

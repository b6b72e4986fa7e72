"""The permission matrix: every page and endpoint of the console, from the URL conf.

For every URL pattern (admin and the JSON API excepted):
- an anonymous visitor is sent to the login page,
- a method no view accepts (PUT) gets 405, so every view declares its methods,
- an outsider (charlie, another team) gets 404 for every object in the URL,
- a teammate gets 404 when the objects in the URL do not belong together
  (another agent's dataset, version, run...).

Routes are read from django.urls.get_resolver(), so views added later are covered
without touching this file, as long as their URL parameters are known below. A new
parameter name fails the matrix until it is added to `url_objects` -- on purpose.
"""

from dataclasses import dataclass

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from accounts import services as account_services
from accounts.models import ApiToken
from datasets.models import Document
from monitoring import services as monitoring_services
from monitoring.models import LearningCase, OnlineEvaluator
from playground.models import Exchange
from runs.models import Result, Run, RunCase
from suggestions.models import PreviewJob, RewriteJob, Suggestion
from tests.factories import AgentFactory, DatasetFactory, TestCaseFactory
from tests.monitoring.factories import TraceFactory

EXCLUDED_NAMESPACES = {"admin", "api"}  # Django admin; the API has its own token tests below
# Routes that are meant to be reachable without a session, and why.
PUBLIC = {
    "home": "redirects to the agents list, which itself requires login",
    "accounts:login": "the sign-in page",
    "runs:document_signed": "an HTTP agent fetches case documents with a signed, expiring link instead of a session",
    "healthz": "load balancers and container health checks ask it; it says only up or down",
    "playground:document_signed": "an HTTP agent fetches a playground attachment with a signed, expiring link",
    "ingest:traces": "an app's OpenTelemetry exporter sends spans with a team's ingestion key, not a session",
}
# Parameters that name the agent's own objects: swapping the agent for another one of
# the same team must turn them into a 404.
AGENT_SCOPED = {
    "version_id",
    "dataset_id",
    "case_id",
    "case_pk",
    "document_id",
    "run_id",
    "run_case_id",
    "result_id",
    "suggestion_id",
    "exchange_id",
    "job_id",
    "preview_id",
    "trace_id",
    "learning_case_id",
    "evaluator_id",
}


@dataclass(frozen=True)
class Route:
    name: str
    namespace: str
    route: str
    params: tuple[str, ...]

    def __str__(self) -> str:
        return self.name


def _params(pattern) -> list[str]:  # type: ignore[no-untyped-def]
    converters = getattr(pattern.pattern, "converters", None)
    if converters is not None:
        return list(converters)
    return list(pattern.pattern.regex.groupindex)


def _walk(patterns, prefix: str = "", namespace: str = "", params: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    for pattern in patterns:
        here = params + tuple(_params(pattern))
        if isinstance(pattern, URLResolver):
            inner = ":".join(part for part in (namespace, pattern.namespace or "") if part)
            yield from _walk(pattern.url_patterns, prefix + str(pattern.pattern), inner, here)
        elif isinstance(pattern, URLPattern):
            name = ":".join(part for part in (namespace, pattern.name) if part) if pattern.name else ""
            route = prefix + str(pattern.pattern)
            yield Route(name or f"<unnamed {route}>", namespace, route, here)


def _routes() -> list[Route]:
    routes = []
    for route in _walk(get_resolver().url_patterns):
        if route.namespace.split(":")[0] in EXCLUDED_NAMESPACES or route.name in PUBLIC:
            continue
        routes.append(route)
    return routes


ROUTES = _routes()
OBJECT_ROUTES = [route for route in ROUTES if route.params]
NESTED_ROUTES = [route for route in ROUTES if "agent_id" in route.params and AGENT_SCOPED & set(route.params)]


@pytest.fixture
def url_objects(team, alice, bob, agent) -> dict[str, int]:
    """One object of alice's team for every URL parameter the console uses."""
    dataset = DatasetFactory(agent=agent)
    case = TestCaseFactory(dataset=dataset)
    document = Document.objects.create(
        team=team, dataset=dataset, file="documents/matrix.pdf", original_name="matrix.pdf", file_type="pdf"
    )
    run = Run.objects.create(
        agent=agent,
        agent_version=agent.current_version,
        dataset=dataset,
        dataset_name=dataset.name,
        status=Run.Status.COMPLETED,
    )
    # A second run of the dataset: the API compares a run with a baseline.
    baseline = Run.objects.create(
        agent=agent,
        agent_version=agent.current_version,
        dataset=dataset,
        dataset_name=dataset.name,
        status=Run.Status.COMPLETED,
    )
    run_case = RunCase.objects.create(run=run, position=0, source_case=case, question=case.question)
    result = Result.objects.create(run=run, case=run_case, status=Result.Status.PASS)
    suggestion = Suggestion.objects.create(
        run=run,
        title="Add the refund window",
        category="knowledge",
        description="The knowledge lacks the refund window.",
    )
    # The Apply dialog's rewrite of that suggestion, done: its page shows step 2.
    job = RewriteJob.objects.create(
        run=run,
        base_version=agent.current_version,
        suggestion_ids=[suggestion.pk],
        fields=[{"name": "instructions", "status": "done", "current": "", "text": "Answer briefly.", "error": ""}],
        status=RewriteJob.Status.DONE,
        token="matrix",
        queued_at=run.created_at,
    )
    # Apply's model preview of that rewrite, done: its poll answers the settled result.
    preview = PreviewJob.objects.create(
        run=run,
        base_version=agent.current_version,
        texts={"instructions": "Answer briefly."},
        status=PreviewJob.Status.DONE,
        queued_at=run.created_at,
    )
    token, _ = account_services.api_token_create(user=alice, name="matrix")
    exchange = Exchange.objects.create(
        agent=agent,
        version=agent.current_version,
        created_by=alice,
        message="Can I get a refund?",
        status=Exchange.Status.DONE,
        answer="Within 30 days.",
    )
    exchange.documents.add(document)
    trace = TraceFactory(agent=agent)
    learning_case = LearningCase.objects.create(
        agent=agent,
        trace=trace,
        otel_trace_id=trace.otel_trace_id,
        trace_time=trace.started_at,
        reason="picked",
        question=trace.question,
    )
    ingestion_key = monitoring_services.ingestion_key_create(team=team, user=alice, name="matrix")[0]
    mapping = monitoring_services.service_mapping_create(team=team, service_name="matrix-bot", agent=agent)
    return {
        "key_id": ingestion_key.pk,
        "mapping_id": mapping.pk,
        "trace_id": trace.pk,
        "learning_case_id": learning_case.pk,
        "evaluator_id": OnlineEvaluator.objects.create(agent=agent, name="matrix").pk,
        "team_id": team.pk,
        "agent_id": agent.pk,
        "version_id": agent.current_version_id,
        "dataset_id": dataset.pk,
        "case_id": case.pk,
        "case_pk": case.pk,
        "document_id": document.pk,
        "run_id": run.pk,
        "baseline_run_id": baseline.pk,
        "run_case_id": run_case.pk,
        "result_id": result.pk,
        "suggestion_id": suggestion.pk,
        "job_id": job.pk,
        "preview_id": preview.pk,
        "membership_id": bob.memberships.get(team=team).pk,
        "token_id": token.pk,
        "exchange_id": exchange.pk,
    }


def _url(route: Route, objects: dict[str, int], **overrides: int) -> str:
    unknown = [param for param in route.params if param not in objects]
    if unknown:
        pytest.fail(
            f"{route.name} ({route.route}) has URL parameter(s) {', '.join(unknown)} that the permission "
            f"matrix cannot fill. Add them to url_objects in tests/test_permissions.py (an object of alice's "
            f"team), or to PUBLIC with a reason if the route is meant to work without login."
        )
    if route.name.startswith("<unnamed"):
        pytest.fail(f"{route.name}: give the URL pattern a name so it can be reversed and tested.")
    return reverse(route.name, kwargs={param: {**objects, **overrides}[param] for param in route.params})


def _statuses(client: Client, url: str) -> dict[str, int]:
    return {method: client.generic(method, url).status_code for method in ("GET", "POST")}


def test_the_matrix_sees_the_console(url_objects):
    names = {route.name for route in ROUTES}
    assert {
        "agents:list",
        "agents:detail",
        "agents:versions",
        "accounts:settings",
        "datasets:list",
        "runs:list",
    } <= names
    assert not any(name.startswith(("admin:", "api:")) for name in names)


@pytest.mark.parametrize("route", ROUTES, ids=str)
def test_anonymous_visitors_are_sent_to_login(client, url_objects, route):
    url = _url(route, url_objects)
    login = reverse("accounts:login")
    redirected = 0
    for method in ("GET", "POST"):
        response = client.generic(method, url)
        if response.status_code == 405:
            continue
        assert response.status_code == 302, f"{method} {url} answered {response.status_code} to an anonymous visitor"
        assert response["Location"].startswith(login), f"{method} {url} redirected to {response['Location']}"
        redirected += 1
    assert redirected, f"{url} refused both GET and POST: which method does it serve?"


@pytest.mark.parametrize("route", ROUTES, ids=str)
def test_every_view_declares_its_methods(client_alice, url_objects, route):
    # PUT is not used by any page: a view that answers it has no require_GET/require_POST.
    response = client_alice.put(_url(route, url_objects))
    assert response.status_code == 405, f"PUT {route.name} answered {response.status_code}; declare the methods"


@pytest.mark.parametrize("route", OBJECT_ROUTES, ids=str)
def test_outsiders_get_404(client_charlie, url_objects, route):
    url = _url(route, url_objects)
    statuses = _statuses(client_charlie, url)
    assert set(statuses.values()) <= {404, 405}, f"charlie (another team) got {statuses} from {url}"
    assert 404 in statuses.values()


@pytest.mark.parametrize("route", NESTED_ROUTES, ids=str)
def test_objects_of_another_agent_are_404(client_alice, url_objects, team, route):
    """alice may see both agents, but /agents/B/<thing of agent A>/ must not resolve."""
    other_agent = AgentFactory(team=team, name="Another agent")
    url = _url(route, url_objects, agent_id=other_agent.pk)
    statuses = _statuses(client_alice, url)
    assert set(statuses.values()) <= {404, 405}, f"{url} (objects of another agent) answered {statuses}"
    assert 404 in statuses.values()


# ---- the JSON API's token authentication ------------------------------------------


API_ME = "/api/me"


def _bearer(raw: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {raw}"}


def test_a_good_token_is_accepted_and_its_use_recorded(client, alice, team):
    token, raw = account_services.api_token_create(user=alice, name="CI")

    response = client.get(API_ME, headers=_bearer(raw))

    assert response.status_code == 200
    assert response.json() == {
        "username": "alice",
        "token_name": "CI",
        "teams": [{"id": team.pk, "name": "Acme QA", "role": "owner"}],
    }
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_a_revoked_token_is_refused(client, alice):
    token, raw = account_services.api_token_create(user=alice, name="CI")
    account_services.api_token_revoke(token=token)

    assert client.get(API_ME, headers=_bearer(raw)).status_code == 401


@pytest.mark.parametrize("header", ["Bearer evs_not-a-real-token", "Bearer something-else", "Basic YWxpY2U6eA==", ""])
def test_a_wrong_or_missing_token_is_refused(client, alice, header):
    account_services.api_token_create(user=alice, name="CI")
    headers = {"Authorization": header} if header else {}

    assert client.get(API_ME, headers=headers).status_code == 401


def test_a_token_of_a_deactivated_user_is_refused(client, alice):
    _, raw = account_services.api_token_create(user=alice, name="CI")
    alice.is_active = False
    alice.save()

    assert client.get(API_ME, headers=_bearer(raw)).status_code == 401


def test_a_session_alone_does_not_open_the_api(client_alice):
    assert client_alice.get(API_ME).status_code == 401


def test_the_raw_token_is_never_stored(alice):
    token, raw = account_services.api_token_create(user=alice, name="CI")

    row = ApiToken.objects.filter(pk=token.pk).values().get()
    assert all(raw not in str(value) for value in row.values())
    assert row["token_hash"] == ApiToken.hash(raw) != raw
    assert raw[len(ApiToken.PREFIX) + 4 :] not in row["hint"]

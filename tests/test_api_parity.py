"""API parity (issue 34, item 9): every page action that changes something has an API call.

The test walks every URL pattern of the project except the API's and the admin's, and each must
be classified here:

- PAGE_ACTIONS: a page URL that changes state -> the URL name of its API operation, which must
  be a POST, PUT, PATCH or DELETE in the OpenAPI schema the API serves, behind token auth.
- READ_PAGES: a page that changes nothing; a POST to it by a signed-in team owner must be a 405,
  so a state-changing page cannot pass as a read page.
- EXEMPT: browser-session UI with no meaning for an API client, each with its reason.

A new page URL fails the test until it is classified. API URL names follow one rule: "api:" and
the page's URL name with the namespace's colon as an underscore (agents:create ->
api:agents_create), unless the operation existed before the rule (runs:start -> api:run_start).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core import signing
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from django.utils import timezone

from accounts.models import Membership
from accounts.services import api_token_create
from datasets.models import Document
from evalsite.api import api
from monitoring.models import LearningCase, OnlineEvaluator
from playground import services as playground_services
from playground.models import Exchange
from runs.engine import case as engine
from suggestions.models import PreviewJob, RewriteJob
from tests.factories import DatasetFactory, TestCaseFactory
from tests.monitoring.factories import TraceFactory
from tests.runs.review_helpers import CaseSpec, build_run

pytestmark = pytest.mark.django_db

PAGE_ACTIONS: dict[str, str] = {
    # accounts (the page acts on the session's current team; the API names the team in its path)
    "accounts:model_test": "api:accounts_model_test",
    "accounts:team_create": "api:accounts_team_create",
    "accounts:team_update": "api:accounts_team_update",
    "accounts:team_budgets": "api:accounts_team_budgets",
    "accounts:member_add": "api:accounts_member_add",
    "accounts:member_role": "api:accounts_member_role",
    "accounts:member_remove": "api:accounts_member_remove",
    "accounts:token_create": "api:accounts_token_create",
    "accounts:token_revoke": "api:accounts_token_revoke",
    # agents
    "agents:create": "api:agents_create",
    "agents:edit": "api:agents_edit",
    "agents:delete": "api:agents_delete",
    "agents:version_rollback": "api:agents_version_rollback",
    # playground
    "playground:send": "api:playground_send",
    "playground:save_case": "api:playground_save_case",
    # suggestions, runs, coverage, judge preflight, datasets, reviews
    "judge_preflight:start": "api:judge_preflight_start",
    "datasets:create": "api:dataset_create",
    "datasets:rename": "api:dataset_update",
    "datasets:delete": "api:dataset_delete",
    "datasets:settings": "api:dataset_update",
    "datasets:case_create": "api:item_create",
    "datasets:case_edit": "api:item_update",
    "datasets:case_delete": "api:item_delete",
    "datasets:case_move": "api:datasets_case_move",
    "datasets:import_csv": "api:datasets_import_csv",
    "datasets:import_json": "api:datasets_import_json",
    "datasets:generate": "api:datasets_generate",
    "datasets:upload": "api:datasets_upload",
    "datasets:mapping": "api:dataset_mapping",
    "datasets:mapping_cancel": "api:datasets_mapping_cancel",
    "datasets:warnings_dismiss": "api:datasets_warnings_dismiss",
    "datasets:case_document_attach": "api:datasets_case_document_attach",
    "datasets:case_document_detach": "api:datasets_case_document_detach",
    "coverage:map": "api:coverage_map",
    "coverage:adopt": "api:coverage_adopt",
    "coverage:generate": "api:coverage_generate",
    "runs:start": "api:run_start",
    "runs:stop": "api:run_stop",
    "runs:rerun": "api:run_rerun",
    "runs:baseline": "api:runs_baseline",
    "runs:rescore": "api:run_rescore",
    "suggestions:generate": "api:suggestions_generate",
    "suggestions:apply": "api:suggestions_apply",
    "suggestions:apply_job_action": "api:suggestions_apply_job_action",
    "suggestions:apply_confirm": "api:suggestions_apply_confirm",
    "suggestions:apply_diff": "api:suggestions_apply_diff",
    "suggestions:apply_preview": "api:suggestions_apply_preview",
    "suggestions:change_request": "api:suggestions_change_request",
    "suggestions:verify": "api:suggestions_verify",
    "reviews:review": "api:review_post",
    "reviews:case_correct": "api:reviews_case_correct",
    # monitoring ingestion (an exporter's OTLP receiver) and settings (the page acts on the
    # session's current team; the API names it)
    "ingest:traces": "api:monitoring_trace_ingest",
    "monitoring_settings:key_create": "api:monitoring_settings_key_create",
    "monitoring_settings:key_revoke": "api:monitoring_settings_key_revoke",
    "monitoring_settings:mapping_create": "api:monitoring_settings_mapping_create",
    "monitoring_settings:mapping_delete": "api:monitoring_settings_mapping_delete",
    "monitoring_settings:retention_update": "api:monitoring_settings_retention_update",
    "monitoring_settings:masking_update": "api:monitoring_settings_masking_update",
    # monitoring: learning cases made from production traces
    "monitoring:learning_case_create": "api:monitoring_learning_case_create",
    "monitoring:learning_case_approve": "api:monitoring_learning_case_approve",
    "monitoring:learning_case_reject": "api:monitoring_learning_case_reject",
    # monitoring: online evaluators
    "monitoring:evaluator_create": "api:monitoring_evaluator_create",
    "monitoring:evaluator_update": "api:monitoring_evaluator_update",
    "monitoring:evaluator_enable": "api:monitoring_evaluator_enable",
    "monitoring:evaluator_delete": "api:monitoring_evaluator_delete",
}

READ_PAGES: set[str] = {
    "home",
    "healthz",
    "accounts:settings",
    "accounts:model_test_status",
    "judge_preflight:panel",
    "monitoring_settings:page",
    "agents:list",
    "agents:detail",
    "agents:versions",
    "agents:version_detail",
    "playground:page",
    "playground:exchange",
    "playground:document_signed",
    "datasets:list",
    "datasets:list_rows",
    "datasets:detail",
    "datasets:row",
    "datasets:case_search",
    "datasets:export_csv",
    "datasets:export_json",
    "datasets:new",
    "datasets:status",
    "datasets:document_preview",
    "datasets:document_download",
    "datasets:document_view",
    "coverage:page",
    "runs:list",
    "runs:list_poll",
    "runs:compare",
    "runs:history",
    "runs:start_dialog",
    "runs:start_preflight",
    "runs:detail",
    "runs:results",
    "runs:tools",
    "runs:charts",
    "runs:export_json",
    "runs:export_csv",
    "runs:export_xlsx",
    "runs:export_html",
    "runs:document_signed",
    "suggestions:panel",
    "suggestions:apply_job",
    "suggestions:apply_preview_job",
    "reviews:agent_queue",
    "reviews:agreement",
    "reviews:agent_panel",
    "reviews:run_queue",
    "reviews:run_figures",
    "monitoring:page",
    "monitoring:traces",
    "monitoring:trace",
    "monitoring:learning",
    "monitoring:learning_case",
    "monitoring:evaluators",
    "monitoring:evaluator_new",
    "monitoring:evaluator",
}

EXEMPT: dict[str, str] = {
    "accounts:login": "Signs a browser in (a session cookie); an API client authenticates with its token.",
    "accounts:logout": "Ends a browser session; an API token is revoked instead (api:accounts_token_revoke).",
    "accounts:switch_team": "Picks the session's current team for the pages; API paths name the team or "
    "the object, so there is no current team to switch.",
    "accounts:banner_dismiss": "Hides a notice in the browser's pages for this user; the API shows no notices.",
}

STATE_CHANGING = {"POST", "PUT", "PATCH", "DELETE"}


def _page_urls(
    resolver: URLResolver | None = None, namespace: str = "", params: tuple[str, ...] = ()
) -> Iterator[tuple[str, URLPattern, tuple[str, ...]]]:
    """(namespaced name, pattern, every URL parameter of its full path) of every URL, recursively,
    leaving out the API and the admin."""
    for pattern in (resolver or get_resolver()).url_patterns:
        found = (*params, *pattern.pattern.converters)
        if isinstance(pattern, URLResolver):
            inner = ":".join(part for part in (namespace, pattern.namespace or "") if part)
            if inner.split(":")[0] in ("api", "admin"):
                continue
            yield from _page_urls(pattern, inner, found)
        else:
            yield ":".join(part for part in (namespace, pattern.name or "") if part), pattern, found


def _api_operations() -> dict[str, list[tuple[str, list[str]]]]:
    """API URL name -> [(its path in the OpenAPI schema, its methods)]."""
    found: dict[str, list[tuple[str, list[str]]]] = {}
    for prefix, router in api._routers:
        for path, path_view in router.path_operations.items():
            for operation in path_view.operations:
                name = getattr(operation, "url_name", None) or operation.view_func.__name__
                full = "/api/" + "/".join(part.strip("/") for part in (prefix, path) if part.strip("/"))
                found.setdefault(f"api:{name}", []).append((full, operation.methods))
    return found


def test_the_walk_sees_every_app_and_leaves_out_the_api_and_the_admin():
    names = {name for name, _, _ in _page_urls()}

    assert {"home", "agents:create", "playground:send", "accounts:token_create", "reviews:review"} <= names
    assert not any(name.startswith(("api:", "admin:")) for name in names)


def test_every_page_url_is_classified():
    classified = [PAGE_ACTIONS, READ_PAGES, EXEMPT]
    names = [name for name, _, _ in _page_urls()]
    unclassified = [name for name in names if not any(name in group for group in classified)]
    twice = [name for name in names if sum(name in group for group in classified) > 1]
    unnamed = [str(pattern.pattern) for _, pattern, _ in _page_urls() if not pattern.name]

    assert unclassified == [], (
        f"page URLs not classified in tests/test_api_parity.py: {unclassified}. A page that changes "
        "state needs an API operation (PAGE_ACTIONS); one that does not answers a POST with 405 (READ_PAGES)."
    )
    assert twice == [] and unnamed == []
    stale = sorted({*PAGE_ACTIONS, *READ_PAGES, *EXEMPT} - set(names))
    assert stale == [], f"classified, but no such page URL any more: {stale}"


def test_every_page_action_has_a_token_authenticated_api_operation(client, alice):
    schema = client.get("/api/openapi.json").json()
    operations = _api_operations()
    api_names = get_resolver().namespace_dict["api"][1].reverse_dict  # the names under the "api" namespace
    missing = []
    for page, api_name in PAGE_ACTIONS.items():
        assert api_name.removeprefix("api:") in api_names, f"{page}: {api_name} does not resolve"
        writes = [
            schema["paths"].get(path, {}).get(method.lower(), {})
            for path, methods in operations.get(api_name, [])
            for method in methods
            if method in STATE_CHANGING
        ]
        if not any(operation.get("security") for operation in writes):
            missing.append(f"{page} -> {api_name}")
    assert missing == [], f"page actions with no state-changing, token-authenticated API operation: {missing}"


@pytest.fixture
def real_kwargs(alice, agent, team) -> dict[str, Any]:
    """A real object for every URL parameter of the pages, all of alice's team."""
    dataset = DatasetFactory(agent=agent)
    case = TestCaseFactory(dataset=dataset)
    document = Document.objects.create(
        team=team, dataset=dataset, file="documents/notes.txt", original_name="notes.txt", file_type="txt"
    )
    run = build_run(agent=agent, dataset=dataset, cases=[CaseSpec()])
    version = agent.current_version
    exchange = Exchange.objects.create(agent=agent, version=version, created_by=alice, message="Hi")
    now = timezone.now()
    trace = TraceFactory(agent=agent)
    learning_case = LearningCase.objects.create(
        agent=agent, trace=trace, otel_trace_id=trace.otel_trace_id, trace_time=now, reason="picked", question="Q"
    )
    return {
        "agent_id": agent.pk,
        "trace_id": trace.pk,
        "learning_case_id": learning_case.pk,
        "evaluator_id": OnlineEvaluator.objects.create(agent=agent, name="parity").pk,
        "dataset_id": dataset.pk,
        "case_pk": case.pk,
        "document_id": document.pk,
        "run_id": run.pk,
        "result_id": run.results.first().pk,
        "version_id": version.pk,
        "exchange_id": exchange.pk,
        "membership_id": Membership.objects.get(user=alice).pk,
        "token_id": api_token_create(user=alice, name="ci")[0].pk,
        "job_id": RewriteJob.objects.create(run=run, base_version=version, token="t", queued_at=now).pk,
        "preview_id": PreviewJob.objects.create(run=run, base_version=version, queued_at=now).pk,
        "token": signing.dumps({"r": run.pk, "d": document.pk}, salt=engine.DOCUMENT_SALT, compress=True),
        "signed": signing.dumps(
            {"e": exchange.pk, "d": document.pk}, salt=playground_services.DOCUMENT_SALT, compress=True
        ),
    }


def test_a_read_page_refuses_a_post(client_alice, real_kwargs):
    params = {name: found for name, _, found in _page_urls()}
    accepted = []
    for name in sorted(READ_PAGES):
        kwargs = {key: real_kwargs[key] for key in params[name]}
        response = client_alice.post(reverse(name, kwargs=kwargs))
        if response.status_code != 405:
            accepted.append(f"{name}: {response.status_code}")
    assert accepted == [], f"'read' pages that accept a POST (a state-changing page needs an API): {accepted}"

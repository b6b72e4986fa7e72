"""The header values of an HTTP agent are write-only (they hold the team's API keys):
no page, fragment, download or API response may contain them.

Generated from the URL conf and the API schema, so a page added later (the run review
pages, say) is checked without touching this file. tests/agents/test_header_secrets.py
covers the agent pages and the admin by hand.

A check that a response lacks a secret passes as easily on a redirect or a 405 as on
the page itself, so every route states what it answers: GET routes their status (a
redirect is followed to the page it leads to), POST-only routes are posted with data
that makes them do their work, and the change they make is checked before their
response (and the page they lead to) is searched for the secrets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from accounts import services as account_services
from accounts.middleware import SESSION_KEY
from accounts.models import ApiToken, BannerDismissal, Membership, Team
from agents.models import Agent, AgentVersion
from datasets.models import Dataset, RuleMap, TestCase
from monitoring.models import (
    AgentMonitoring,
    IngestionKey,
    LearningCase,
    OnlineEvaluator,
    ServiceMapping,
    TeamMonitoring,
)
from playground.models import Exchange
from reviews.models import CaseEdit, Review
from runs.models import DatasetBaseline, Result, Run
from suggestions.models import PreviewJob, RewriteJob, Suggestion, SuggestionGeneration
from tests.datasets.files import pdf_bytes, upload
from tests.factories import MembershipFactory, TestCaseFactory, UserFactory
from tests.security.routes import api_operations, console_routes
from tests.test_permissions import _url

SECRET = "sk-live-SECRET-never-shown-7c1f"
SECRET_2 = "tok-SECRET-two-never-shown-99ab"
ROUTES = [route for route in console_routes() if route.name != "accounts:logout"]
API_READS = [operation for operation in api_operations() if operation.method == "GET"]

# GET routes that do not answer 200, as (plain page, htmx request). Anything else must be 200.
GET_STATUS: dict[str, tuple[int, int]] = {
    "home": (302, 302),  # on to the agents list
    "accounts:login": (302, 302),  # a signed-in user is sent on
    "datasets:list_rows": (286, 286),  # no dataset is extracting: the poll stops
    "datasets:status": (286, 286),
    "runs:list_poll": (286, 286),  # no run is active
    "datasets:row": (302, 200),  # a fragment; without htmx, the list it belongs to
    "runs:results": (302, 200),  # a fragment; without htmx, the run page's results
    "suggestions:panel": (200, 286),  # the run is finished: the panel's poll stops
    "suggestions:apply_job": (200, 286),
    "suggestions:apply_preview_job": (200, 286),  # the preview is done: its poll stops
    "accounts:model_test_status": (302, 286),  # a fragment (plain: the settings page); no test runs: stop
    "judge_preflight:panel": (200, 286),  # no judge preflight runs: the panel's poll stops
    "runs:start_preflight": (302, 286),  # a fragment (plain: the start dialog's page); no preflight runs
    # the rewrite is done: step 2, and the dialog's poll stops
    # The matrix's dataset is Ready, not waiting for its mapping: on to its page (plain or
    # htmx). The mapping page itself is tested in tests/datasets/test_mapping_*.
    "datasets:mapping": (302, 200),
    "playground:exchange": (286, 286),  # the matrix's exchange is answered: its poll stops
    # OTLP's POST only, with a team's ingestion key and never a session (tests/monitoring/test_ingest_*).
    "ingest:traces": (405, 405),
}


@pytest.fixture
def secret_objects(stored_objects):
    """The matrix's agent turned into an HTTP agent whose version (used by the run) holds secrets."""
    Agent.objects.filter(pk=stored_objects["agent_id"]).update(kind=Agent.Kind.HTTP)
    AgentVersion.objects.filter(agent_id=stored_objects["agent_id"]).update(
        http_url="https://agent.example.com/answer",
        http_headers={"Authorization": f"Bearer {SECRET}", "X-Api-Key": SECRET_2},
    )
    return stored_objects


def _content(response) -> bytes:  # type: ignore[no-untyped-def]
    return b"".join(response.streaming_content) if response.streaming else response.content


def _assert_no_secret(response, where: str) -> None:  # type: ignore[no-untyped-def]
    content = _content(response)
    for secret in (SECRET, SECRET_2):
        assert secret.encode() not in content, f"{where} shows a header value"
        assert all(secret not in value for _, value in response.items()), f"{where} sends a header value"


def _assert_landing_page_has_no_secret(client: Client, response, where: str) -> None:  # type: ignore[no-untyped-def]
    """Follow a redirect (plain or htmx) to the page the user ends up on, and check it too."""
    target = response.get("HX-Redirect") or (response["Location"] if response.status_code == 302 else None)
    if target is None:
        return
    landing = client.get(target)
    assert landing.status_code == 200, f"{where} led to {target}, which answered {landing.status_code}"
    _assert_no_secret(landing, f"{where} -> GET {target}")


# ---- POST-only routes, posted with data that makes them work --------------------------


@dataclass(frozen=True)
class Post:
    """What a POST-only route needs to do its work, and how to tell that it did."""

    data: Callable[[dict[str, Any]], dict[str, Any]]  # the form, from the objects
    status: tuple[int, int]  # (plain form, htmx request)
    done: Callable[[dict[str, Any], Client], bool]  # the change the post made
    setup: Callable[[dict[str, Any]], None] = lambda objects: None


def _second_team(objects: dict[str, Any]) -> None:
    team = Team.objects.create(name="Second team")
    MembershipFactory(team=team, user=User.objects.get(username="alice"), role="owner")
    objects["second_team_id"] = team.pk


def _dave(objects: dict[str, Any]) -> None:
    UserFactory(username="dave")


def _second_version(objects: dict[str, Any]) -> None:
    """A newer current version, so the matrix's version 1 can be rolled back to or verified."""
    agent = Agent.objects.get(pk=objects["agent_id"])
    first = AgentVersion.objects.get(pk=objects["version_id"])
    second = AgentVersion.objects.create(
        agent=agent,
        number=2,
        note="Second",
        instructions="Answer briefly.",
        http_url=first.http_url,
        http_headers=first.http_headers,
    )
    Agent.objects.filter(pk=agent.pk).update(current_version=second)
    objects["second_version_id"] = second.pk


def _running(objects: dict[str, Any]) -> None:
    Run.objects.filter(pk=objects["run_id"]).update(status=Run.Status.RUNNING)
    Result.objects.filter(pk=objects["result_id"]).update(status=Result.Status.PENDING)


def _failed(objects: dict[str, Any]) -> None:
    """The matrix's one result failed: there is something to re-run, verify and suggest."""
    Result.objects.filter(pk=objects["result_id"]).update(status=Result.Status.FAIL, score=2)
    Run.objects.filter(pk=objects["run_id"]).update(total=1, failed=1, average_score=2)


def _attached(objects: dict[str, Any]) -> None:
    TestCase.objects.get(pk=objects["case_pk"]).documents.add(objects["document_id"])


def _suggestion_form(objects: dict[str, Any]) -> dict[str, Any]:
    suggestion = Suggestion.objects.get(pk=objects["suggestion_id"])
    return {
        "s-TOTAL_FORMS": "1",
        "s-INITIAL_FORMS": "1",
        "s-0-id": str(suggestion.pk),
        "s-0-selected": "on",
        "s-0-title": suggestion.title,
        "s-0-category": suggestion.category,
        "s-0-description": suggestion.description,
    }


def _applies_to_run(objects: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"suggestions": [objects["suggestion_id"]], "base_version": objects["version_id"], **fields}


def _runs(objects: dict[str, Any]) -> int:
    return Run.objects.filter(agent_id=objects["agent_id"]).count()


def _model_test_queued() -> bool:
    from evalsite.llm.probe import model_test_running

    return model_test_running()


def _judge_preflight_queued() -> bool:
    from runs.services.preflight import judge_preflight_running

    return judge_preflight_running(dataset_id=None)


def _preflighted(objects: dict[str, Any]) -> None:
    """The dataset's judge with a failed preflight on record, as the dialog's job leaves it (stored
    here, so the setup calls no model); and the runs counted."""
    from runs.judging.configs import dataset_judge_config

    config = dataset_judge_config(dataset=Dataset.objects.get(pk=objects["dataset_id"]))
    failed = {"status": "failed", "reasons": ["It gave every answer the same score (8)."], "items": []}
    type(config).objects.filter(pk=config.pk).update(preflight_status="failed", preflight=failed)
    _count_runs(objects)


def _count_runs(objects: dict[str, Any]) -> None:
    objects["runs_before"] = _runs(objects)


def _one_more_run(objects: dict[str, Any], client: Client) -> bool:
    return _runs(objects) == objects["runs_before"] + 1


def _in_review(objects: dict[str, Any]) -> None:
    Dataset.objects.filter(pk=objects["dataset_id"]).update(status=Dataset.Status.REVIEW)


def _with_warnings(objects: dict[str, Any]) -> None:
    Dataset.objects.filter(pk=objects["dataset_id"]).update(
        warnings=[{"where": "plan.csv, row 3", "message": "The expected answer is empty."}]
    )


def _proposed_map(objects: dict[str, Any]) -> None:
    dataset = Dataset.objects.select_related("agent").get(pk=objects["dataset_id"])
    rule_map = RuleMap.objects.create(
        dataset=dataset, version=dataset.agent.current_version, status=RuleMap.Status.DONE, adopted=False
    )
    objects["rule_map_id"] = rule_map.pk


def _evaluator_form(name: str) -> dict[str, Any]:
    return {
        "name": name, "scope": "trace", "idle_minutes": 30, "sampling_percent": 100, "alert_window": 20,
        "pass_threshold": 7,
    }  # fmt: skip


# The monitoring pages post plain forms (no hx-post): an htmx request gets the same redirect.
def _without_learning_case(objects: dict[str, Any]) -> None:
    LearningCase.objects.filter(pk=objects["learning_case_id"]).delete()


POSTS: dict[str, Post] = {
    "monitoring_settings:key_create": Post(
        data=lambda o: {"name": "Production app"},
        status=(200, 200),  # the new key, shown once on the page
        done=lambda o, client: IngestionKey.objects.filter(name="Production app").exists(),
    ),
    "monitoring_settings:key_revoke": Post(
        data=lambda o: {},
        status=(302, 302),
        done=lambda o, client: IngestionKey.objects.get(pk=o["key_id"]).revoked_at is not None,
    ),
    "monitoring_settings:mapping_create": Post(
        data=lambda o: {"service_name": "support-bot", "agent": o["agent_id"]},
        status=(302, 302),
        done=lambda o, client: ServiceMapping.objects.filter(service_name="support-bot").exists(),
    ),
    "monitoring_settings:mapping_delete": Post(
        data=lambda o: {},
        status=(302, 302),
        done=lambda o, client: not ServiceMapping.objects.filter(pk=o["mapping_id"]).exists(),
    ),
    "monitoring_settings:retention_update": Post(
        data=lambda o: {"retention_days": 45},
        status=(302, 302),
        done=lambda o, client: TeamMonitoring.objects.filter(team_id=o["team_id"], retention_days=45).exists(),
    ),
    "monitoring_settings:masking_update": Post(
        data=lambda o: {},  # the box unticked: masking off
        status=(302, 302),
        done=lambda o, client: AgentMonitoring.objects.filter(
            agent_id=o["agent_id"], mask_personal_data=False
        ).exists(),
    ),
    "monitoring:learning_case_create": Post(
        data=lambda o: {"reason": "picked"},
        status=(302, 302),
        done=lambda o, client: LearningCase.objects.filter(trace_id=o["trace_id"]).exists(),
        setup=_without_learning_case,
    ),
    "monitoring:learning_case_approve": Post(
        data=lambda o: {"dataset": o["dataset_id"], "expected_answer": "Refunds within 30 days."},
        status=(302, 302),
        done=lambda o, client: LearningCase.objects.get(pk=o["learning_case_id"]).status == "approved",
    ),
    "monitoring:learning_case_reject": Post(
        data=lambda o: {"reason": "A test question, not a user's."},
        status=(302, 302),
        done=lambda o, client: LearningCase.objects.get(pk=o["learning_case_id"]).status == "rejected",
    ),
    "monitoring:evaluator_create": Post(
        data=lambda o: _evaluator_form("Probe evaluator"),
        status=(302, 302),
        done=lambda o, client: OnlineEvaluator.objects.filter(name="Probe evaluator").exists(),
    ),
    "monitoring:evaluator_update": Post(
        data=lambda o: _evaluator_form("Renamed evaluator"),
        status=(302, 302),
        done=lambda o, client: OnlineEvaluator.objects.filter(name="Renamed evaluator").exists(),
    ),
    "monitoring:evaluator_enable": Post(
        data=lambda o: {"enabled": "0"},
        status=(302, 302),
        done=lambda o, client: not OnlineEvaluator.objects.get(pk=o["evaluator_id"]).enabled,
    ),
    "monitoring:evaluator_delete": Post(
        data=lambda o: {},
        status=(302, 302),
        done=lambda o, client: not OnlineEvaluator.objects.filter(pk=o["evaluator_id"]).exists(),
    ),
    "coverage:adopt": Post(
        data=lambda o: {"map": o["rule_map_id"]},
        status=(302, 200),
        done=lambda o, client: RuleMap.objects.get(pk=o["rule_map_id"]).adopted,
        setup=_proposed_map,
    ),
    "coverage:map": Post(
        data=lambda o: {},
        status=(302, 200),
        done=lambda o, client: RuleMap.objects.filter(dataset_id=o["dataset_id"]).exists(),
    ),
    "coverage:generate": Post(
        data=lambda o: {"count": 2},
        status=(302, 200),
        done=lambda o, client: "more" in Dataset.objects.get(pk=o["dataset_id"]).generation,
    ),
    "playground:send": Post(
        data=lambda o: {"message": "Is there a refund window?", "version": o["version_id"]},
        status=(302, 200),
        done=lambda o, client: Exchange.objects.filter(message="Is there a refund window?").exists(),
    ),
    "accounts:switch_team": Post(
        data=lambda o: {"team": o["second_team_id"]},
        status=(302, 200),
        done=lambda o, client: client.session[SESSION_KEY] == o["second_team_id"],
        setup=_second_team,
    ),
    "accounts:team_create": Post(
        data=lambda o: {"new-name": "Brand new team"},
        status=(302, 302),
        done=lambda o, client: Team.objects.filter(name="Brand new team").exists(),
    ),
    "accounts:team_update": Post(
        data=lambda o: {"name": "Renamed team"},
        status=(302, 200),
        done=lambda o, client: Team.objects.filter(name="Renamed team").exists(),
    ),
    "accounts:team_budgets": Post(
        data=lambda o: {"run_budget": "2.50", "monthly_budget": "40"},
        status=(302, 200),
        done=lambda o, client: Team.objects.filter(run_budget=2.5, monthly_budget=40).exists(),
    ),
    "accounts:member_add": Post(
        data=lambda o: {"mode": "existing", "username": "dave", "role": "member"},
        status=(302, 200),
        done=lambda o, client: Membership.objects.filter(user__username="dave").exists(),
        setup=_dave,
    ),
    "accounts:member_role": Post(
        data=lambda o: {"role": "owner"},
        status=(302, 200),
        done=lambda o, client: Membership.objects.get(pk=o["membership_id"]).role == "owner",
    ),
    "accounts:member_remove": Post(
        data=lambda o: {},
        status=(302, 200),
        done=lambda o, client: not Membership.objects.filter(pk=o["membership_id"]).exists(),
    ),
    "accounts:token_create": Post(
        data=lambda o: {"name": "Nightly CI"},
        status=(200, 200),
        done=lambda o, client: ApiToken.objects.filter(name="Nightly CI").exists(),
    ),
    "accounts:token_revoke": Post(
        data=lambda o: {},
        status=(302, 200),
        done=lambda o, client: ApiToken.objects.get(pk=o["token_id"]).revoked_at is not None,
    ),
    "agents:version_rollback": Post(
        data=lambda o: {},
        status=(302, 200),
        done=lambda o, client: Agent.objects.get(pk=o["agent_id"]).current_version.number == 3,
        setup=_second_version,
    ),
    "datasets:case_move": Post(
        data=lambda o: {"direction": "bottom"},
        status=(302, 200),
        done=lambda o, client: (
            list(TestCase.objects.filter(dataset_id=o["dataset_id"]).order_by("position").values_list("pk", flat=True))[
                -1
            ]
            == o["case_pk"]
        ),
        setup=lambda o: TestCaseFactory(dataset_id=o["dataset_id"]),
    ),
    "datasets:generate": Post(
        data=lambda o: {"count": 5, "instructions": "", "name": "Generated cases"},
        status=(302, 200),
        done=lambda o, client: Dataset.objects.filter(name="Generated cases").exists(),
    ),
    "datasets:upload": Post(
        data=lambda o: {"name": "Uploaded cases", "file": upload("policy.pdf", pdf_bytes([["Question: Q?"]]))},
        status=(302, 200),
        done=lambda o, client: Dataset.objects.filter(name="Uploaded cases").exists(),
    ),
    "datasets:case_document_attach": Post(
        data=lambda o: {"file": upload("attachment.pdf", pdf_bytes([["An attachment."]]))},
        status=(302, 200),
        done=lambda o, client: (
            TestCase.objects.get(pk=o["case_pk"]).documents.filter(original_name="attachment.pdf").exists()
        ),
    ),
    "datasets:case_document_detach": Post(
        data=lambda o: {},
        status=(302, 200),
        done=lambda o, client: not TestCase.objects.get(pk=o["case_pk"]).documents.exists(),
        setup=_attached,
    ),
    "runs:start": Post(
        # The fake judge fails its preflight (one score for all): started anyway.
        data=lambda o: {"request_key": "security-probe", "allow_failed_preflight": "on"},
        status=(302, 200),
        done=_one_more_run,
        setup=_preflighted,
    ),
    "runs:stop": Post(
        data=lambda o: {},
        status=(302, 200),
        done=lambda o, client: Run.objects.get(pk=o["run_id"]).status == Run.Status.STOPPED,
        setup=_running,
    ),
    "runs:rerun": Post(
        data=lambda o: {"request_key": "security-probe"},
        status=(302, 200),
        done=_one_more_run,
        setup=lambda o: (_failed(o), _count_runs(o)),
    ),
    "runs:baseline": Post(
        data=lambda o: {"action": "pin"},
        status=(302, 200),
        done=lambda o, client: DatasetBaseline.objects.filter(run_id=o["run_id"]).exists(),
    ),
    # The matrix's run has one finished result: its answer is judged again, no agent is asked.
    "runs:rescore": Post(
        data=lambda o: {"request_key": "security-probe"},
        status=(302, 200),
        done=lambda o, client: Run.objects.filter(purpose=Run.Purpose.RESCORE, parent_id=o["run_id"]).count() == 1,
    ),
    "accounts:banner_dismiss": Post(
        data=lambda o: {"banner": "no_model", "next": "/agents/"},
        status=(302, 200),
        done=lambda o, client: BannerDismissal.objects.filter(user__username="alice", banner="no_model").exists(),
    ),
    # The Model section while the test's job runs (the job and its calls are tested in
    # tests/accounts/test_model_test.py).
    # The settings panel while the judge's preflight job runs (the job: tests/runs/test_judge_preflight_settings.py).
    "judge_preflight:start": Post(
        data=lambda o: {},
        status=(302, 200),
        done=lambda o, client: _judge_preflight_queued(),
    ),
    "accounts:model_test": Post(
        data=lambda o: {},
        status=(302, 200),
        done=lambda o, client: _model_test_queued(),
    ),
    "datasets:mapping_cancel": Post(
        data=lambda o: {},
        status=(302, 302),
        done=lambda o, client: not Dataset.objects.filter(pk=o["dataset_id"]).exists(),
        setup=_in_review,
    ),
    "datasets:warnings_dismiss": Post(
        data=lambda o: {},
        status=(302, 200),
        done=lambda o, client: Dataset.objects.get(pk=o["dataset_id"]).warnings == [],
        setup=_with_warnings,
    ),
    "reviews:review": Post(
        data=lambda o: {"verdict": "fail", "score": "3", "note": "Misses the fee"},
        status=(302, 200),
        done=lambda o, client: Review.objects.filter(result_id=o["result_id"], passed=False).exists(),
    ),
    "reviews:case_correct": Post(
        data=lambda o: {"expected_answer": "Refunds within 14 days.", "judge_guideline": ""},
        status=(302, 200),
        done=lambda o, client: CaseEdit.objects.filter(case_id=o["case_pk"]).exists(),
    ),
    "suggestions:generate": Post(
        data=lambda o: {},
        status=(302, 200),
        done=lambda o, client: SuggestionGeneration.objects.filter(run_id=o["run_id"]).exists(),
        setup=lambda o: (_failed(o), Suggestion.objects.filter(pk=o["suggestion_id"]).delete()),
    ),
    # An HTTP agent's configuration lives elsewhere: step 2 of the Apply dialog refuses it
    # and says why, on the page (the change request below is what such a team takes away).
    "suggestions:apply_confirm": Post(
        data=lambda o: _applies_to_run(o, fields_changed=["instructions"], instructions="Answer briefly."),
        status=(200, 200),
        done=lambda o, client: (
            Suggestion.objects.get(pk=o["suggestion_id"]).state == Suggestion.State.PROPOSED
            and AgentVersion.objects.filter(agent_id=o["agent_id"]).count() == 1
        ),
    ),
    # The preview answers with the changed agent: an HTTP agent's cannot be changed here, so it is
    # refused on the page with the reason (nothing is queued).
    "suggestions:apply_preview": Post(
        data=lambda o: _applies_to_run(o, fields_changed=["instructions"], instructions="Answer briefly."),
        status=(200, 200),
        done=lambda o, client: not PreviewJob.objects.filter(status=PreviewJob.Status.QUEUED).exists(),
    ),
    "suggestions:apply_diff": Post(
        data=lambda o: _applies_to_run(o, field="instructions", instructions="Answer briefly."),
        status=(200, 200),
        done=lambda o, client: True,  # a read: the diff's content is checked in _POST_CONTENT
    ),
    "suggestions:change_request": Post(
        data=_suggestion_form,
        status=(200, 200),
        done=lambda o, client: True,  # a download: its content is checked in _POST_CONTENT
    ),
    "suggestions:apply_job_action": Post(
        data=lambda o: {"action": "cancel"},
        status=(302, 200),
        done=lambda o, client: RewriteJob.objects.get(pk=o["job_id"]).status == RewriteJob.Status.CANCELLED,
        setup=lambda o: RewriteJob.objects.filter(pk=o["job_id"]).update(status=RewriteJob.Status.RUNNING),
    ),
    "suggestions:verify": Post(
        data=lambda o: {"version": o["second_version_id"], "scope": "all", "request_key": "security-probe"},
        status=(302, 200),
        done=lambda o, client: Run.objects.filter(purpose=Run.Purpose.VERIFY).count() == 1,
        setup=lambda o: (_failed(o), _second_version(o)),
    ),
}
# Posts that change nothing: what their response must contain to prove it is the real page.
_POST_CONTENT = {
    "suggestions:apply_confirm": "HTTP agents are configured elsewhere",
    "suggestions:apply_diff": "Answer briefly.",
    "suggestions:change_request": "Add the refund window",
}
GET_ROUTES = [route for route in ROUTES if route.name not in POSTS]
POST_ROUTES = [route for route in ROUTES if route.name in POSTS]


def test_every_table_entry_names_a_route():
    names = {route.name for route in ROUTES}
    assert set(GET_STATUS) <= names, f"not routes any more: {set(GET_STATUS) - names}"
    assert set(POSTS) <= names, f"not routes any more: {set(POSTS) - names}"
    assert not set(GET_STATUS) & set(POSTS)


@pytest.mark.parametrize("htmx", [False, True], ids=["page", "htmx"])
@pytest.mark.parametrize("route", GET_ROUTES, ids=str)
def test_no_page_or_fragment_shows_a_header_value(client_alice, secret_objects, route, htmx):
    url = _url(route, secret_objects)
    expected = GET_STATUS.get(route.name, (200, 200))[htmx]

    response = client_alice.get(url, headers={"HX-Request": "true"} if htmx else {})

    assert response.status_code == expected, (
        f"GET {url} answered {response.status_code}, expected {expected}. A POST-only route belongs in "
        "POSTS, with data that makes it work; another status in GET_STATUS, with the reason."
    )
    _assert_no_secret(response, f"GET {url}")
    _assert_landing_page_has_no_secret(client_alice, response, f"GET {url}")


@pytest.mark.parametrize("htmx", [False, True], ids=["page", "htmx"])
@pytest.mark.parametrize("route", POST_ROUTES, ids=str)
def test_no_post_response_shows_a_header_value(client_alice, secret_objects, fake_llm, route, htmx):
    # A model (our fake server, never a hosted one): Generate with AI and Test connection
    # accept their jobs.
    post = POSTS[route.name]
    objects = dict(secret_objects)
    post.setup(objects)
    url = _url(route, objects)
    refused = client_alice.get(url)
    assert refused.status_code == 405, f"{route.name} serves GET: it belongs in the GET table"
    _assert_no_secret(refused, f"GET {url}")

    response = client_alice.post(url, post.data(objects), headers={"HX-Request": "true"} if htmx else {})

    expected = post.status[htmx]
    assert response.status_code == expected, f"POST {url} answered {response.status_code}, expected {expected}"
    assert post.done(objects, client_alice), f"POST {url} answered {response.status_code} but did not do its work"
    if route.name in _POST_CONTENT:
        assert _POST_CONTENT[route.name].encode() in _content(response), f"POST {url} did not render its page"
    _assert_no_secret(response, f"POST {url}")
    _assert_landing_page_has_no_secret(client_alice, response, f"POST {url}")


@pytest.mark.parametrize("operation", API_READS, ids=str)
def test_no_api_response_shows_a_header_value(alice, secret_objects, operation):
    _, token = account_services.api_token_create(user=alice, name="reader")

    response = Client().get(operation.url(secret_objects), headers={"Authorization": f"Bearer {token}"})

    assert response.status_code == 200, f"{operation}: {response.status_code}"
    _assert_no_secret(response, str(operation))

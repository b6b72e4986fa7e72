"""Every operation of the API's OpenAPI schema, GETs and writes alike, driven by schemathesis
with generated parameters and bodies against the test database, with two teams' tokens
(issues 34 and 48): no answer is a 5xx, and team B never reaches team A's objects.

The schema is the one the API serves (/api/openapi.json), so an endpoint added later is covered
without touching this test. Each team has a user, a token, an agent, a dataset, a case, runs, a
result, a review and a playground exchange. Three rounds, each over every operation:
1. team B's token with team A's real ids in the path: never a 5xx, never a 2xx or 3xx (the
   objects are another team's: 404, or a 4xx the request earned on its own), and no answer,
   whatever its path, carries A's data (A's objects hold a marker no generated value has);
   afterwards A's objects are as they were;
2. team B's token on B's own ids, and 3. team A's token on A's own ids: never a 5xx;
4. team A's token with values the schema refuses (schemathesis's negative mode): never a 5xx.
Half of the calls of rounds 2 and 3 use the real ids (generated ids alone would only ever
reach the 404 at the door); deletions run last in each round. A multipart operation is also
sent without the boundary in its Content-Type (a 500 found by schemathesis, issue 48). The
examples per operation are bounded (SCHEMATHESIS_EXAMPLES, default 12) and derandomized, so
the run is the same every time and lasts about a minute. The model calls any operation makes
go to the fake server; Celery work is queued after commit, which a test transaction never
reaches. An operation authenticated otherwise (the trace ingestion key) answers 401: fine.
"""

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.core.wsgi import get_wsgi_application
from django.test.client import encode_multipart
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from werkzeug.test import Client as WerkzeugClient

from accounts.models import Membership
from accounts.services import api_token_create
from agents.models import Agent
from datasets.models import Dataset, TestCase
from playground.models import Exchange
from reviews.services import review_save
from tests.factories import AgentFactory, DatasetFactory, TestCaseFactory
from tests.runs.review_helpers import CaseSpec, build_run

pytestmark = pytest.mark.django_db

EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "12"))
WRITES_LAST = ("DELETE",)
# In team A's names and texts only: a response to team B that contains it leaks A's data.
MARKER = "zq-team-a-only"


def _seed(*, agent: Agent, user: User, marker: str = "") -> dict[str, int]:
    """One object of each kind in the agent's team, by the name of the path parameter it fills."""
    if marker:
        Agent.objects.filter(pk=agent.pk).update(name=f"Agent {marker}", description=marker)
    dataset = DatasetFactory(agent=agent, name=f"Dataset {marker}".strip())
    case = TestCaseFactory(dataset=dataset, question=f"How long is the refund window? {marker}")
    spec = {"question": f"Refund window? {marker}", "answer": f"Within 30 days. {marker}"}
    baseline = build_run(agent=agent, dataset=dataset, cases=[CaseSpec(repeats=[("fail", 3.0)], **spec)])
    run = build_run(agent=agent, dataset=dataset, cases=[CaseSpec(repeats=[("pass", 9.0)], **spec)])
    result = run.results.get()
    review_save(result=result, reviewer=user, agrees=True)
    exchange = Exchange.objects.create(
        agent=agent, version=agent.current_version, created_by=user, message=f"Hi {marker}"
    )
    membership = Membership.objects.get(user=user)
    return {
        "team_id": membership.team_id,
        "membership_id": membership.pk,
        "token_id": api_token_create(user=user, name="spare")[0].pk,  # not the one the requests use
        "version_id": agent.current_version_id,
        "exchange_id": exchange.pk,
        "agent_id": agent.pk,
        "dataset_id": dataset.pk,
        "item_id": case.pk,
        "run_id": run.pk,
        "baseline_id": baseline.pk,
        "result_id": result.pk,
    }


@pytest.fixture
def real_ids(agent, alice, fake_llm) -> dict[str, int]:
    return _seed(agent=agent, user=alice, marker=MARKER)


@pytest.fixture
def other_ids(other_team, charlie, fake_llm) -> dict[str, int]:
    return _seed(agent=AgentFactory(team=other_team, name="Globex bot"), user=charlie)


@pytest.fixture
def wsgi_app():
    """Django's WSGI application, kept off the connection closing at each request's end (as the
    test client does): the test's transaction holds every row the requests read."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield get_wsgi_application()
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def _operations(schema: Any) -> list[Any]:
    operations = [result.ok() for result in schema.get_all_operations()]
    return sorted(operations, key=lambda operation: operation.method.upper() in WRITES_LAST)


def _is_multipart(operation: Any) -> bool:
    content = operation.definition.raw.get("requestBody", {}).get("content", {})
    return "multipart/form-data" in content


def _drive(
    schema: Any,
    check: Callable[[Any, Any, bool], None],
    *,
    app: Any,
    token: str,
    ids: dict[str, int],
    always: bool,
    mode: GenerationMode = GenerationMode.POSITIVE,
    examples: int = EXAMPLES,
) -> int:
    """Every operation with generated cases; the path's known ids replaced by `ids` on every
    call (`always`) or every other one. `check(case, response, replaced)` records faults."""
    calls = {"count": 0}
    for operation in _operations(schema):
        multipart = _is_multipart(operation)

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=examples,
            deadline=None,
            derandomize=True,
            database=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        def call(case: Any) -> None:
            calls["count"] += 1
            replaced = False
            if case.path_parameters and (always or calls["count"] % 2):
                replaced = any(name in ids for name in case.path_parameters)
                case.path_parameters = {name: ids.get(name, value) for name, value in case.path_parameters.items()}
            headers = {"Authorization": f"Bearer {token}"}
            check(case, case.call(headers=headers), replaced)
            if multipart and calls["count"] % 3 == 0:  # noqa: B023 - called before the loop goes on
                check(case, _without_boundary(app, case, token), replaced)

        call()
    return calls["count"]


@dataclass
class _Answer:
    """What a check reads of an answer: its status and bytes."""

    status_code: int
    content: bytes


def _without_boundary(app: Any, case: Any, token: str) -> _Answer:
    """The case's multipart body with a Content-Type that lacks its boundary. schemathesis (its
    HTTP client) always writes the boundary, so this one goes to the WSGI app directly."""
    fields = {name: str(value) for name, value in (case.body or {}).items() if not isinstance(value, bytes)}
    body = encode_multipart("case-boundary", fields)
    response = WerkzeugClient(app).open(
        case.formatted_path,
        method=case.method,
        data=body,
        content_type="multipart/form-data",
        headers={"Authorization": f"Bearer {token}"},
    )
    return _Answer(response.status_code, response.data)


def _describe(case: Any, response: Any) -> str:
    return f"{case.method} {case.formatted_path} {case.query} -> {response.status_code}"


def _a_state(ids: dict[str, int]) -> dict[str, Any]:
    return {
        "agent": Agent.objects.filter(pk=ids["agent_id"]).values_list("name", "description").first(),
        "dataset": Dataset.objects.filter(pk=ids["dataset_id"]).values_list("name", flat=True).first(),
        "case": TestCase.objects.filter(pk=ids["item_id"]).values_list("question", flat=True).first(),
        "runs": sorted(Agent.objects.get(pk=ids["agent_id"]).runs.values_list("pk", flat=True)),
    }


def test_no_operation_answers_a_server_error_nor_crosses_teams(real_ids, other_ids, alice, charlie, wsgi_app):
    schema = schemathesis.openapi.from_wsgi("/api/openapi.json", wsgi_app)
    token_a = api_token_create(user=alice, name="schemathesis")[1]
    token_b = api_token_create(user=charlie, name="schemathesis")[1]
    server_errors: list[str] = []
    leaks: list[str] = []
    # That the checks can see what they look for: A's answers carry the marker, B's are 404s.
    seen = {"marker_by_a": 0, "not_found_across": 0}

    def checker(token: str, *, across: bool = False) -> Callable[[Any, Any, bool], None]:
        """across: team B's token on team A's ids, where a 2xx is a leak."""

        def check(case: Any, response: Any, replaced: bool) -> None:
            if response.status_code >= 500:
                server_errors.append(_describe(case, response))
            if token == token_b and (
                MARKER.encode() in response.content or (across and replaced and response.status_code < 400)
            ):
                leaks.append(f"{_describe(case, response)} {response.content[:200]!r}")
            seen["marker_by_a"] += token == token_a and MARKER.encode() in response.content
            seen["not_found_across"] += across and replaced and response.status_code == 404

        return check

    before = _a_state(real_ids)
    counts = [_drive(schema, checker(token_b, across=True), app=wsgi_app, token=token_b, ids=real_ids, always=True)]
    assert _a_state(real_ids) == before, "team B's requests changed team A's objects"
    counts.append(_drive(schema, checker(token_b), app=wsgi_app, token=token_b, ids=other_ids, always=False))
    counts.append(_drive(schema, checker(token_a), app=wsgi_app, token=token_a, ids=real_ids, always=False))
    # Values the schema refuses (past a maximum, the wrong type): a 4xx, never a 5xx.
    negative = max(2, EXAMPLES // 3)
    counts.append(
        _drive(
            schema,
            checker(token_a),
            app=wsgi_app,
            token=token_a,
            ids=real_ids,
            always=False,
            mode=GenerationMode.NEGATIVE,
            examples=negative,
        )
    )

    operations = len(_operations(schema))
    assert min(counts[:3]) >= 2 * operations  # every operation was called in every round, not skipped
    assert seen["marker_by_a"] > 0 and seen["not_found_across"] > operations
    assert leaks == []
    assert server_errors == []

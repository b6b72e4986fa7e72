"""Every operation of the API's OpenAPI schema, GETs and writes alike, driven by schemathesis
with generated parameters and bodies against the test database: no answer is a 5xx (issue 34).

The schema is the one the API serves (/api/openapi.json), so an endpoint added later is covered
without touching this test. Half the requests use the ids of a real team's agent, dataset, case,
run and result (generated ids alone would only ever reach the 404 at the door), all with a valid
token; deletions run last, so they do not take the objects away from the rest. The examples per
operation are bounded (SCHEMATHESIS_EXAMPLES, default 12) and derandomized, so the run is the
same every time and lasts about a minute. The model calls any operation makes go to the fake
server; Celery work is queued after commit, which a test transaction never reaches.
"""

import os
from typing import Any

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, Phase, given, settings

from accounts.models import Membership
from accounts.services import api_token_create
from playground.models import Exchange
from reviews.services import review_save
from tests.factories import DatasetFactory, TestCaseFactory
from tests.runs.review_helpers import CaseSpec, build_run

pytestmark = pytest.mark.django_db

EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "12"))
WRITES_LAST = ("DELETE",)


@pytest.fixture
def real_ids(agent, alice, fake_llm) -> dict[str, int]:
    dataset = DatasetFactory(agent=agent)
    case = TestCaseFactory(dataset=dataset)
    baseline = build_run(agent=agent, dataset=dataset, cases=[CaseSpec(repeats=[("fail", 3.0)])])
    run = build_run(agent=agent, dataset=dataset, cases=[CaseSpec(repeats=[("pass", 9.0)])])
    result = run.results.get()
    review_save(result=result, reviewer=alice, agrees=True)
    exchange = Exchange.objects.create(agent=agent, version=agent.current_version, created_by=alice, message="Hi")
    membership = Membership.objects.get(user=alice)
    return {
        "team_id": membership.team_id,
        "membership_id": membership.pk,
        "token_id": api_token_create(user=alice, name="spare")[0].pk,  # not the one the requests use
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


def test_no_operation_answers_a_server_error(real_ids, alice, wsgi_app):
    token = api_token_create(user=alice, name="schemathesis")[1]
    schema = schemathesis.openapi.from_wsgi("/api/openapi.json", wsgi_app)
    failures: list[str] = []
    calls = {"count": 0}

    for operation in _operations(schema):

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        def call(case: Any) -> None:
            calls["count"] += 1
            if calls["count"] % 2 and case.path_parameters:
                case.path_parameters = {name: real_ids.get(name, value) for name, value in case.path_parameters.items()}
            response = case.call(headers={"Authorization": f"Bearer {token}"})
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.formatted_path} {case.query} -> {response.status_code}")

        call()

    assert calls["count"] >= 2 * len(_operations(schema))  # every operation was called, not skipped
    assert failures == []

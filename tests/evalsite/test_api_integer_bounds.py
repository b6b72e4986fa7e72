"""Every integer the API reads from a URL, walked from its OpenAPI schema (issue 48): a paging
offset, a filter id, a version number or a path id past what the database can hold (2**63)
or below zero never answers a 500. `?offset=9223372036854775808` on a run failed its query
("bigint out of range" on PostgreSQL, an OverflowError on SQLite): one parameter had no
upper bound. The schema is the one the API serves, so an endpoint added later is walked
without touching this file; its own answer (401 from an ingestion key's endpoint, say) is
its business, a 5xx never is.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest
from django.test import Client

from accounts import services as account_services
from tests.security.routes import API_PARAMS, API_QUERY, ApiOperation, api_operations
from tests.test_permissions import url_objects  # noqa: F401 - reused, not copied

pytestmark = pytest.mark.django_db

HUGE = 2**63
OUT_OF_RANGE = [HUGE, -1]


def _is_integer(schema: dict[str, Any]) -> bool:
    options = [schema, *schema.get("anyOf", []), schema.get("items", {})]
    return any(option.get("type") == "integer" for option in options)


def _integer_parameters(where: str) -> list[tuple[ApiOperation, str]]:
    from evalsite.api import api

    paths = api.get_openapi_schema()["paths"]
    found = []
    for operation in api_operations():
        parameters = paths[operation.path][operation.method.lower()].get("parameters", [])
        found += [(operation, p["name"]) for p in parameters if p["in"] == where and _is_integer(p["schema"])]
    return found


QUERY_INTEGERS = _integer_parameters("query")
PATH_INTEGERS = _integer_parameters("path")


def _ids(item: tuple[ApiOperation, str]) -> str:
    return f"{item[0]} {item[1]}"


def _call(operation: ApiOperation, url: str, token: str) -> Any:
    headers = {"Authorization": f"Bearer {token}"}
    if operation.multipart:
        return Client().post(url, operation.form_data(), headers=headers)
    body = json.dumps(operation.body) if operation.body is not None else ""
    return Client().generic(operation.method, url, body, content_type="application/json", headers=headers)


@pytest.fixture
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    return tmp_path


@pytest.fixture
def token(alice) -> str:
    return account_services.api_token_create(user=alice, name="bounds")[1]


def _url(operation: ApiOperation, objects: dict[str, Any], **values: int) -> str:
    """The operation's URL on alice's objects, `values` in place of theirs. A parameter the
    security suite does not know yet (a new endpoint's) is 1: its answer may be a 404, never a 5xx."""
    url = operation.path
    for param in operation.params:
        value = values.get(param, objects.get(API_PARAMS.get(param, ""), 1))
        url = url.replace("{" + param + "}", str(value))
    query = [(param, objects[key]) for param in operation.query for key in API_QUERY.get(param, ())]
    query += [(param, 1) for param in operation.query if param not in API_QUERY and param not in values]
    query += [(name, value) for name, value in values.items() if name not in operation.params]
    return url + ("?" + urlencode(query) if query else "")


def test_the_walk_finds_the_paging_parameters():
    names = {(str(operation), name) for operation, name in QUERY_INTEGERS}
    assert ("GET /api/runs/{run_id}", "offset") in names
    assert ("GET /api/agents/{agent_id}/runs", "limit") in names
    assert ("GET /api/runs/{run_id}", "run_id") in {(str(op), name) for op, name in PATH_INTEGERS}


@pytest.mark.parametrize("item", QUERY_INTEGERS, ids=_ids)
@pytest.mark.parametrize("value", OUT_OF_RANGE)
def test_an_integer_query_parameter_out_of_range_is_not_a_server_error(url_objects, token, media_root, item, value):  # noqa: F811
    operation, name = item
    url = _url(operation, url_objects, **{name: value})

    response = _call(operation, url, token)

    assert response.status_code < 500, f"{operation}?{name}={value}: {response.status_code}"
    if response.status_code == 422:
        assert name in response.content.decode()  # the error names the parameter


@pytest.mark.parametrize("item", PATH_INTEGERS, ids=_ids)
def test_a_path_id_past_the_database_is_not_found(url_objects, token, media_root, item):  # noqa: F811
    operation, name = item
    url = _url(operation, url_objects, **{name: HUGE})

    response = _call(operation, url, token)

    assert response.status_code in (404, 422), f"{operation} with {name}={HUGE}: {response.status_code}"


@pytest.mark.parametrize("value", [HUGE, HUGE * 4, 10**30])
def test_a_run_page_past_the_database_is_refused_by_name(client, url_objects, token, value):  # noqa: F811
    response = client.get(
        f"/api/runs/{url_objects['run_id']}", {"offset": value}, headers={"Authorization": f"Bearer {token}"}
    )

    assert response.status_code == 422
    assert "offset" in response.content.decode()

"""Every page of the console, walked from the URL conf, with every integer its views read from a
query string or a form past what the database holds (2**63, 10**30) or below zero (issue 48):
a page clamps or ignores such a value (a page past the last shows the last, an unknown id is
the default or a 404) and never answers a 500. A page added later is walked without touching
this file; a new integer parameter goes into PAGE_INTEGERS.
"""

from __future__ import annotations

import pytest
from django.test import Client

from tests.security.routes import console_routes
from tests.test_permissions import _url

pytestmark = pytest.mark.django_db

# What the views read as integers (request.GET / request.POST and the forms they fill): paging
# (page, offset, after, upto), ids (case, version, run, runs, a, b, map, ids, selected, newest)
# and counts.
PAGE_INTEGERS = (
    "page",
    "offset",
    "after",
    "upto",
    "case",
    "version",
    "run",
    "runs",
    "a",
    "b",
    "map",
    "ids",
    "selected",
    "newest",
    "count",
)
OUT_OF_RANGE = [str(2**63), "-1"]
# Signing out would sign the rest of the walk out.
ROUTES = [route for route in console_routes() if route.name != "accounts:logout"]


@pytest.mark.parametrize("route", ROUTES, ids=str)
@pytest.mark.parametrize("value", OUT_OF_RANGE)
def test_a_page_clamps_an_integer_out_of_range(client_alice: Client, stored_objects, fake_llm, route, value):
    url = _url(route, stored_objects)

    # One at a time on a GET (one value must not hide another: `runs` turns the compare page
    # into the matrix), all at once on a POST (a POST may change what the next one sees).
    for name in PAGE_INTEGERS:
        response = client_alice.get(url, {name: value})
        assert response.status_code < 500, f"GET {url}?{name}={value}: {response.status_code}"
    response = client_alice.post(url, dict.fromkeys(PAGE_INTEGERS, value))
    assert response.status_code < 500, f"POST {url} with every integer = {value}: {response.status_code}"


@pytest.mark.parametrize("route", [route for route in ROUTES if route.params], ids=str)
def test_a_path_id_past_the_database_is_not_found(client_alice: Client, stored_objects, route):
    for param in route.params:
        if not isinstance(stored_objects[param], int):
            continue  # a token or a signed link, not an id
        response = client_alice.get(_url(route, stored_objects, **{param: 2**63}))
        assert response.status_code in (400, 404, 405), f"{route} {param}=2**63: {response.status_code}"

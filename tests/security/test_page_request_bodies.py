"""Form bodies that cannot be read, posted to every page of the console (issue 48): a
multipart Content-Type without a boundary, a body cut short, more fields than Django takes.
Django answers its parser's errors with a 400; no page may turn one into a 500 (a view or a
middleware reading request.POST and letting the error through). Routes come from the URL
conf, so a page added later is covered.
"""

from __future__ import annotations

import pytest
from django.test import Client

from tests.security.routes import console_routes
from tests.test_permissions import _url

pytestmark = pytest.mark.django_db

ROUTES = [route for route in console_routes() if route.name != "accounts:logout"]
FIELDS = b"".join(b'--x\r\nContent-Disposition: form-data; name="f%d"\r\n\r\n1\r\n' % i for i in range(10))
BROKEN = {
    "no boundary": ("multipart/form-data", b"--x\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--x--\r\n"),
    "a body cut short": (
        "multipart/form-data; boundary=x",
        b'--x\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\n\r\nquestion,',
    ),
    "too many fields": ("multipart/form-data; boundary=x", FIELDS + b"--x--\r\n"),
    "not UTF-8": ("application/x-www-form-urlencoded", b"name=\xff\xfe&page=1"),
}


@pytest.mark.parametrize("route", ROUTES, ids=str)
def test_a_form_body_that_cannot_be_read_is_never_a_server_error(client_alice: Client, stored_objects, settings, route):
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 5
    url = _url(route, stored_objects)

    for fault, (content_type, body) in BROKEN.items():
        response = client_alice.generic("POST", url, body, content_type=content_type)
        assert response.status_code < 500, f"POST {url} with {fault}: {response.status_code}"

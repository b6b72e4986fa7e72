"""Request bodies that cannot be read, sent to every API operation that takes one (issue 48):
a multipart Content-Type without a boundary (`POST .../datasets/upload` answered 500, from
evalsite/idempotency.py `upload_body` reading request.POST), a boundary that the body never
uses, malformed JSON, a charset Python does not know, bytes that are not UTF-8. Each is the
client's mistake: a 400 or 422 whose `detail` says what is wrong, never a 5xx. Operations
are read from the OpenAPI schema, so an endpoint added later is covered without touching this
file; a parameter the security suite cannot fill yet is 1 (its answer may then be a 404).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from accounts import services as account_services
from tests.security.routes import API_PARAMS, ApiOperation, api_operations
from tests.test_permissions import url_objects  # noqa: F401 - reused, not copied

pytestmark = pytest.mark.django_db

WITH_BODY = [operation for operation in api_operations() if operation.body is not None or operation.multipart]
MULTIPART = [operation for operation in WITH_BODY if operation.multipart]
JSON = [operation for operation in WITH_BODY if not operation.multipart]

BROKEN_MULTIPART = {
    "no boundary": ("multipart/form-data", b"--x\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--x--\r\n"),
    "a boundary the body never uses": ("multipart/form-data; boundary=nothere", b"not multipart at all"),
    "an empty boundary": ("multipart/form-data; boundary=", b""),
    "a body cut short": (
        "multipart/form-data; boundary=x",
        b'--x\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\n\r\nquestion,',
    ),
    "a charset nobody knows": ("multipart/form-data; boundary=x; charset=klingon", b"--x--\r\n"),
    "not multipart at all": ("text/plain", b"question,expected_answer\nA,B\n"),
}
BROKEN_JSON = {
    "malformed JSON": ("application/json", b'{"name": '),
    "a charset nobody knows": ("application/json; charset=klingon", b'{"name": "x"}'),
    "bytes that are not UTF-8": ("application/json", b'{"name": "\xff\xfe"}'),
    "multipart without a boundary": ("multipart/form-data", b'{"name": "x"}'),
    "form-encoded": ("application/x-www-form-urlencoded", b"name=x"),
}
# JSON the API cannot read at all; the others it may read as JSON whatever their Content-Type
# says (django-ninja parses the body as JSON), only never with a 5xx.
UNREADABLE_JSON = ("malformed JSON", "bytes that are not UTF-8")


@pytest.fixture
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    return tmp_path


@pytest.fixture
def token(alice) -> str:
    return account_services.api_token_create(user=alice, name="bodies")[1]


def _url(operation: ApiOperation, objects: dict[str, Any]) -> str:
    url = operation.path
    for param in operation.params:
        url = url.replace("{" + param + "}", str(objects.get(API_PARAMS.get(param, ""), 1)))
    return url


def _post(operation: ApiOperation, objects: dict[str, Any], token: str, content_type: str, body: bytes) -> Any:
    return Client().generic(
        operation.method,
        _url(operation, objects),
        body,
        content_type=content_type,
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )


def test_the_walk_finds_the_uploads():
    assert "POST /api/agents/{agent_id}/eval/datasets/upload" in {str(operation) for operation in MULTIPART}
    assert JSON


@pytest.mark.parametrize("operation", MULTIPART, ids=str)
@pytest.mark.parametrize("fault", BROKEN_MULTIPART)
def test_a_multipart_body_that_cannot_be_read_is_a_bad_request(url_objects, token, media_root, operation, fault):  # noqa: F811
    content_type, body = BROKEN_MULTIPART[fault]

    response = _post(operation, url_objects, token, content_type, body)

    assert 400 <= response.status_code < 500, f"{operation} with {fault}: {response.status_code}"
    assert response.json()["detail"]


@pytest.mark.parametrize("operation", JSON, ids=str)
@pytest.mark.parametrize("fault", BROKEN_JSON)
def test_a_json_body_that_cannot_be_read_is_a_bad_request(url_objects, token, media_root, operation, fault):  # noqa: F811
    content_type, body = BROKEN_JSON[fault]

    response = _post(operation, url_objects, token, content_type, body)

    assert response.status_code < 500, f"{operation} with {fault}: {response.status_code}"
    if fault in UNREADABLE_JSON:
        assert 400 <= response.status_code, f"{operation} with {fault}: {response.status_code}"


def test_a_missing_boundary_is_named_in_the_answer(client, url_objects, token):  # noqa: F811
    url = f"/api/agents/{url_objects['agent_id']}/eval/datasets/upload"

    content_type, body = BROKEN_MULTIPART["no boundary"]

    response = client.post(url, body, content_type=content_type, HTTP_AUTHORIZATION=f"Bearer {token}")

    assert response.status_code == 400
    assert "boundary" in response.json()["detail"]


def test_too_many_fields_is_a_bad_request_not_a_500(client, url_objects, token, settings):  # noqa: F811
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 5
    url = f"/api/agents/{url_objects['agent_id']}/eval/datasets/upload"
    fields = b"".join(b'--x\r\nContent-Disposition: form-data; name="f%d"\r\n\r\n1\r\n' % i for i in range(10))

    response = client.post(
        url, fields + b"--x--\r\n", content_type="multipart/form-data; boundary=x", HTTP_AUTHORIZATION=f"Bearer {token}"
    )

    assert response.status_code == 400
    assert "fields" in response.json()["detail"]

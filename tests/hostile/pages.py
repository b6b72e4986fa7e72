"""Shared checks of the hostile suites: read every dataset page, look for leaks."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

from django.apps import apps
from django.core import serializers
from django.test import Client
from django.urls import reverse

from datasets.models import Dataset
from tests.security.routes import console_routes

# A traceback, a code location, or an exception class name (ValueError, BadZipFile, EntitiesForbidden...).
LEAK = re.compile(
    r"Traceback \(most recent call last\)|File \"[^\"]+\", line \d+|site-packages|\bErrno\b|BadZipFile"
    r"|\b(?:[A-Z][a-z0-9]+)+(?:Error|Exception|Forbidden)\b"
)
# What an expanded XXE or billion-laughs entity would leave behind.
EXPANDED_ENTITIES = ("root:x:", "lollollollol")
FILLABLE = {"agent_id", "dataset_id", "document_id", "case_pk"}
# Routes that echo a search query back: read once more with a hostile one.
SEARCHABLE = {"datasets:detail", "datasets:case_search"}
HOSTILE_QUERY = "<script>alert('xss-q')</script>"


def dataset_routes() -> list[Any]:
    """Every route of the datasets area a dataset's objects can fill: pages added later are read too."""
    return [route for route in console_routes() if route.namespace == "datasets" and set(route.params) <= FILLABLE]


def read_dataset_pages(client: Client, dataset: Dataset | None, agent_id: int) -> dict[str, Any]:
    """GET every dataset route, as a page and as an htmx request; {"<name> [htmx]": response}."""
    objects: dict[str, int] = {"agent_id": agent_id}
    if dataset is not None:
        objects["dataset_id"] = dataset.pk
        document = dataset.documents.order_by("pk").first()
        case = dataset.cases.order_by("position", "pk").first()
        if document is not None:
            objects["document_id"] = document.pk
        if case is not None:
            objects["case_pk"] = case.pk
    responses = {}
    for route in dataset_routes():
        if not set(route.params) <= set(objects):
            continue
        url = reverse(route.name, kwargs={param: objects[param] for param in route.params})
        for htmx in (False, True):
            response = client.get(url, headers={"HX-Request": "true"} if htmx else {})
            if response.status_code == 405:
                break  # a POST-only route
            responses[f"{route.name}{' [htmx]' if htmx else ''}"] = response
            if route.name in SEARCHABLE:
                searched = client.get(url, {"q": HOSTILE_QUERY}, headers={"HX-Request": "true"} if htmx else {})
                assert HOSTILE_QUERY not in body(searched), f"{route.name} echoes the query as markup"
                responses[f"{route.name}?q{' [htmx]' if htmx else ''}"] = searched
    return responses


def raw(response: Any) -> bytes:
    """The response's bytes; a streamed file is read once and kept, so several checks can read it."""
    if not hasattr(response, "_read_once"):
        response._read_once = b"".join(response.streaming_content) if response.streaming else response.content
    return response._read_once


def body(response: Any) -> str:
    return raw(response).decode("utf-8", errors="replace")


def assert_no_leaks(responses: dict[str, Any]) -> None:
    for name, response in responses.items():
        assert response.status_code < 500, f"{name} answered {response.status_code}"
        text = body(response)
        for expanded in EXPANDED_ENTITIES:
            assert expanded not in text, f"{name} shows an expanded XML entity"
        if response.get("Content-Type", "").startswith("text/html"):
            leak = LEAK.search(html.unescape(text))
            assert leak is None, f"{name} shows {leak.group(0)!r}"


def assert_database_clean() -> None:
    """No expanded entity anywhere in the database: every row of the console's models."""
    for model in apps.get_models():
        if model._meta.app_label in {"accounts", "agents", "datasets", "runs", "suggestions"}:
            dump = serializers.serialize("json", model.objects.all())
            for expanded in EXPANDED_ENTITIES:
                assert expanded not in dump, f"{model._meta.label} holds an expanded XML entity"


def files_under(root: Path) -> set[Path]:
    return {path for path in root.rglob("*") if path.is_file()}

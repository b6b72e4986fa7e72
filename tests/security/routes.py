"""Every route of the console and every operation of the JSON API, read from the code.

The console's routes come from the URL conf (the permission matrix's walker in
tests/test_permissions.py), the API's from its OpenAPI schema, so a page or endpoint
added later is covered by the security suite without touching it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.urls import get_resolver

from tests.test_permissions import EXCLUDED_NAMESPACES, Route, _walk

# API path parameters and the url_objects key (tests/test_permissions.py) that fills them.
API_PARAMS = {
    "agent_id": "agent_id",
    "dataset_id": "dataset_id",
    "item_id": "case_pk",
    "run_id": "run_id",
    "baseline_id": "baseline_run_id",
    "result_id": "result_id",
    "suggestion_id": "suggestion_id",
    "version_id": "version_id",
    "document_id": "document_id",
}


def console_routes() -> list[Route]:
    """Every named route outside the admin and the API, public ones (login, signed links) included."""
    return [
        route
        for route in _walk(get_resolver().url_patterns)
        if route.namespace.split(":")[0] not in EXCLUDED_NAMESPACES
    ]


@dataclass(frozen=True)
class ApiOperation:
    method: str
    path: str  # /api/agents/{agent_id}/...
    params: tuple[str, ...]
    body: Any  # a minimal valid JSON body, or None

    def __str__(self) -> str:
        return f"{self.method} {self.path}"

    def url(self, objects: dict[str, Any]) -> str:
        unknown = [param for param in self.params if param not in API_PARAMS]
        if unknown:
            raise LookupError(
                f"{self}: path parameter(s) {', '.join(unknown)} unknown to the security suite; "
                "add them to API_PARAMS in tests/security/routes.py"
            )
        url = self.path
        for param in self.params:
            url = url.replace("{" + param + "}", str(objects[API_PARAMS[param]]))
        return url


def api_operations() -> list[ApiOperation]:
    from evalsite.api import api

    schema = api.get_openapi_schema()
    components = schema.get("components", {}).get("schemas", {})
    operations = []
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            params = tuple(p["name"] for p in operation.get("parameters", []) if p["in"] == "path")
            body_schema = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            body = minimal_value(body_schema, components) if body_schema else None
            operations.append(ApiOperation(method.upper(), path, params, body))
    return operations


def minimal_value(schema: dict[str, Any], components: dict[str, Any]) -> Any:
    """The smallest value a JSON schema accepts: required properties only, first enum value."""
    if "$ref" in schema:
        return minimal_value(components[schema["$ref"].rsplit("/", 1)[-1]], components)
    if "anyOf" in schema:
        options = [option for option in schema["anyOf"] if option.get("type") != "null"]
        return minimal_value(options[0], components) if options else None
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        return {name: minimal_value(schema["properties"][name], components) for name in schema.get("required", [])}
    if kind == "string":
        return "Security probe " + "x" * max(0, schema.get("minLength", 0) - 15)
    if kind == "integer" or kind == "number":
        return schema.get("minimum", 1)
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    return None

"""Every route of the console and every operation of the JSON API, read from the code.

The console's routes come from the URL conf (the permission matrix's walker in
tests/test_permissions.py), the API's from its OpenAPI schema, so a page or endpoint
added later is covered by the security suite without touching it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.core.files.uploadedfile import SimpleUploadedFile
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
    "job_id": "job_id",
    "preview_id": "preview_id",
    "team_id": "team_id",
    "membership_id": "membership_id",
    "token_id": "token_id",
    "exchange_id": "exchange_id",
    "key_id": "key_id",
    "mapping_id": "mapping_id",
    "trace_id": "trace_id",
    "learning_case_id": "learning_case_id",
    "evaluator_id": "evaluator_id",
}
# Query parameters an operation needs to do its work (required ones, and the compare matrix's
# runs, which default to none and then answer 400), with the url_objects keys that fill them.
API_QUERY = {
    "runs": ("run_id", "baseline_run_id"),  # the compare matrix: two runs of one dataset
}

# Files posted to the multipart operations (uploads, imports, attachments): a small test plan
# that every one of them accepts, and an EvalSet for the JSON import.
PROBE_CSV = b"question,expected_answer\nHow long is the refund window?,Refunds within 30 days.\n"
PROBE_EVAL_SET = (
    b'{"eval_set_id": "probe", "name": "Probe", "eval_cases": [{"eval_id": "refund", "conversation": '
    b'[{"invocation_id": "i-1", "user_content": {"role": "user", "parts": [{"text": "Refund window?"}]}, '
    b'"final_response": {"role": "model", "parts": [{"text": "30 days."}]}}]}]}'
)


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
    form: tuple[str, ...] = ()  # a multipart operation's required fields besides its file
    query: tuple[str, ...] = ()  # query parameters filled from API_QUERY

    @property
    def multipart(self) -> bool:
        return "file" in self.form

    def form_data(self) -> dict[str, Any]:
        """A fresh multipart body (an uploaded file is read once): the probe file, a text per field."""
        data: dict[str, Any] = {name: "Security probe" for name in self.form if name != "file"}
        if self.path.endswith("/import/json"):
            data["file"] = SimpleUploadedFile("probe.json", PROBE_EVAL_SET, content_type="application/json")
        else:
            data["file"] = SimpleUploadedFile("probe.csv", PROBE_CSV, content_type="text/csv")
        return data

    def __str__(self) -> str:
        return f"{self.method} {self.path}"

    def url(self, objects: dict[str, Any]) -> str:
        unknown = [param for param in self.params if param not in API_PARAMS]
        unknown += [param for param in self.query if param not in API_QUERY]
        if unknown:
            raise LookupError(
                f"{self}: parameter(s) {', '.join(unknown)} unknown to the security suite; "
                "add them to API_PARAMS or API_QUERY in tests/security/routes.py"
            )
        url = self.path
        for param in self.params:
            url = url.replace("{" + param + "}", str(objects[API_PARAMS[param]]))
        query = [(param, objects[key]) for param in self.query for key in API_QUERY[param]]
        return url + ("?" + urlencode(query) if query else "")


def api_operations() -> list[ApiOperation]:
    from evalsite.api import api

    schema = api.get_openapi_schema()
    components = schema.get("components", {}).get("schemas", {})
    operations = []
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            parameters = operation.get("parameters", [])
            params = tuple(p["name"] for p in parameters if p["in"] == "path")
            query = tuple(
                p["name"] for p in parameters if p["in"] == "query" and (p.get("required") or p["name"] in API_QUERY)
            )
            content = operation.get("requestBody", {}).get("content", {})
            body_schema = content.get("application/json", {}).get("schema")
            body = minimal_value(body_schema, components) if body_schema else None
            form = tuple(content.get("multipart/form-data", {}).get("schema", {}).get("required", []))
            operations.append(ApiOperation(method.upper(), path, params, body, form, query))
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

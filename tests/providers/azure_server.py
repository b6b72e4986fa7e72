"""Azure OpenAI's data-plane API (deployments, api-version), as its documentation describes it.

    POST /openai/deployments/{deployment}/chat/completions?api-version=...
    POST /openai/deployments/{deployment}/embeddings?api-version=...

Every chat request is checked against the `openai` SDK's request type
(CompletionCreateParamsNonStreaming; embeddings: EmbeddingCreateParams) and every answer is
validated as the SDK's ChatCompletion / CreateEmbeddingResponse before it is sent, with
Azure's own additions (prompt_filter_results, content_filter_results).

What it does as Azure does:
- `api-key` must be the server's key: 401 with Azure's "Access denied due to invalid
  subscription key or wrong API endpoint" body; no api-version: 404 "Resource not found";
  a deployment it does not have: 404 DeploymentNotFound.
- A deployment runs a model (DEPLOYMENTS): the answer's `model` is that model's name, as
  Azure reports it, which is what litellm prices the call by.
- A rule's status 429 is Azure's rate-limit body, with the rule's retry-after header; a rule
  with code="content_filter" is Azure's 400 for a prompt its content filter caught
  (innererror ResponsibleAIPolicyViolation); finish_reason="content_filter" is an answer
  the filter stopped (content null).
"""

from __future__ import annotations

import json
import re
from typing import Any

import openai
from openai.types import CreateEmbeddingResponse, embedding_create_params
from openai.types.chat import ChatCompletion, completion_create_params

from tests.providers.base import Answer, ProviderServer, WireReply, WireRequest, typed_problems

API_KEY = "azure-test-key"
API_VERSION = "2024-10-21"
# deployment -> the model it runs (its name as Azure reports it in answers)
DEPLOYMENTS = {
    "evalsite-gpt-4o": "gpt-4o-2024-08-06",
    "evalsite-gpt-4o-mini": "gpt-4o-mini-2024-07-18",
    "evalsite-embed": "text-embedding-3-small",
}
_PATH = re.compile(r"^/openai/deployments/([^/]+)/(chat/completions|embeddings)$")
FILTER_RESULTS = {name: {"filtered": False, "severity": "safe"} for name in ("hate", "self_harm", "sexual", "violence")}
PROMPT_FILTERED = (
    "The response was filtered due to the prompt triggering Azure OpenAI's content management policy. "
    "Please modify your prompt and retry. To learn more about our content filtering policies please read "
    "our documentation: https://go.microsoft.com/fwlink/?linkid=2198766"
)


class AzureServer(ProviderServer):
    provider = "azure"

    def __init__(self, host: str = "127.0.0.1", port: int = 0, latency: float = 0.0) -> None:
        super().__init__(host, port, latency)
        self.api_key = API_KEY
        self.deployments = dict(DEPLOYMENTS)
        self.refused_keywords: frozenset[str] = frozenset()

    @property
    def sdk_version(self) -> str:
        return openai.__version__

    def reset(self) -> None:
        super().reset()
        self.api_key = API_KEY
        self.deployments = dict(DEPLOYMENTS)
        self.refused_keywords = frozenset()

    def refuse_schema_keywords(self, *keywords: str) -> None:
        """Refuse response_format json_schema schemas using these keywords, with Azure's 400."""
        self.refused_keywords = frozenset(keywords)

    def handle(self, request: WireRequest) -> WireReply | None:
        route = _PATH.match(request.path)
        if request.method != "POST" or route is None or not request.query.get("api-version"):
            return _error(404, "404", "Resource not found")
        if request.headers.get("api-key") != self.api_key:
            return _error(
                401,
                "401",
                "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a "
                "valid key for an active subscription and use a correct regional API endpoint for your resource.",
            )
        deployment, operation = route.groups()
        if deployment not in self.deployments:
            return _error(
                404,
                "DeploymentNotFound",
                "The API deployment for this resource does not exist. If you created the deployment within "
                "the last 5 minutes, please wait a moment and try again.",
            )
        body = dict(request.body or {})
        embeddings = operation == "embeddings"
        expected = (
            embedding_create_params.EmbeddingCreateParams
            if embeddings
            else completion_create_params.CompletionCreateParamsNonStreaming
        )
        problems = typed_problems(body, expected)
        if problems:
            self.refuse(problems)
            return _error(400, "BadRequest", "; ".join(problems[:3]))
        spec = (body.get("response_format") or {}).get("json_schema") or {}
        refused = sorted(set(json.dumps(spec.get("schema") or {}).split('"')) & self.refused_keywords)
        if refused:
            message = f"Invalid schema for response_format '{spec.get('name')}': '{refused[0]}' is not permitted."
            return _error(400, "BadRequest", message)
        answer = self.think(request, body, embeddings=embeddings)
        if answer is None:
            return None
        if not answer.ok:
            return _error_from(answer, request.query["api-version"])
        model = self.deployments[deployment]
        if embeddings:
            reply = {**answer.raw, "model": model}
            # The SDK's type holds the floats; base64 (what the SDK asks for) is their encoding on the wire.
            decoded = [{**item, "embedding": answer.vectors[i]} for i, item in enumerate(reply["data"])]
            CreateEmbeddingResponse.model_validate({**reply, "data": decoded})
            return WireReply(200, reply)
        return WireReply(200, _completion(answer, model))


def _completion(answer: Answer, model: str) -> dict[str, Any]:
    raw = dict(answer.raw)
    raw["model"] = model
    filtered = answer.finish_reason == "content_filter"
    choices = []
    for choice in raw["choices"]:
        choice = dict(choice)
        if filtered:
            choice["message"] = {**choice["message"], "content": None}
            choice["content_filter_results"] = {**FILTER_RESULTS, "violence": {"filtered": True, "severity": "high"}}
        else:
            choice["content_filter_results"] = FILTER_RESULTS
        choices.append(choice)
    raw["choices"] = choices
    raw["prompt_filter_results"] = [{"prompt_index": 0, "content_filter_results": FILTER_RESULTS}]
    # The SDK's own type, with Azure's additions kept as its extra fields.
    return ChatCompletion.model_validate(raw).model_dump(mode="json", exclude_unset=True)


def _error_from(answer: Answer, api_version: str) -> WireReply:
    if answer.error_code == "content_filter":
        innererror = {
            "code": "ResponsibleAIPolicyViolation",
            "content_filter_result": {**FILTER_RESULTS, "violence": {"filtered": True, "severity": "medium"}},
        }
        body = {
            "error": {
                "message": PROMPT_FILTERED,
                "type": None,
                "param": "prompt",
                "code": "content_filter",
                "status": 400,
                "innererror": innererror,
            }
        }
        return WireReply(400, body, answer.headers)
    if answer.status == 429:
        wait = answer.headers.get("retry-after", "1")
        message = (
            f"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version {api_version} have "
            f"exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after {wait} second. "
            "Please go here: https://aka.ms/oai/quotaincrease if you would like to further increase the default "
            "rate limit."
        )
        return _error(429, "429", message, answer.headers)
    if answer.error_code == "context_length_exceeded":
        body = {"error": {**answer.raw["error"], "status": 400}}
        return WireReply(400, body, answer.headers)
    return _error(answer.status, str(answer.error_code or answer.status), answer.error_message, answer.headers)


def _error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> WireReply:
    return WireReply(status, {"error": {"code": code, "message": message}}, dict(headers or {}))

"""Google's Gemini API (Google AI Studio, generativelanguage.googleapis.com/v1beta) for the test suite.

    fake = FakeGemini().start()      # litellm: model "gemini/gemini-2.5-flash", api_base fake.url
    fake.add_rule(task="judge", json={"score": 9, ...})   # the FakeLLM rules, as for the OpenAI fake
    fake.rate_limit(task="judge", retry_delay=1, times=1)  # or add_rule(status=429, headers={"retry-after": "1"})
    fake.block(task="agent")                               # finishReason SAFETY

What it serves, as Google documents it (ai.google.dev/api):

- POST /v1beta/models/{model}:generateContent (and /v1/..., where the SDK goes by default).
  The key comes as the `x-goog-api-key` header or the `key=` query parameter: none is a 403
  PERMISSION_DENIED, a wrong one Google's 400 INVALID_ARGUMENT "API key not valid" (reason
  API_KEY_INVALID). A model it does not serve is a 404 NOT_FOUND naming it.
- The body is checked against the official SDK's types (google-genai: Content, Tool,
  ToolConfig, SafetySetting, GenerationConfig, which follow the REST resource with camelCase
  aliases and refuse unknown fields): a field they do not know is Google's 400 "Invalid JSON
  payload received. Unknown name ..." and lands in `invalid`. snake_case and camelCase keys are
  both accepted, as Google's JSON parser does.
- Structured output: generationConfig.responseMimeType "application/json" with responseSchema
  (the OpenAPI subset, checked by the SDK's Schema) or responseJsonSchema (JSON Schema, Gemini
  2.0+). `refuse_schema_keywords` makes it refuse keywords in either, as older API versions
  refused additionalProperties: a 400 naming the keyword.
- Embeddings: POST .../models/{model}:batchEmbedContents, {"embeddings": [{"values": [...]}]}.
- Function calling: functionDeclarations in, functionCall parts out (args an object), and
  functionResponse parts in the next turn.
- Every answer is built from the SDK's GenerateContentResponse (candidates, finishReason,
  usageMetadata promptTokenCount/candidatesTokenCount/totalTokenCount, modelVersion).
- Errors have Google's body {"error": {"code", "message", "status", "details"}}: 429
  RESOURCE_EXHAUSTED with a google.rpc.RetryInfo retryDelay (Google sends no Retry-After
  header: a rule's retry-after becomes the retryDelay), a rule without its own words Google's
  message for the status, 503 UNAVAILABLE "The model is overloaded.", a prompt over `set_context_window` the
  400 "The input token count (N) exceeds the maximum number of tokens allowed (M).".
- Safety: `block()` (a rule's finish_reason "content_filter") answers a candidate with
  finishReason SAFETY and no content, `block_prompt()` no candidate and promptFeedback.blockReason.
- `denied = True`: a valid key that may not call the API, Google's 403 PERMISSION_DENIED.

Tokens are counted as the OpenAI fake counts them (4 characters a token).
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from tests.fakellm import _request_text, _tokens
from tests.providers.base import Answer, ProviderServer, WireReply, WireRequest

DEFAULT_MODELS = ("gemini-2.5-flash", "gemini-2.5-pro", "gemini-2.0-flash", "gemini-embedding-001")
STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
MESSAGES = {
    400: "Request contains an invalid argument.",
    403: "Method doesn't allow unregistered callers (callers without established identity). "
    "Please use API Key or other form of API consumer identity to call this API.",
    429: "You exceeded your current quota, please check your plan and billing details. For more information "
    "on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
    500: "An internal error has occurred. Please retry or report in "
    "https://developers.generativeai.google/guide/troubleshooting",
    503: "The model is overloaded. Please try again later.",
    504: "Deadline expired before operation could complete.",
}
BAD_KEY = "API key not valid. Please pass a valid API key."
DENIED = (
    "Requests to this API generativelanguage.googleapis.com method "
    "google.ai.generativelanguage.v1beta.GenerativeService.GenerateContent are blocked."
)
# A rule's finish_reason for a refused prompt (no candidate at all); "content_filter" is a withheld answer.
PROMPT_BLOCKED = "prompt_blocked"
# The generateContent request body: its members and the SDK type each is checked against.
REQUEST_MEMBERS = {
    "contents": ("Content", True),
    "systemInstruction": ("Content", False),
    "generationConfig": ("GenerationConfig", False),
    "tools": ("Tool", True),
    "toolConfig": ("ToolConfig", False),
    "safetySettings": ("SafetySetting", True),
    "cachedContent": (None, False),
}
# An EmbedContentRequest in batchEmbedContents (ai.google.dev/api/embeddings).
EMBED_REQUEST_MEMBERS = {"model", "content", "taskType", "title", "outputDimensionality"}
SAFETY_RATINGS = [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True}]


class FakeGemini(ProviderServer):
    provider = "gemini"

    def __init__(self, host: str = "127.0.0.1", port: int = 0, api_key: str = "test-key") -> None:
        super().__init__(host, port)
        self.api_key = api_key
        self.models: set[str] = set(DEFAULT_MODELS)
        self.refuse_schema_keywords: set[str] = set()
        self.denied = False  # the key is valid but may not call the API (403)

    @property
    def url(self) -> str:
        """The api base litellm takes for a `gemini/` model (Google's own: .../v1beta)."""
        return f"{self.root}/v1beta"

    def reset(self) -> None:
        super().reset()
        self.models = set(DEFAULT_MODELS)
        self.refuse_schema_keywords = set()
        self.denied = False

    def posted(self, suffix: str = ":generateContent") -> list[WireRequest]:
        """The POSTs whose path ends with `suffix`, in order."""
        with self._lock:
            return [request for request in self.wire if request.method == "POST" and request.path.endswith(suffix)]

    # ---- scripting beyond the FakeLLM rules ---------------------------------

    def rate_limit(self, *, task: str | None = None, retry_delay: float | None = 1, times: int | None = None) -> None:
        """429 RESOURCE_EXHAUSTED, with google.rpc.RetryInfo {"retryDelay": "<retry_delay>s"} unless None."""
        headers = None if retry_delay is None else {"retry-after": f"{retry_delay:g}"}
        self.add_rule(task=task, status=429, headers=headers, times=times)

    def block(self, *, task: str | None = None, times: int | None = None) -> None:
        """The answer is withheld: a candidate with finishReason SAFETY and no content."""
        self.add_rule(task=task, times=times, finish_reason="content_filter")

    def block_prompt(self, *, task: str | None = None) -> None:
        """The prompt is refused: no candidate, promptFeedback.blockReason PROHIBITED_CONTENT."""
        self.add_rule(task=task, finish_reason=PROMPT_BLOCKED)

    # ---- HTTP ------------------------------------------------------------------

    def handle(self, request: WireRequest) -> WireReply | None:
        match = re.fullmatch(
            r"/(v1|v1beta)/models/([^/:]+):(generateContent|streamGenerateContent|batchEmbedContents)", request.path
        )
        if request.method == "GET" and request.path in ("/v1/models", "/v1beta/models"):
            refused = self._refused_key(request)
            return refused or WireReply(200, {"models": [_model_entry(name) for name in sorted(self.models)]})
        if request.method != "POST" or match is None:
            return error_reply(404, f"The requested URL {request.path} was not found on this server.")
        version, model, method = match.groups()
        refused = self._refused_key(request)
        if refused:
            return refused
        if model not in self.models:
            return error_reply(
                404,
                f"models/{model} is not found for API version {version}, or is not supported for {method}. "
                "Call ListModels to see the list of available models and their supported methods.",
            )
        if method == "batchEmbedContents":
            return self._embed(request, model)
        if method == "streamGenerateContent":
            self.refuse(["streamGenerateContent: the gateway never streams"])
            return error_reply(400, "The fake Gemini server answers generateContent only.")
        body, problem = canonical_request(request.body)
        if problem is None:
            problem = self._refused_keyword(body)
        else:
            self.refuse([problem])
        if problem is not None:
            return error_reply(400, problem)
        chat = openai_shaped(model, body)
        answer = self.think(request, chat)
        if answer is None:
            return None
        if not answer.ok:
            return self._error(answer, chat)
        if answer.finish_reason == PROMPT_BLOCKED:
            return WireReply(200, blocked_prompt_response(model, answer.prompt_tokens))
        if answer.finish_reason == "content_filter":
            return WireReply(200, blocked_response(model, answer.prompt_tokens))
        return WireReply(200, gemini_response(model, answer))

    def _embed(self, request: WireRequest, model: str) -> WireReply | None:
        """batchEmbedContents: {"requests": [{"model", "content", "taskType"?...}]} -> {"embeddings": [{"values"}]}."""
        from google.genai import types

        texts, problems = [], []
        for item in (request.body or {}).get("requests") or []:
            extra = set(item) - EMBED_REQUEST_MEMBERS
            if extra or item.get("model") != f"models/{model}":
                problems.append(f"batchEmbedContents: {sorted(extra)} / model {item.get('model')!r}")
                continue
            texts.append(_texts(types.Content.model_validate(item["content"]).model_dump(by_alias=True)))
        if problems or not texts:
            self.refuse(problems or ["batchEmbedContents: no requests"])
            return error_reply(400, "* BatchEmbedContentsRequest.requests: invalid")
        answer = self.think(request, {"model": model, "input": texts}, embeddings=True)
        if answer is None:
            return None
        if not answer.ok:
            return self._error(answer, {"messages": []})
        embeddings = [types.ContentEmbedding(values=vector) for vector in answer.vectors]
        return WireReply(200, {"embeddings": [e.model_dump(mode="json", exclude_none=True) for e in embeddings]})

    def _error(self, answer: Answer, chat: dict[str, Any]) -> WireReply:
        headers = {k: v for k, v in answer.headers.items() if k.lower() != "retry-after"}
        delay = next((v for k, v in answer.headers.items() if k.lower() == "retry-after"), None)
        message = answer.error_message
        if answer.error_code == "context_length_exceeded":
            tokens, limit = _tokens(_request_text(chat)), max(1, (self._context_window or 0) // 4)
            message = f"The input token count ({tokens}) exceeds the maximum number of tokens allowed ({limit})."
        elif re.fullmatch(r"Fake error \d+", message):  # a rule without its own words: Google's
            message = MESSAGES.get(answer.status, message)
        retry = f"{float(delay):g}s" if delay is not None else None
        return WireReply(answer.status, error_body(answer.status, message, retry_delay=retry), headers)

    def _refused_key(self, request: WireRequest) -> WireReply | None:
        key = request.headers.get("x-goog-api-key") or request.query.get("key")
        if not key:
            return error_reply(403, MESSAGES[403], reason="SERVICE_DISABLED")
        if key != self.api_key:
            return error_reply(400, BAD_KEY, reason="API_KEY_INVALID")
        if self.denied:
            return error_reply(403, DENIED, reason="API_KEY_SERVICE_BLOCKED")
        return None

    def _refused_keyword(self, body: dict[str, Any]) -> str | None:
        config = body.get("generationConfig") or {}
        for member, field in (("responseSchema", "response_schema"), ("responseJsonSchema", "response_json_schema")):
            found = _keywords(config.get(member)) & self.refuse_schema_keywords
            if found:
                name = sorted(found)[0]
                where = f"generation_config.{field}"
                return f"Invalid JSON payload received. Unknown name \"{name}\" at '{where}': Cannot find field."
        return None


# ---- requests ------------------------------------------------------------------


def canonical_request(body: Any) -> tuple[dict[str, Any], str | None]:
    """The body in camelCase, each member checked by the SDK's type; (body, None) or ({}, Google's 400 message)."""
    from google.genai import types

    if not isinstance(body, dict):
        return {}, "Invalid JSON payload received. Expected an object."
    canonical: dict[str, Any] = {}
    for key, value in body.items():
        member = _camel(key)
        if member not in REQUEST_MEMBERS:
            return {}, f'Invalid JSON payload received. Unknown name "{key}": Cannot find field.'
        type_name, repeated = REQUEST_MEMBERS[member]
        if type_name is None:
            canonical[member] = value
            continue
        model = getattr(types, type_name)
        items = value if repeated else [value]
        if not isinstance(items, list):
            return {}, f"Invalid value at '{_snake(member)}': expected a list."
        checked = []
        for item in items:
            try:
                checked.append(model.model_validate(item).model_dump(mode="json", by_alias=True, exclude_none=True))
            except Exception as error:  # pydantic.ValidationError: say where, in Google's words
                return {}, _validation_message(_snake(member), error)
        canonical[member] = checked if repeated else checked[0]
    if not canonical.get("contents"):
        return {}, "* GenerateContentRequest.contents: contents is not specified"
    return canonical, None


def _validation_message(member: str, error: Any) -> str:
    first = error.errors()[0] if hasattr(error, "errors") else {"loc": (), "type": "", "msg": str(error)}
    where = ".".join([member, *[str(part) for part in first["loc"][:-1]]])
    if first["type"] == "extra_forbidden":
        return f"Invalid JSON payload received. Unknown name \"{first['loc'][-1]}\" at '{where}': Cannot find field."
    return f"Invalid value at '{'.'.join([member, *map(str, first['loc'])])}': {first['msg']}"


def openai_shaped(model: str, body: dict[str, Any]) -> dict[str, Any]:
    """The generateContent request as the OpenAI-style body the FakeLLM rules look at."""
    messages: list[dict[str, Any]] = []
    if body.get("systemInstruction"):
        messages.append({"role": "system", "content": _texts(body["systemInstruction"])})
    for content in body["contents"]:
        parts = content.get("parts") or []
        calls = [part["functionCall"] for part in parts if "functionCall" in part]
        answers = [part["functionResponse"] for part in parts if "functionResponse" in part]
        for answer in answers:
            messages.append({"role": "tool", "name": answer.get("name"), "content": _tool_text(answer.get("response"))})
        if calls:
            tool_calls = [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {"name": c["name"], "arguments": json.dumps(c.get("args") or {})},
                }
                for i, c in enumerate(calls)
            ]
            messages.append({"role": "assistant", "content": _texts(content) or None, "tool_calls": tool_calls})
        elif not answers:
            messages.append(
                {"role": "assistant" if content.get("role") == "model" else "user", "content": _texts(content)}
            )
    shaped: dict[str, Any] = {"model": model, "messages": messages}
    declarations = [d for tool in body.get("tools") or [] for d in tool.get("functionDeclarations") or []]
    if declarations:
        shaped["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": d["name"],
                    "description": d.get("description", ""),
                    "parameters": d.get("parametersJsonSchema") or d.get("parameters") or {},
                },
            }
            for d in declarations
        ]
    config = body.get("generationConfig") or {}
    if config.get("maxOutputTokens"):
        shaped["max_tokens"] = config["maxOutputTokens"]
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    if config.get("responseMimeType") == "application/json":
        shaped["response_format"] = (
            {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
            if schema
            else {"type": "json_object"}
        )
    return shaped


def _tool_text(response: Any) -> str:
    """A functionResponse's `response` object as the tool message's text (litellm sends {"content": text})."""
    if isinstance(response, dict) and set(response) == {"content"} and isinstance(response["content"], str):
        return response["content"]
    return json.dumps(response)


def _texts(content: dict[str, Any]) -> str:
    return "\n".join(part["text"] for part in content.get("parts") or [] if "text" in part)


def _keywords(schema: Any) -> set[str]:
    """Every keyword used anywhere in a schema (property names excluded)."""
    found: set[str] = set()
    if isinstance(schema, dict):
        for key, value in schema.items():
            found.add(key)
            if key == "properties" and isinstance(value, dict):
                for sub in value.values():
                    found |= _keywords(sub)
            elif key not in ("enum", "required", "propertyOrdering", "default", "example"):
                found |= _keywords(value)
    elif isinstance(schema, list):
        for item in schema:
            found |= _keywords(item)
    return found


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


# ---- answers -------------------------------------------------------------------


def gemini_response(model: str, answer: Answer) -> dict[str, Any]:
    """The brain's answer as Gemini's GenerateContentResponse."""
    from google.genai import types

    parts = [types.Part(text=answer.text)] if answer.text else []
    for call in answer.tool_calls:
        parts.append(types.Part(function_call=types.FunctionCall(name=call["name"], args=call["arguments"])))
    finish = "MAX_TOKENS" if answer.finish_reason == "length" else "STOP"
    response = types.GenerateContentResponse(
        candidates=[types.Candidate(content=types.Content(role="model", parts=parts), finish_reason=finish, index=0)],
        usage_metadata=_usage(answer.prompt_tokens, answer.completion_tokens),
        model_version=model,
        response_id=uuid.uuid4().hex[:22],
    )
    return response.model_dump(mode="json", by_alias=True, exclude_none=True)


def blocked_response(model: str, prompt_tokens: int) -> dict[str, Any]:
    from google.genai import types

    response = types.GenerateContentResponse(
        candidates=[types.Candidate(finish_reason="SAFETY", index=0, safety_ratings=SAFETY_RATINGS)],
        usage_metadata=_usage(prompt_tokens, 0),
        model_version=model,
        response_id=uuid.uuid4().hex[:22],
    )
    return response.model_dump(mode="json", by_alias=True, exclude_none=True)


def blocked_prompt_response(model: str, prompt_tokens: int, reason: str = "PROHIBITED_CONTENT") -> dict[str, Any]:
    from google.genai import types

    response = types.GenerateContentResponse(
        prompt_feedback=types.GenerateContentResponsePromptFeedback(block_reason=reason),
        usage_metadata=_usage(prompt_tokens, 0),
        model_version=model,
        response_id=uuid.uuid4().hex[:22],
    )
    return response.model_dump(mode="json", by_alias=True, exclude_none=True)


def _usage(prompt: int, completion: int) -> Any:
    from google.genai import types

    return types.GenerateContentResponseUsageMetadata(
        prompt_token_count=prompt, candidates_token_count=completion, total_token_count=prompt + completion
    )


def error_body(
    status: int, message: str | None = None, *, reason: str | None = None, retry_delay: str | None = None
) -> dict[str, Any]:
    """Google's error body (google.rpc.Status), as the SDK's errors.APIError reads it."""
    details: list[dict[str, Any]] = []
    if reason:
        details.append(
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": "googleapis.com",
                "metadata": {"service": "generativelanguage.googleapis.com"},
            }
        )
    if status == 429:
        details.append(
            {
                "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                "violations": [
                    {"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests"}
                ],
            }
        )
        if retry_delay:
            details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay})
    body: dict[str, Any] = {
        "error": {
            "code": status,
            "message": message or MESSAGES.get(status, f"HTTP {status}"),
            "status": STATUSES.get(status, "UNKNOWN"),
        }
    }
    if details:
        body["error"]["details"] = details
    return body


def error_reply(status: int, message: str, *, reason: str | None = None) -> WireReply:
    return WireReply(status, error_body(status, message, reason=reason))


def _model_entry(name: str) -> dict[str, Any]:
    return {
        "name": f"models/{name}",
        "version": "001",
        "displayName": name,
        "inputTokenLimit": 1048576,
        "outputTokenLimit": 65536,
        "supportedGenerationMethods": ["embedContent"] if "embedding" in name else ["generateContent", "countTokens"],
    }

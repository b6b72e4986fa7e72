"""Anthropic's Messages API (POST /v1/messages), as its documentation describes it, for the tests.

Every request is checked against the `anthropic` SDK's own request type
(MessageCreateParamsNonStreaming, or the beta one when an `anthropic-beta` header asks for
betas) and every answer is built from its response types (Message, TextBlock, ToolUseBlock,
Usage), so a drift from the real wire format fails the tests that use this server.

What it does as the API does:
- `x-api-key` must be the server's key (401 authentication_error otherwise) and
  `anthropic-version` must be sent (400); a model it does not serve is a 404 not_found_error.
- Errors have Anthropic's body {"type": "error", "error": {"type", "message"}, "request_id"}
  and a `request-id` header; the brain's status picks the type (429 rate_limit_error, 529
  overloaded_error...), its rule's headers (retry-after) go along.
- A prompt over set_context_window() is a 400 "prompt is too long: N tokens > M maximum".
- Structured output: `output_config.format` (json_schema) answers JSON text; a forced tool
  (tool_choice {"type": "tool"}) answers a tool_use block whose input is the JSON. The
  legacy `output_format` parameter (the structured-outputs beta, replaced by
  output_config.format) is accepted with its beta header and counted in `.legacy`.
  `refuse_schema_keywords(...)` makes the server refuse schemas using those keywords with
  Anthropic's 400, as it does for keywords its structured outputs do not support.
- A rule's finish_reason "content_filter" is a refusal (stop_reason "refusal"), "length"
  is max_tokens.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import anthropic
from anthropic.types import Message, TextBlock, ToolUseBlock, Usage
from anthropic.types import message_create_params as params
from anthropic.types.beta import message_create_params as beta_params

from tests.providers.base import Answer, ProviderServer, WireReply, WireRequest, typed_problems

API_KEY = "sk-ant-test-key"
# Current models: Claude 4.7 and later took sampling parameters out of the API (and the SDK's
# request types have no temperature), so litellm drops the product's temperature for them.
MODELS = ("claude-sonnet-5", "claude-haiku-5-5")
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "content_filter": "refusal"}
LEGACY_BETA = "structured-outputs-2025-11-13"
# litellm's own name for the tool it forces for JSON; the server treats any forced tool alike.


class AnthropicServer(ProviderServer):
    provider = "anthropic"

    def __init__(self, host: str = "127.0.0.1", port: int = 0, latency: float = 0.0) -> None:
        super().__init__(host, port, latency)
        self.api_key = API_KEY
        self.models = set(MODELS)
        self.legacy: list[str] = []  # legacy parameters seen (output_format)
        self._refused_keywords: frozenset[str] = frozenset()

    @property
    def sdk_version(self) -> str:
        return anthropic.__version__

    def reset(self) -> None:
        super().reset()
        self.api_key = API_KEY
        self.models = set(MODELS)
        self.legacy = []
        self._refused_keywords = frozenset()

    def refuse_schema_keywords(self, *keywords: str) -> None:
        """Refuse structured-output schemas (output_config.format, or a forced tool's input_schema)
        that use any of these keywords, with Anthropic's 400."""
        self._refused_keywords = frozenset(keywords)

    # ---- the wire ----------------------------------------------------------------

    def handle(self, request: WireRequest) -> WireReply | None:
        if request.method != "POST" or request.path != "/v1/messages":
            return _error(404, "not_found_error", f"Not found: {request.method} {request.path}")
        if request.headers.get("x-api-key") != self.api_key:
            return _error(401, "authentication_error", "invalid x-api-key")
        if not request.headers.get("anthropic-version"):
            return _error(400, "invalid_request_error", "anthropic-version: header is required")
        body = dict(request.body or {})
        betas = [b.strip() for b in request.headers.get("anthropic-beta", "").split(",") if b.strip()]
        if "output_format" in body and LEGACY_BETA in betas:
            self.legacy.append("output_format")
            config = dict(body.get("output_config") or {})
            config["format"] = body.pop("output_format")
            body["output_config"] = config
        # What a model takes depends on the model (Claude 4.7 and later refuse temperature): an
        # unknown one is a 404 first.
        if isinstance(body.get("model"), str) and body["model"] not in self.models:
            return _error(404, "not_found_error", f"model: {body['model']}")
        expected = beta_params.MessageCreateParamsNonStreaming if betas else params.MessageCreateParamsNonStreaming
        problems = typed_problems(body, expected)
        if problems:
            self.refuse(problems)
            return _error(400, "invalid_request_error", "; ".join(problems[:3]))
        schema, forced = _wanted_schema(body)
        refused = sorted(_keywords(schema) & self._refused_keywords) if schema is not None else []
        if refused:
            where = "tools.input_schema" if forced else "output_config.format.schema"
            message = f"{where}: JSON schema keyword '{refused[0]}' is not supported"
            return _error(400, "invalid_request_error", message)
        answer = self.think(request, _chat_body(body, schema, forced))
        if answer is None:
            return None
        if not answer.ok:
            return _error_from(answer)
        return WireReply(200, _message(body, answer, forced), {"request-id": _request_id()})


def _wanted_schema(body: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """The JSON schema the answer must follow, and the forced tool's name when it goes through one."""
    fmt = (body.get("output_config") or {}).get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        return dict(fmt.get("schema") or {}), None
    choice = body.get("tool_choice") or {}
    if choice.get("type") == "tool":
        for tool in body.get("tools") or []:
            if tool.get("name") == choice["name"]:
                return dict(tool.get("input_schema") or {}), str(choice["name"])
    return None, None


def _keywords(schema: Any) -> set[str]:
    if isinstance(schema, dict):
        found = set(schema)
        for key, value in schema.items():
            if key != "properties":
                found |= _keywords(value)
            else:
                for prop in (value or {}).values():
                    found |= _keywords(prop)
        return found
    if isinstance(schema, list):
        return set().union(*(_keywords(item) for item in schema)) if schema else set()
    return set()


def _chat_body(body: dict[str, Any], schema: dict[str, Any] | None, forced: str | None) -> dict[str, Any]:
    """The OpenAI chat body that asks the brain what this Messages request asks."""
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        text = system if isinstance(system, str) else "\n".join(block.get("text", "") for block in system)
        messages.append({"role": "system", "content": text})
    for message in body["messages"]:
        messages.extend(_chat_messages(message))
    chat: dict[str, Any] = {"model": body["model"], "messages": messages, "max_tokens": body["max_tokens"]}
    tools = [
        {
            "type": "function",
            "function": {
                "name": tool["name"],
                "description": tool.get("description", ""),
                "parameters": tool.get("input_schema"),
            },
        }
        for tool in body.get("tools") or []
        if "input_schema" in tool and tool["name"] != forced
    ]
    if tools:
        chat["tools"] = tools
    if schema is not None:
        chat["response_format"] = {"type": "json_schema", "json_schema": {"name": forced or "output", "schema": schema}}
    return chat


def _chat_messages(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message["content"]
    if isinstance(content, str):
        return [{"role": message["role"], "content": content}]
    texts = [block["text"] for block in content if block.get("type") == "text"]
    if message["role"] == "assistant":
        calls = [
            {"id": b["id"], "type": "function", "function": {"name": b["name"], "arguments": json.dumps(b["input"])}}
            for b in content
            if b.get("type") == "tool_use"
        ]
        out: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) or None}
        if calls:
            out["tool_calls"] = calls
        return [out]
    results = [
        {"role": "tool", "tool_call_id": b["tool_use_id"], "content": _result_text(b.get("content"))}
        for b in content
        if b.get("type") == "tool_result"
    ]
    return results + ([{"role": "user", "content": "\n".join(texts)}] if texts else [])


def _result_text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(block.get("text", "")) for block in content if isinstance(block, dict))
    return "" if content is None else str(content)


def _message(body: dict[str, Any], answer: Answer, forced: str | None) -> dict[str, Any]:
    blocks: list[TextBlock | ToolUseBlock] = []
    stop = STOP_REASONS.get(answer.finish_reason, "end_turn")
    data = _json_object(answer.text) if forced and stop != "max_tokens" else None
    if data is not None:
        blocks.append(ToolUseBlock(type="tool_use", id=_tool_id(), name=str(forced), input=data))
        stop = "tool_use"
    elif answer.text:
        blocks.append(TextBlock(type="text", text=answer.text, citations=None))
    for call in answer.tool_calls:
        blocks.append(ToolUseBlock(type="tool_use", id=_tool_id(), name=call["name"], input=call["arguments"]))
    message = Message(
        id=f"msg_{uuid.uuid4().hex[:24]}",
        type="message",
        role="assistant",
        model=body["model"],
        content=blocks,
        stop_reason=stop,  # type: ignore[arg-type]
        stop_sequence=None,
        usage=Usage(input_tokens=answer.prompt_tokens, output_tokens=answer.completion_tokens),
    )
    return message.model_dump(mode="json", exclude_unset=True)


def _json_object(text: str | None) -> dict[str, Any] | None:
    try:
        data = json.loads(text or "")
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _error_from(answer: Answer) -> WireReply:
    if answer.error_code == "context_length_exceeded":
        # The brain's OpenAI wording holds both numbers: "... is 100 tokens. However, ... 250 tokens."
        numbers = [int(n) for n in re.findall(r"(\d+) tokens", answer.error_message)]
        limit, used = (numbers + [0, 0])[:2]
        return _error(400, "invalid_request_error", f"prompt is too long: {used} tokens > {limit} maximum")
    kind = ERROR_TYPES.get(answer.status, "api_error")
    return _error(answer.status, kind, answer.error_message, answer.headers)


def _error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> WireReply:
    request_id = _request_id()
    body = {"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id}
    return WireReply(status, body, {"request-id": request_id, **(headers or {})})


def _request_id() -> str:
    return f"req_{uuid.uuid4().hex[:24]}"


def _tool_id() -> str:
    return f"toolu_{uuid.uuid4().hex[:24]}"

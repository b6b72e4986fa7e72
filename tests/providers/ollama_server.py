"""Ollama's native API (github.com/ollama/ollama docs/api.md) for the test suite.

    fake = FakeOllama().start()      # litellm: model "ollama_chat/llama3.2", api_base fake.url
    fake.add_rule(task="judge", json={"score": 9, ...})   # the FakeLLM rules, as for the OpenAI fake

What it serves, as Ollama documents it:

- POST /api/chat, non-streaming (`"stream": false`; the gateway never streams): messages,
  `format` ("json" or a JSON Schema), `tools`, `options` (num_predict, temperature, num_ctx...).
  The body is checked against the official client's types (ollama: ChatRequest, Message, Tool,
  Options): a member they do not know lands in `invalid` (Ollama itself would ignore it, so a
  parameter litellm renamed would silently do nothing).
- The answer is the client's ChatResponse: message (content, or tool_calls with `arguments` an
  object), done, done_reason ("stop", "length" at num_predict), prompt_eval_count and
  eval_count (the tokens litellm reports), durations in nanoseconds.
- POST /api/show (litellm asks it whether a model takes tools: "tools" in its template),
  POST /api/embed (embeddings), GET /api/tags.
- Errors are Ollama's {"error": "..."}: a model not pulled is a 404 "model 'x' not found";
  `api_key` set (ollama.com, or a proxy in front of a server) makes a missing or wrong Bearer
  key a 401 "unauthorized"; `busy()` is the 503 of a full queue (OLLAMA_MAX_QUEUE); a `format`
  schema using one of `refuse_schema_keywords` is the 500 "invalid JSON schema in format"
  the grammar conversion fails with.
- Context: a prompt over `num_ctx` tokens is cut silently, as Ollama does by default
  (prompt_eval_count shows it); `context_errors = True` answers the 400 "the input length
  exceeds the context length" instead, as Ollama does for models whose template it renders
  itself, or with "truncate": false.

Tokens are counted as the OpenAI fake counts them (4 characters a token).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from tests.fakellm import _request_text, _tokens
from tests.providers.base import Answer, ProviderServer, WireReply, WireRequest

DEFAULT_MODELS = ("llama3.2", "llama3.2:latest", "qwen2.5:7b", "qwen2.5:0.5b", "nomic-embed-text")
NO_TOOLS = ("qwen2.5:0.5b",)  # a template without tools: litellm is told they are not supported
BUSY = "server busy, please try again.  maximum pending requests exceeded"
BAD_SCHEMA = "invalid JSON schema in format"
TOO_LONG = "the input length exceeds the context length"


class FakeOllama(ProviderServer):
    provider = "ollama"

    def __init__(self, host: str = "127.0.0.1", port: int = 0, api_key: str | None = None) -> None:
        super().__init__(host, port)
        self.api_key = api_key
        self.models: set[str] = set(DEFAULT_MODELS)
        self.refuse_schema_keywords: set[str] = set()
        self.num_ctx: int | None = None  # the context, in tokens (Ollama's own option name)
        self.context_errors = False

    @property
    def url(self) -> str:
        """The api base litellm takes for an `ollama_chat/` model (Ollama's own: http://host:11434)."""
        return self.root

    def reset(self) -> None:
        super().reset()
        self.models = set(DEFAULT_MODELS)
        self.refuse_schema_keywords = set()
        self.num_ctx = None
        self.context_errors = False
        self.api_key = None

    def posted(self, suffix: str = "/api/chat") -> list[WireRequest]:
        """The POSTs whose path ends with `suffix`, in order."""
        with self._lock:
            return [request for request in self.wire if request.method == "POST" and request.path.endswith(suffix)]

    def busy(self, *, task: str | None = None, times: int | None = None) -> None:
        """503: the server's request queue is full."""
        self.add_rule(task=task, status=503, error=BUSY, times=times)

    # ---- HTTP ------------------------------------------------------------------

    def handle(self, request: WireRequest) -> WireReply | None:
        if self.api_key is not None and request.headers.get("authorization") != f"Bearer {self.api_key}":
            return WireReply(401, {"error": "unauthorized"})
        if request.method == "GET" and request.path == "/api/tags":
            return WireReply(200, {"models": [_tag(name) for name in sorted(self.models)]})
        if request.method != "POST" or request.path not in ("/api/chat", "/api/show", "/api/embed"):
            return WireReply(404, {"error": "404 page not found"})
        body = request.body if isinstance(request.body, dict) else {}
        model = str(body.get("model") or body.get("name") or "")
        problem = self._checked(request.path, body)
        if problem is not None:
            self.refuse([problem])
            return WireReply(400, {"error": problem})
        if _bare(model) not in {_bare(name) for name in self.models}:
            return WireReply(404, {"error": f"model '{model}' not found"})
        if request.path == "/api/show":
            return WireReply(200, _show(model))
        if request.path == "/api/embed":
            return self._embed(request, body)
        if _keywords(body.get("format")) & self.refuse_schema_keywords:
            return WireReply(500, {"error": BAD_SCHEMA})
        chat = openai_shaped(body)
        prompt_tokens = _tokens(_request_text(chat))
        if self.num_ctx is not None and prompt_tokens > self.num_ctx and self.context_errors:
            return WireReply(400, {"error": TOO_LONG})
        answer = self.think(request, chat)
        if answer is None:
            return None
        if not answer.ok:
            message = answer.error_message
            if re.fullmatch(r"Fake error \d+", message):  # a rule without its own words: Ollama's
                message = _STATUS_TEXT.get(answer.status, message)
            return WireReply(answer.status, {"error": message}, answer.headers)
        if self.num_ctx is not None:
            answer.prompt_tokens = min(answer.prompt_tokens, self.num_ctx)  # cut from the front, without a word
        return WireReply(200, ollama_response(model, answer))

    def _checked(self, path: str, body: dict[str, Any]) -> str | None:
        """None when the body follows the client's request type for `path`, else why not."""
        from ollama import _types

        kind = {"/api/chat": _types.ChatRequest, "/api/show": None, "/api/embed": _types.EmbedRequest}[path]
        if kind is None:
            return None if set(body) <= {"model", "name", "verbose"} else f"/api/show: unknown members {sorted(body)}"
        unknown = set(body) - set(kind.model_fields)
        if unknown:
            return f"{path}: members the ollama client does not know: {sorted(unknown)}"
        try:
            request = kind.model_validate(body)
            for message in body.get("messages") or []:
                _types.Message.model_validate(message)
            if isinstance(body.get("options"), dict):
                extra = set(body["options"]) - set(_types.Options.model_fields)
                if extra:
                    return f"{path}: options Ollama does not know: {sorted(extra)}"
                _types.Options.model_validate(body["options"])
        except Exception as error:  # pydantic.ValidationError
            return f"{path}: {error}"
        if path == "/api/chat" and request.stream is not False:
            return "/api/chat: the gateway must not stream (stream is not false)"
        return None

    def _embed(self, request: WireRequest, body: dict[str, Any]) -> WireReply | None:
        from ollama import _types

        texts = body.get("input") or []
        texts = [texts] if isinstance(texts, str) else [str(text) for text in texts]
        answer = self.think(request, {"model": body["model"], "input": texts}, embeddings=True)
        if answer is None:
            return None
        if not answer.ok:
            return WireReply(answer.status, {"error": answer.error_message}, answer.headers)
        response = _types.EmbedResponse(
            model=body["model"],
            embeddings=answer.vectors,
            total_duration=1_000_000,
            load_duration=100_000,
            prompt_eval_count=answer.prompt_tokens,
        )
        return WireReply(200, response.model_dump(mode="json", exclude_none=True))


_STATUS_TEXT = {
    400: "invalid request",
    401: "unauthorized",
    429: "too many requests",
    500: "an error was encountered while running the model",
    502: "bad gateway",
    503: BUSY,
}


def openai_shaped(body: dict[str, Any]) -> dict[str, Any]:
    """The /api/chat request as the OpenAI-style body the FakeLLM rules look at."""
    messages = []
    for message in body.get("messages") or []:
        shaped: dict[str, Any] = {"role": message.get("role"), "content": message.get("content") or ""}
        if message.get("tool_calls"):
            shaped["tool_calls"] = [
                {
                    "id": call.get("id") or f"call_{i}",
                    "type": "function",
                    "function": {
                        "name": call["function"]["name"],
                        "arguments": json.dumps(call["function"]["arguments"]),
                    },
                }
                for i, call in enumerate(message["tool_calls"])
            ]
        messages.append(shaped)
    shaped_body: dict[str, Any] = {"model": body["model"], "messages": messages}
    if body.get("tools"):
        shaped_body["tools"] = body["tools"]
    options = body.get("options") or {}
    if options.get("num_predict"):
        shaped_body["max_tokens"] = options["num_predict"]
    fmt = body.get("format")
    if fmt == "json":
        shaped_body["response_format"] = {"type": "json_object"}
    elif isinstance(fmt, dict):
        shaped_body["response_format"] = {"type": "json_schema", "json_schema": {"name": "answer", "schema": fmt}}
    return shaped_body


def ollama_response(model: str, answer: Answer) -> dict[str, Any]:
    """The brain's answer as the ollama client's ChatResponse."""
    from ollama import _types

    calls = [
        _types.Message.ToolCall(
            function=_types.Message.ToolCall.Function(name=call["name"], arguments=call["arguments"])
        )
        for call in answer.tool_calls
    ]
    message = _types.Message(role="assistant", content=answer.text or "", tool_calls=calls or None)
    prompt, completion = answer.prompt_tokens, answer.completion_tokens
    response = _types.ChatResponse(
        model=model,
        created_at=datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        message=message,
        done=True,
        done_reason="length" if answer.finish_reason == "length" else "stop",
        total_duration=(prompt + completion) * 1_000_000,
        load_duration=1_000_000,
        prompt_eval_count=prompt,
        prompt_eval_duration=prompt * 100_000,
        eval_count=completion,
        eval_duration=completion * 1_000_000,
    )
    return response.model_dump(mode="json", exclude_none=True)


def _show(model: str) -> dict[str, Any]:
    from ollama import _types

    tools = _bare(model) not in {_bare(name) for name in NO_TOOLS}
    template = "{{- if .Tools }}{{ .Tools }}{{ end }}{{ .Prompt }}" if tools else "{{ .System }} {{ .Prompt }}"
    response = _types.ShowResponse(
        modelfile=f"FROM {model}",
        parameters="temperature 0.8",
        template=template,
        details=_types.ModelDetails(format="gguf", family="llama", parameter_size="3.2B", quantization_level="Q4_K_M"),
        model_info={"general.architecture": "llama", "llama.context_length": 131072},
        capabilities=["completion", "tools"] if tools else ["completion"],
    )
    return response.model_dump(mode="json", by_alias=True, exclude_none=True)


def _tag(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "model": name,
        "modified_at": "2026-01-01T00:00:00Z",
        "size": 2019393189,
        "digest": "a80c4f17acd5",
    }


def _bare(name: str) -> str:
    return name.removesuffix(":latest")


def _keywords(schema: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(schema, dict):
        for key, value in schema.items():
            found.add(key)
            if key == "properties" and isinstance(value, dict):
                for sub in value.values():
                    found |= _keywords(sub)
            elif key not in ("enum", "required", "default"):
                found |= _keywords(value)
    elif isinstance(schema, list):
        for item in schema:
            found |= _keywords(item)
    return found

"""What every provider server shares: tests/fakellm.py's brain behind a provider's own wire format.

A provider server is a FakeLLM (its rules, recorded requests, latency, context window and
counters all work as they do there) with an HTTP front that speaks one provider's API. Each
request it receives is

1. checked against the provider SDK's own request type (`typed_problems`), a request that
   does not fit is refused with a 400 in the provider's error shape and kept in `.invalid`
   (the tests' fixtures fail on it), so a server that drifts from the real wire format, or
   a litellm that sends something the provider would refuse, fails its tests;
2. translated into the OpenAI chat body the brain understands (`think`), which picks the
   rule, waits, records the request (the OpenAI-shaped body; the provider's own is in
   `.wire`) and answers: an `Answer`;
3. translated back into the provider's response, built from the SDK's response types.

    class MyServer(ProviderServer):
        provider = "myprovider"

        def handle(self, request: WireRequest) -> WireReply | None:
            chat = {...OpenAI chat body made from request.body...}
            answer = self.think(request, chat)
            if answer is None:
                return None  # the client hung up
            return WireReply(answer.status, {...})

Rules are scripted in the brain's own terms (FakeLLM.add_rule): `status=429,
headers={"retry-after": "1"}` becomes the provider's rate-limit error, `code=...` picks the
provider's error kind where a status has several, `finish_reason="content_filter"` its
refusal, `json=` / `tool_calls=` its structured answer and tool use.
"""

from __future__ import annotations

import base64
import json
import socket
import struct
import threading
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import typing_extensions as te

from tests.fakellm import FakeLLM

CHAT_PATH = "/v1/chat/completions"
EMBEDDINGS_PATH = "/v1/embeddings"


@dataclass
class WireRequest:
    """One HTTP request as the provider saw it. `headers` keys are lower case; `query` holds
    each parameter's first value; `body` is the decoded JSON (None when there was none)."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    connection: socket.socket | None = None


@dataclass
class WireReply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Answer:
    """The brain's answer to one chat (or embeddings) request, in provider-neutral terms.

    status 200: text, tool_calls ([{"id", "name", "arguments": dict}]), finish_reason
    ("stop" | "length" | "tool_calls" | a rule's own, e.g. "content_filter"), token counts,
    and for embeddings `vectors`. Otherwise an error: error_message, error_code (a rule's
    `code`, or OpenAI's kind for the status) and the rule's headers (retry-after...)."""

    status: int
    headers: dict[str, str]
    raw: dict[str, Any]
    text: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""
    vectors: list[list[float]] = field(default_factory=list)
    error_message: str = ""
    error_code: str = ""

    @property
    def ok(self) -> bool:
        return self.status == 200


class ProviderServer(FakeLLM):
    """A FakeLLM behind a provider's wire format; subclasses implement `handle`."""

    provider = "provider"

    def __init__(self, host: str = "127.0.0.1", port: int = 0, latency: float = 0.0) -> None:
        super().__init__(host, port, latency)
        self.wire: list[WireRequest] = []  # every request received, as sent
        self.invalid: list[str] = []  # why requests did not fit the SDK's request types

    @property
    def root(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> ProviderServer:
        self._server = ThreadingHTTPServer((self.host, self.port), _make_handler(self))
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        name = f"{self.provider}-server"
        self._thread = threading.Thread(target=self._server.serve_forever, name=name, daemon=True)
        self._thread.start()
        return self

    def reset(self) -> None:
        super().reset()
        with self._lock:
            self.wire = []
            self.invalid = []

    # ---- for subclasses ---------------------------------------------------------

    def handle(self, request: WireRequest) -> WireReply | None:
        """The provider's reply to one request; None when the client has gone."""
        raise NotImplementedError

    def refuse(self, problems: list[str]) -> None:
        """Keep request-shape problems for the tests to see (call before answering a 400)."""
        with self._lock:
            self.invalid.extend(problems)

    def think(self, request: WireRequest, chat: dict[str, Any], *, embeddings: bool = False) -> Answer | None:
        """Ask the brain: `chat` is an OpenAI chat (or embeddings) body. None: the client hung up."""
        path = EMBEDDINGS_PATH if embeddings else CHAT_PATH
        reply = self.respond(path, request.headers, chat, request.connection)  # type: ignore[arg-type]
        if reply is None:
            return None
        return answer_from(reply.status, reply.body, reply.headers)


def answer_from(status: int, body: dict[str, Any], headers: dict[str, str]) -> Answer:
    answer = Answer(status=status, headers=dict(headers), raw=body)
    if status != 200:
        error = body.get("error") or {}
        answer.error_message = str(error.get("message") or "")
        answer.error_code = str(error.get("code") or error.get("type") or "")
        return answer
    usage = body.get("usage") or {}
    answer.prompt_tokens = int(usage.get("prompt_tokens") or 0)
    answer.completion_tokens = int(usage.get("completion_tokens") or 0)
    answer.model = str(body.get("model") or "")
    if body.get("object") == "list":  # embeddings
        answer.vectors = [_floats(item["embedding"]) for item in body.get("data") or []]
        return answer
    choice = body["choices"][0]
    message = choice["message"]
    answer.text = message.get("content")
    answer.finish_reason = str(choice.get("finish_reason") or "stop")
    for call in message.get("tool_calls") or []:
        try:
            arguments = json.loads(call["function"]["arguments"] or "{}")
        except ValueError:
            arguments = {"_raw": call["function"]["arguments"]}
        answer.tool_calls.append({"id": call["id"], "name": call["function"]["name"], "arguments": arguments})
    return answer


def _floats(embedding: Any) -> list[float]:
    if isinstance(embedding, str):  # base64 float32, as the OpenAI SDK asks for
        raw = base64.b64decode(embedding)
        return list(struct.unpack(f"<{len(raw) // 4}f", raw))
    return list(embedding)


# ---- checking a JSON body against an SDK's TypedDict request types -----------------------


def typed_problems(value: Any, expected: Any, where: str = "body") -> list[str]:
    """Why `value` (decoded JSON) does not fit the SDK type `expected` (TypedDicts, unions,
    literals, iterables...): unknown keys, missing required keys, wrong types. Empty: it fits.

    Stricter than pydantic's TypeAdapter on the SDKs' TypedDicts, which ignores unknown keys
    and validates an Iterable field only when it is iterated."""
    origin = te.get_origin(expected)
    args = te.get_args(expected)
    if expected is Any or expected is object:
        return []
    if origin is typing.Annotated or origin in (te.Required, te.NotRequired):
        return typed_problems(value, args[0], where)
    if expected is None or expected is type(None):
        return [] if value is None else [f"{where}: expected null, got {value!r:.60}"]
    if origin is typing.Union or origin is types.UnionType:
        return _union_problems(value, args, where)
    if origin is te.Literal:
        return [] if value in args else [f"{where}: {value!r:.60} is not one of {list(args)}"]
    if te.is_typeddict(expected):
        return _typeddict_problems(value, expected, where)
    if isinstance(expected, typing.TypeVar) or isinstance(expected, typing.ForwardRef):
        return []
    container = origin or expected
    if container in (dict, Mapping) or (isinstance(container, type) and issubclass(container, Mapping)):
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {type(value).__name__}"]
        item = args[1] if len(args) == 2 else Any
        return [p for key, v in value.items() for p in typed_problems(v, item, f"{where}.{key}")]
    if container in (list, tuple, Iterable, Sequence) or (
        isinstance(container, type) and issubclass(container, Iterable) and container not in (str, bytes)
    ):
        if not isinstance(value, list):
            return [f"{where}: expected an array, got {type(value).__name__}"]
        item = args[0] if args else Any
        return [p for i, v in enumerate(value) for p in typed_problems(v, item, f"{where}[{i}]")]
    if expected is bool:
        return [] if isinstance(value, bool) else [f"{where}: expected a boolean, got {value!r:.60}"]
    if expected in (int, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        ok = ok and (expected is float or isinstance(value, int) or float(value).is_integer())
        return [] if ok else [f"{where}: expected a number, got {value!r:.60}"]
    if expected is str:
        return [] if isinstance(value, str) else [f"{where}: expected a string, got {value!r:.60}"]
    if isinstance(expected, type) and expected.__name__ == "SequenceNotStr":
        return typed_problems(value, list[args[0]] if args else list, where)
    return []  # a type JSON cannot carry (files, binary): not checked


def _union_problems(value: Any, options: tuple[Any, ...], where: str) -> list[str]:
    found: list[list[str]] = []
    for option in options:
        problems = typed_problems(value, option, where)
        if not problems:
            return []
        found.append(problems)
    # A tagged union: report the branch whose "type" literal matches, else the closest.
    if isinstance(value, dict) and "type" in value:
        for option, problems in zip(options, found, strict=True):
            if _tag_of(option) == value["type"]:
                return problems
    # Else the closest of the branches of the value's own kind (object, array, string...).
    same_kind = [problems for problems in found if not problems[0].startswith(f"{where}: expected")]
    return min(same_kind or found, key=len) if found else [f"{where}: no type fits"]


def _tag_of(option: Any) -> Any:
    if not te.is_typeddict(option):
        return None
    hint = _hints(option).get("type")
    while hint is not None and te.get_origin(hint) in (
        te.Required,
        te.NotRequired,
        typing.Annotated,
    ):
        hint = te.get_args(hint)[0]
    if te.get_origin(hint) is te.Literal and len(te.get_args(hint)) == 1:
        return te.get_args(hint)[0]
    return None


def _typeddict_problems(value: Any, expected: Any, where: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{where}: expected an object ({expected.__name__}), got {type(value).__name__}"]
    hints = _hints(expected)
    problems = [f"{where}.{key}: not a field of {expected.__name__}" for key in value if key not in hints]
    for key, hint in hints.items():
        required = te.get_origin(hint) is te.Required or (
            expected.__total__ and te.get_origin(hint) is not te.NotRequired
        )
        if key not in value:
            if required:
                problems.append(f"{where}.{key}: required by {expected.__name__}, missing")
            continue
        problems.extend(typed_problems(value[key], hint, f"{where}.{key}"))
    return problems


_HINTS: dict[Any, dict[str, Any]] = {}


def _hints(typed_dict: Any) -> dict[str, Any]:
    if typed_dict not in _HINTS:
        _HINTS[typed_dict] = te.get_type_hints(typed_dict, include_extras=True)
    return _HINTS[typed_dict]


# ---- HTTP plumbing -----------------------------------------------------------------------


def _make_handler(server: ProviderServer) -> type[BaseHTTPRequestHandler]:
    class ProviderHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # see tests/fakellm.py

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def _serve(self, method: str) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = {"_not_json": raw.decode(errors="replace")[:200]}
            request = WireRequest(
                method=method,
                path=parts.path.rstrip("/") or "/",
                query={k: v[0] for k, v in parse_qs(parts.query).items()},
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
                connection=self.connection,
            )
            with server._lock:
                server.wire.append(request)
            reply = server.handle(request)
            if reply is None:
                self.close_connection = True
                return
            self._send(reply)

        def _send(self, reply: WireReply) -> None:
            payload = json.dumps(reply.body).encode()
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except OSError:
                self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return ProviderHandler

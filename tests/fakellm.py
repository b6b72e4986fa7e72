"""An OpenAI-compatible fake LLM server for the test suite, benchmarks and demos.

It is a real HTTP server, so the gateway's real litellm client, HTTP, JSON
parsing, timeout and retry paths all run against it. Tests script it with
rules (answer this, fail with 429, hang, return broken JSON) and read its
counters (requests seen, peak concurrency per run).

    fake = FakeLLM().start()
    fake.add_rule(task="judge", status=429, headers={"Retry-After": "0"}, times=2)
    ...
    fake.stop()

Standalone: python tests/fakellm.py --port 8765 --latency 0.2

Where it follows a real server (llama-cpp-python's `llama_cpp.server` with SmolLM2, as
measured by tests/realmodel/), by default or with `set_server("llama.cpp")`:

- max_tokens is honoured: an answer longer than it is cut there, with finish_reason
  "length" and completion_tokens == max_tokens (both servers do this);
  `runaway=True` scripts a model that opens JSON and never closes it, as SmolLM2 does.
- Errors have OpenAI's body {"error": {"message", "type", "param", "code"}}; a prompt over
  set_context_window() gets OpenAI's 400 context_length_exceeded (llama.cpp's too); under
  it, llama.cpp silently lowers max_tokens to the room the context has left after the prompt.
- llama.cpp only: response_format json_schema is a 500 whose message holds a Python
  path; json_object with a "schema" member is accepted (and enforced by the real one);
  embeddings are a 500 "Llama model must be created with embedding=True"; it serves one
  request at a time (the others queue on the server) and keeps generating an answer
  after its client has gone, holding the server that long.
- Tools are accepted by both; the fake calls one only when a rule says so, and
  llama.cpp's small model ignores them: without a rule the fake ignores them too.

Differences that remain: tokens are counted as 4 characters each (llama.cpp counts the
model's tokens, chat template included, so its prompt_tokens are larger); answers are
scripted, never generated; the OpenAI profile accepts every response_format, where
OpenAI itself refuses a non-strict schema marked strict; latency is what set_latency()
says, not a function of the answer's length.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import json
import math
import re
import select
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# A hanging request gives up after this long even if nobody stops it, so a
# forgotten test can never keep a thread alive for good.
HANG_LIMIT_SECONDS = 120.0
EMBEDDING_DIMENSIONS = 16
JUDGE_DEFAULT = {"score": 8, "verdict": "Correct", "reasoning": "The answer matches the expected answer."}
TRACE_PREFIX = "x-evalsite-"
# llama-cpp-python's own words for what it cannot do (its 500 bodies).
LLAMA_NO_EMBEDDINGS = "Llama model must be created with embedding=True to call this method"
LLAMA_JSON_SCHEMA_ERROR = (
    "1 validation error for CreateChatCompletionRequest: response_format.type Input should be 'text' or "
    "'json_object' (/usr/lib/python3/site-packages/llama_cpp/server/types.py)"
)
# A runaway answer with no max_tokens stops where the model's context would be full.
RUNAWAY_TOKENS = 2048
# A judge answer that contradicts its score, as SmolLM2's did (issue 33): add_rule(json=...).
CONTRADICTING_JUDGE = {"score": 0, "reasoning": "This is a very detailed and accurate answer."}
# A JSON template in the prompt, "reasoning": "<2-4 short sentences: ...>", that a placeholder answer echoes.
_PROMPT_TEMPLATE_FIELD = re.compile(r'"(\w+)":\s*"(<[^"]*>)"')

Handler = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass
class Rule:
    """One scripted behaviour; see FakeLLM.add_rule for the meaning of each field."""

    task: str | None = None
    contains: str | None = None
    regex: str | None = None
    reply: str | None = None
    json: Any = None
    tool_calls: list[dict[str, Any]] | None = None
    status: int | None = None
    error: str | None = None
    code: str | None = None
    headers: dict[str, str] | None = None
    delay: float = 0.0
    hang: bool = False
    broken_json: bool = False
    runaway: bool = False
    placeholder: bool = False
    finish_reason: str | None = None
    times: int | None = None
    handler: Handler | None = None
    fired: int = 0

    def matches(self, task: str, text: str) -> bool:
        if self.times is not None and self.fired >= self.times:
            return False
        if self.task is not None and self.task != task:
            return False
        if self.contains is not None and self.contains not in text:
            return False
        return self.regex is None or re.search(self.regex, text) is not None


@dataclass
class RecordedRequest:
    """What the fake saw. `headers` keys are lower case; `trace` holds the X-Evalsite-* headers
    other than Task, keyed like the gateway's trace dict (lower case, underscores)."""

    path: str
    task: str
    headers: dict[str, str]
    trace: dict[str, str]
    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    body: dict[str, Any]
    time_in: float
    time_out: float | None = None
    status: int | None = None
    response: dict[str, Any] | None = None  # the body the fake answered with
    # Ordering numbers from one counter, so concurrency is computed without clock ties.
    seq_in: int = 0
    seq_out: int | None = None
    seq_start: int | None = None  # when the server began on it (llama.cpp queues requests first)
    peer: str = ""  # the client's address (which worker host sent it)

    @property
    def text(self) -> str:
        return _request_text(self.body)


@dataclass
class _Reply:
    status: int = 200
    body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


class FakeLLM:
    def __init__(self, host: str = "127.0.0.1", port: int = 0, latency: float = 0.0) -> None:
        self.host = host
        self.port = port
        self._latency = self._base_latency = latency
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._generation = 0
        self._seq = 0
        self._rules: list[Rule] = []
        self._requests: list[RecordedRequest] = []
        self._models_reads = 0  # GET /v1/models, the model identity's metadata reads
        self._context_window: int | None = None
        self._kind = "openai"
        self._identities: dict[str, dict[str, Any]] = {}
        self._serial = threading.Lock()  # llama.cpp: one request generates at a time
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle -------------------------------------------------------

    @property
    def url(self) -> str:
        """The api base to hand to litellm (`openai/<model>` route)."""
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> FakeLLM:
        self._server = ThreadingHTTPServer((self.host, self.port), _make_handler(self))
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="fakellm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # releases hanging requests
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def reset(self) -> None:
        """Forget rules, requests, latency, server kind and context window; release requests still hanging."""
        with self._lock:
            self._generation += 1
            self._rules = []
            self._requests = []
            self._models_reads = 0
            self._latency = self._base_latency
            self._context_window = None
            self._kind = "openai"
            self._identities = {}

    def clear_rules(self) -> None:
        """Forget the rules not yet used up; requests (and those still hanging) are kept."""
        with self._lock:
            self._rules = []

    # ---- scripting -------------------------------------------------------

    def add_rule(
        self,
        *,
        task: str | None = None,
        contains: str | None = None,
        regex: str | None = None,
        reply: str | None = None,
        json: Any = None,
        tool_calls: list[dict[str, Any]] | None = None,
        status: int | None = None,
        error: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
        delay: float = 0.0,
        hang: bool = False,
        broken_json: bool = False,
        runaway: bool = False,
        placeholder: bool = False,
        finish_reason: str | None = None,
        times: int | None = None,
        handler: Handler | None = None,
    ) -> Rule:
        """Script a response. The first rule whose task/contains/regex all match wins.

        reply: assistant text. json: object sent as the JSON text of the answer.
        tool_calls: [{"name", "arguments": dict | str, "id"?}]. status: answer with an
        OpenAI-style error body (`error` overrides its message, e.g. a context-length
        text; `code` its error code, e.g. "context_length_exceeded"). headers: extra
        response headers (Retry-After). delay: seconds before answering. hang: never
        answer until the client disconnects, reset()/stop() or HANG_LIMIT_SECONDS.
        broken_json: answer truncated JSON. runaway: open a JSON object and never close it,
        until max_tokens cuts it (finish_reason "length"). placeholder: answer JSON that echoes
        the request's schema descriptions, or the prompt's own "<...>" templates (as a small model
        does), each string field so; `json` gives the other fields (placeholder=True,
        json={"score": 10}). finish_reason: answer with it ("length": the answer ended at its
        token limit, completion_tokens = max_tokens). times: fire at most N times, then skip.
        handler(request) -> dict of the same keys, computed per call.
        """
        rule = Rule(
            task=task,
            contains=contains,
            regex=regex,
            reply=reply,
            json=json,
            tool_calls=tool_calls,
            status=status,
            error=error,
            code=code,
            headers=headers,
            delay=delay,
            hang=hang,
            broken_json=broken_json,
            runaway=runaway,
            placeholder=placeholder,
            finish_reason=finish_reason,
            times=times,
            handler=handler,
        )
        with self._lock:
            self._rules.append(rule)
        return rule

    def set_latency(self, seconds: float) -> None:
        """Delay every answer by this many seconds (on top of a rule's delay)."""
        self._latency = seconds

    def set_server(self, kind: str) -> None:
        """ "openai" (the default) or "llama.cpp": see the module docstring for what changes."""
        assert kind in ("openai", "llama.cpp"), kind
        self._kind = kind

    def set_model_identity(
        self,
        model: str,
        *,
        reported: str | None = None,
        system_fingerprint: str | None = None,
        meta: dict[str, Any] | None = None,
        vocabulary: int | None = None,
    ) -> None:
        """What the server says it runs behind the name `model` (as requested, without "openai/"):
        the completion's `model` field (`reported`; by default the requested name, as now), its
        `system_fingerprint` (none by default), the /v1/models entry's `meta` (llama.cpp's
        n_params, size...) and, with `vocabulary`, llama-cpp-python's POST /extras/tokenize
        (token ids that depend on it; 404 without). Call again to swap the model behind one alias."""
        self._identities[model] = {
            "reported": reported,
            "system_fingerprint": system_fingerprint,
            "meta": meta,
            "vocabulary": vocabulary,
        }

    def tokenize(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """POST /extras/tokenize, as llama-cpp-python answers it: None when no vocabulary is set."""
        identity = self._identities.get(str(body.get("model") or ""))
        if identity is None or not identity["vocabulary"]:
            return None
        words = re.findall(r"\w+|[^\w\s]", str(body.get("input") or ""))
        size = identity["vocabulary"]
        return {"tokens": [int(hashlib.sha256(w.encode()).hexdigest(), 16) % size for w in words]}

    def set_context_window(self, chars: int | None) -> None:
        """Refuse chat requests whose message text is longer than `chars` with OpenAI's 400."""
        self._context_window = chars

    # ---- counters --------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def models_reads(self) -> int:
        """GET /v1/models requests seen (llm/identity.py reads the server's model metadata)."""
        with self._lock:
            return self._models_reads

    @property
    def in_flight(self) -> int:
        with self._lock:
            return sum(1 for r in self._requests if r.seq_out is None)

    def count(self, task: str | None = None, **trace: str | int) -> int:
        """Requests seen, optionally only those with this task and these trace values (run=3, case=7)."""
        return len(self._filtered(task, trace))

    def peak_concurrency(self, task: str | None = None, run: str | int | None = None) -> int:
        """Most requests in flight at once, optionally only those of one task and/or run."""
        chosen = self._filtered(task, {} if run is None else {"run": run})
        # Sequence numbers are unique, so sorting the +1/-1 events never has to break ties.
        events = sorted([(r.seq_in, 1) for r in chosen] + [(r.seq_out, -1) for r in chosen if r.seq_out is not None])
        peak = current = 0
        for _, step in events:
            current += step
            peak = max(peak, current)
        return peak

    def _filtered(self, task: str | None, trace: dict[str, str | int]) -> list[RecordedRequest]:
        wanted = {key.lower(): str(value) for key, value in trace.items()}
        return [
            r
            for r in self.requests
            if (task is None or r.task == task) and all(r.trace.get(k) == v for k, v in wanted.items())
        ]

    # ---- request handling (called from server threads) -------------------

    def _begin(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[RecordedRequest, int]:
        lowered = {k.lower(): v for k, v in headers.items()}
        # X-Evalsite-Repeat-No comes back as trace["repeat_no"], the key the gateway was given.
        trace = {k[len(TRACE_PREFIX) :].replace("-", "_"): v for k, v in lowered.items() if k.startswith(TRACE_PREFIX)}
        task = trace.pop("task", "")
        with self._lock:
            self._seq += 1
            record = RecordedRequest(
                path=path,
                task=task,
                headers=lowered,
                trace=trace,
                model=str(body.get("model", "")),
                messages=list(body.get("messages") or []),
                tools=body.get("tools"),
                body=body,
                time_in=time.time(),
                seq_in=self._seq,
            )
            self._requests.append(record)
            return record, self._generation

    def _finish(self, record: RecordedRequest, status: int, response: dict[str, Any] | None = None) -> None:
        # Called before the response is written, so a client can never start its
        # next request before this one stops counting as in flight.
        with self._lock:
            self._seq += 1
            record.seq_out, record.time_out, record.status, record.response = self._seq, time.time(), status, response

    def _pick_rule(self, task: str, text: str) -> Rule | None:
        with self._lock:
            for rule in self._rules:
                if rule.matches(task, text):
                    rule.fired += 1
                    return rule
        return None

    def _wait(self, seconds: float, generation: int, connection: socket.socket | None) -> int | None:
        """Sleep up to `seconds`. None when the time passed; 499 when the client went
        away; 503 when reset()/stop() released the request."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if self._stopping.is_set() or generation != self._generation:
                return 503
            if connection is not None and _client_gone(connection):
                return 499  # nginx's "client closed request"
            time.sleep(min(0.02, left))
        return None

    def respond(
        self, path: str, headers: dict[str, str], body: dict[str, Any], connection: socket.socket
    ) -> _Reply | None:
        """Build the reply for one request; None when nobody is listening any more."""
        record, generation = self._begin(path, headers, body)
        with contextlib.suppress(OSError):
            record.peer = connection.getpeername()[0]
        serial = self._kind == "llama.cpp"
        if serial and not self._serial.acquire(timeout=HANG_LIMIT_SECONDS):
            reply = _Reply(503, _error_body(503, "The fake LLM's single slot never came free."))
            self._finish(record, reply.status, reply.body)
            return reply
        with self._lock:
            self._seq += 1
            record.seq_start = self._seq
        try:
            return self._respond(path, body, record, generation, connection, watch_client=not serial)
        finally:
            if serial:
                self._serial.release()

    def _respond(
        self,
        path: str,
        body: dict[str, Any],
        record: RecordedRequest,
        generation: int,
        connection: socket.socket,
        watch_client: bool,
    ) -> _Reply | None:
        rule = self._pick_rule(record.task, record.text)
        spec = _rule_spec(rule, record) if rule else {}
        wait = HANG_LIMIT_SECONDS if spec.get("hang") else self._latency + float(spec.get("delay", 0.0))
        # llama.cpp goes on generating after its client gave up: it never looks.
        interrupted = self._wait(wait, generation, connection if watch_client else None) if wait else None
        if interrupted == 499:
            self._finish(record, 499)
            return None
        if interrupted == 503:
            reply = _Reply(503, _error_body(503, "The fake LLM was reset while this request waited."))
        else:
            reply = self._build_reply(path, body, record, spec)
        self._finish(record, reply.status, reply.body)
        return reply

    def _build_reply(self, path: str, body: dict[str, Any], record: RecordedRequest, spec: dict[str, Any]) -> _Reply:
        extra_headers = dict(spec.get("headers") or {})
        if spec.get("status"):
            return _Reply(
                spec["status"], _error_body(spec["status"], spec.get("error"), spec.get("code")), extra_headers
            )
        llama = self._kind == "llama.cpp"
        if path.endswith("/embeddings"):
            if llama:
                return _Reply(500, _error_body(500, LLAMA_NO_EMBEDDINGS))
            return _Reply(200, _embedding_body(body), extra_headers)
        if self._context_window is not None and len(record.text) > self._context_window:
            return _Reply(400, _context_error_body(self._context_window, record.text), extra_headers)
        if llama and (body.get("response_format") or {}).get("type") == "json_schema":
            return _Reply(500, _error_body(500, LLAMA_JSON_SCHEMA_ERROR))
        # llama.cpp lowers max_tokens, without a word, to the room its context has left after the prompt.
        room = self._context_window // 4 - _tokens(record.text) if llama and self._context_window else None
        return _Reply(200, self._identified(_chat_body(body, record, spec, room=room), record.model), extra_headers)

    def _identified(self, reply: dict[str, Any], model: str) -> dict[str, Any]:
        identity = self._identities.get(model)
        if identity is not None:
            reply["model"] = identity["reported"] or model
            if identity["system_fingerprint"]:
                reply["system_fingerprint"] = identity["system_fingerprint"]
        return reply

    def models_list(self) -> dict[str, Any]:
        """GET /v1/models: the models requested so far and the usual three, with their `meta`."""
        with self._lock:
            self._models_reads += 1
        names = sorted({r.model for r in self.requests if r.model} | {"fake-agent", "fake-judge", "fake-embed"})
        entries = []
        for name in names:
            entry: dict[str, Any] = {"id": name, "object": "model", "owned_by": "fakellm"}
            if (identity := self._identities.get(name)) and identity["meta"]:
                entry["meta"] = identity["meta"]
            entries.append(entry)
        return {"object": "list", "data": entries}


# ---- response bodies --------------------------------------------------------


def _rule_spec(rule: Rule, record: RecordedRequest) -> dict[str, Any]:
    spec = {
        "reply": rule.reply,
        "json": rule.json,
        "tool_calls": rule.tool_calls,
        "status": rule.status,
        "error": rule.error,
        "code": rule.code,
        "headers": rule.headers,
        "delay": rule.delay,
        "hang": rule.hang,
        "broken_json": rule.broken_json,
        "runaway": rule.runaway,
        "placeholder": rule.placeholder,
        "finish_reason": rule.finish_reason,
    }
    if rule.handler is not None:
        request = {"task": record.task, "trace": record.trace, "headers": record.headers, **record.body}
        spec.update(rule.handler(request))
    return spec


def _chat_body(
    body: dict[str, Any], record: RecordedRequest, spec: dict[str, Any], *, room: int | None = None
) -> dict[str, Any]:
    content, tool_calls = _answer(body, record, spec)
    finish = "tool_calls" if tool_calls else "stop"
    limit = body.get("max_tokens") or body.get("max_completion_tokens")
    if room is not None:
        limit = min(limit, room) if isinstance(limit, int) and limit > 0 else room
    if spec.get("runaway"):
        limit = limit or RUNAWAY_TOKENS
        content = '{"reasoning": "' + "and so " * (4 * limit)
    if content and isinstance(limit, int) and limit > 0 and _tokens(content) > limit:
        content, finish = content[: limit * 4], "length"  # cut where the model was stopped
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    prompt_tokens = _tokens(record.text)
    completion_tokens = _tokens(content or json.dumps(tool_calls))
    if spec.get("finish_reason"):
        finish = spec["finish_reason"]
        if finish == "length" and isinstance(limit, int) and limit > 0:
            completion_tokens = limit  # the model stopped because it had used them all
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": record.model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": finish},
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _answer(
    body: dict[str, Any], record: RecordedRequest, spec: dict[str, Any]
) -> tuple[str | None, list[dict[str, Any]]]:
    if spec.get("tool_calls"):
        return spec.get("reply"), [_tool_call(call) for call in spec["tool_calls"]]
    if spec.get("placeholder"):
        return json.dumps(_placeholder_answer(body, record, spec.get("json") or {})), []
    if spec.get("broken_json"):
        whole = json.dumps(spec.get("json") or JUDGE_DEFAULT)
        return whole[: len(whole) // 2], []
    if spec.get("json") is not None:
        return json.dumps(spec["json"]), []
    if spec.get("reply") is not None:
        return spec["reply"], []
    if record.task == "judge":
        return json.dumps(JUDGE_DEFAULT), []
    if (body.get("response_format") or {}).get("type") in ("json_object", "json_schema") or "extra_body" in body:
        return "{}", []
    return f"Fake answer to: {_last_user_text(record.messages)[:200]}", []


def _placeholder_answer(body: dict[str, Any], record: RecordedRequest, given: dict[str, Any]) -> dict[str, Any]:
    """What a model too small for the job answers: the schema's descriptions, or the prompt's
    own templates, where its judgment should be (issue 33: Gemma 3 270M on llama.cpp)."""
    templates = dict(_PROMPT_TEMPLATE_FIELD.findall(record.text))
    answer: dict[str, Any] = {}
    for name, prop in (_requested_schema(body).get("properties") or {}).items():
        if prop.get("type") == "string":
            answer[name] = prop.get("description") or templates.get(name) or f"<{name}>"
        elif prop.get("type") in ("integer", "number"):
            answer[name] = prop.get("minimum", 0)
    return {**(answer or templates), **given}


def _requested_schema(body: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema a request sent (OpenAI's json_schema, llama.cpp's json_object "schema", vLLM's guided_json)."""
    response_format = body.get("response_format") or {}
    schema = (response_format.get("json_schema") or {}).get("schema") or response_format.get("schema")
    schema = schema or body.get("guided_json") or {}
    return schema if isinstance(schema, dict) else {}


def _tool_call(call: dict[str, Any]) -> dict[str, Any]:
    arguments = call.get("arguments", {})
    return {
        "id": call.get("id") or f"call_{uuid.uuid4().hex[:12]}",
        "type": "function",
        "function": {
            "name": call["name"],
            "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
        },
    }


def _error_body(status: int, message: str | None, code: str | None = None) -> dict[str, Any]:
    kinds = {
        400: "invalid_request_error",
        401: "invalid_api_key",
        403: "permission_denied",
        404: "not_found_error",
        429: "rate_limit_exceeded",
    }
    kind = kinds.get(status, "server_error")
    return {"error": {"message": message or f"Fake error {status}", "type": kind, "param": None, "code": code or kind}}


def _context_error_body(limit_chars: int, text: str) -> dict[str, Any]:
    """OpenAI's own 400 for a prompt over the window (code context_length_exceeded), in the
    fake's 4-characters-a-token units, so clients are tested against the real shape."""
    message = (
        f"This model's maximum context length is {max(1, limit_chars // 4)} tokens. However, your messages "
        f"resulted in {_tokens(text)} tokens. Please reduce the length of the messages."
    )
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


def _embedding_body(body: dict[str, Any]) -> dict[str, Any]:
    texts = body.get("input") or []
    texts = [texts] if isinstance(texts, str) else [str(t) for t in texts]
    as_base64 = body.get("encoding_format") == "base64"
    data = [
        {"object": "embedding", "index": i, "embedding": _encode(embed_text(text), as_base64)}
        for i, text in enumerate(texts)
    ]
    tokens = sum(_tokens(t) for t in texts)
    return {
        "object": "list",
        "data": data,
        "model": body.get("model", ""),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def embed_text(text: str) -> list[float]:
    """Bag-of-words hashing into 16 dimensions, L2-normalised: texts sharing words point the same way."""
    vector = [0.0] * EMBEDDING_DIMENSIONS
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.sha256(word.encode()).digest()
        vector[digest[0] % EMBEDDING_DIMENSIONS] += 1.0 if digest[1] % 2 else -1.0
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


def _encode(vector: list[float], as_base64: bool) -> list[float] | str:
    # The OpenAI SDK asks for base64 float32 unless told otherwise, then decodes it.
    if not as_base64:
        return vector
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()


def _request_text(body: dict[str, Any]) -> str:
    """Every text the request carries, concatenated: what contains/regex rules look at."""
    parts: list[str] = []
    for message in body.get("messages") or []:
        parts.append(_content_text(message.get("content")))
    inputs = body.get("input")
    if inputs is not None:
        parts.extend([inputs] if isinstance(inputs, str) else [str(i) for i in inputs])
    return "\n".join(parts)


def _content_text(content: Any) -> str:
    if isinstance(content, list):  # multi-part content: [{"type": "text", "text": ...}]
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return _content_text(message.get("content"))
    return ""


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _client_gone(connection: socket.socket) -> bool:
    """True once the client closed its end (it timed out and gave up)."""
    try:
        readable, _, _ = select.select([connection], [], [], 0)
        return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


# ---- HTTP plumbing -----------------------------------------------------------


def _make_handler(fake: FakeLLM) -> type[BaseHTTPRequestHandler]:
    class FakeLLMHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, like a real provider
        # TCP_NODELAY: headers and body go out as two writes, and with Nagle the body would
        # wait for the client's delayed ACK (40 ms a request on Linux), a latency no real
        # provider adds and one that would swamp the run benchmarks.
        disable_nagle_algorithm = True

        def do_GET(self) -> None:
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send(200, fake.models_list())
            else:
                self._send(404, _error_body(404, f"Unknown path {self.path}"))

        def do_POST(self) -> None:
            path = self.path.split("?")[0].rstrip("/")
            if path == "/extras/tokenize":
                length = int(self.headers.get("Content-Length") or 0)
                tokens = fake.tokenize(json.loads(self.rfile.read(length) or b"{}"))
                self._send(*((200, tokens) if tokens else (404, _error_body(404, "Not Found"))))
                return
            if path not in ("/v1/chat/completions", "/chat/completions", "/v1/embeddings", "/embeddings"):
                self._send(404, _error_body(404, f"Unknown path {self.path}"))
                return
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                self._send(400, _error_body(400, "Request body is not JSON"))
                return
            reply = fake.respond(path, dict(self.headers.items()), body, self.connection)
            if reply is None:
                self.close_connection = True
                return
            self._send(reply.status, reply.body, reply.headers)

        def _send(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            payload = json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except OSError:  # the client hung up meanwhile
                self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean

    return FakeLLMHandler


# ---- pytest helpers ------------------------------------------------------------

FAKE_MODELS = {
    "EVALSITE_LLM_MODEL": "openai/fake-agent",
    "EVALSITE_JUDGE_MODEL": "openai/fake-judge",
    "EVALSITE_EMBEDDING_MODEL": "openai/fake-embed",
}


def point_settings_at(settings: Any, fake: FakeLLM) -> None:
    """Aim the gateway at the fake (pass pytest-django's `settings` fixture)."""
    for name, value in FAKE_MODELS.items():
        setattr(settings, name, value)
    settings.EVALSITE_LLM_API_BASE = fake.url
    settings.EVALSITE_LLM_API_KEY = "test-key"
    settings.EVALSITE_LLM_BACKOFF = 0.01
    settings.EVALSITE_LLM_TIMEOUT = 5.0
    settings.EVALSITE_LLM_TIMEOUTS = {}
    # What the gateway learnt about the previous test's server (JSON modes, busy slots).
    from evalsite import llm

    llm.forget_model_state()


def main() -> None:
    parser = argparse.ArgumentParser(description="Run the Evalsite fake OpenAI-compatible server.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every answer")
    args = parser.parse_args()
    fake = FakeLLM(args.host, args.port, args.latency).start()
    print(f"Fake LLM listening on {fake.url} (latency {args.latency}s). Ctrl-C stops it.", flush=True)
    print(f"  EVALSITE_LLM_API_BASE={fake.url} EVALSITE_LLM_MODEL=openai/fake-agent", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        fake.stop()


if __name__ == "__main__":
    main()

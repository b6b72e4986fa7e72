"""One call: model, headers, answer length, timeout, retries, and the model's concurrency slot."""

from __future__ import annotations

import functools
import logging
import os
import random
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from django.conf import settings

from evalsite.llm.errors import LLMError, LLMNotConfigured, mapped_error

logger = logging.getLogger("evalsite.llm")

Trace = dict[str, str | int]

MAX_BACKOFF_SECONDS = 30.0
MAX_RETRY_AFTER_SECONDS = 30.0
_RETRY_DELAY = re.compile(r"""["']retryDelay["']\s*:\s*["'](\d+(?:\.\d+)?)s["']""")
MODEL_SETTINGS = {"llm": "EVALSITE_LLM_MODEL", "judge": "EVALSITE_JUDGE_MODEL", "embedding": "EVALSITE_EMBEDDING_MODEL"}
# Long answers get a longer timeout than EVALSITE_LLM_TIMEOUT unless EVALSITE_LLM_TIMEOUT_<TASK> says otherwise.
TIMEOUT_FACTORS = {"extract": 3.0, "generate": 3.0, "rewrite": 3.0, "suggest": 2.0, "probe": 0.25}
SLOT_KEY = "evalsite:llm:slots:"
# Take a slot if fewer than `limit` unexpired holders have one. One script, so two
# workers can never both see the last free slot.
_ACQUIRE = """
local key, token = KEYS[1], ARGV[1]
local now, lease, limit = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
if redis.call('ZCARD', key) < limit then
  redis.call('ZADD', key, now + lease, token)
  redis.call('EXPIRE', key, math.ceil(lease) + 60)
  return 1
end
return 0
"""


def model_for(purpose: str = "llm", override: str | None = None) -> str | None:
    """The litellm model string for "llm" | "judge" | "embedding"; the override wins."""
    if purpose not in MODEL_SETTINGS:
        raise ValueError(f"Unknown model purpose {purpose!r}")
    configured = override or getattr(settings, MODEL_SETTINGS[purpose])
    if not configured and purpose == "judge":
        configured = settings.EVALSITE_LLM_MODEL
    return configured or None


def is_configured(purpose: str = "llm") -> bool:
    return model_for(purpose) is not None


def timeout_for(task: str) -> float:
    """Seconds one attempt of a `task` call may take."""
    explicit = settings.EVALSITE_LLM_TIMEOUTS.get(task)
    return float(explicit or settings.EVALSITE_LLM_TIMEOUT * TIMEOUT_FACTORS.get(task, 1.0))


def max_tokens_for(task: str) -> int | None:
    return settings.EVALSITE_LLM_MAX_TOKENS.get(task) or None


def call_bound(task: str, *, timeout: float | None = None) -> float:
    """The longest a `task` call can take, every attempt, backoff and queueing for the model included.

    `timeout` is a caller's own per-attempt timeout (an llm agent's), else the task's."""
    attempts = 1 + settings.EVALSITE_LLM_RETRIES
    backoff = sum(min(settings.EVALSITE_LLM_BACKOFF * 2.0**i, MAX_BACKOFF_SECONDS) for i in range(attempts - 1))
    queue = settings.EVALSITE_LLM_QUEUE_TIMEOUT if settings.EVALSITE_LLM_CONCURRENCY else 0.0
    return attempts * (timeout_for(task) if timeout is None else timeout) + backoff + queue


@functools.cache
def litellm_module() -> ModuleType:
    """Import litellm on first use: it takes seconds, and most pages never call a model."""
    # Never fetch anything on our own (price list, Anthropic beta headers, tokenizers),
    # and don't let litellm load a .env file: settings come from the environment only.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
    import litellm

    litellm.suppress_debug_info = True
    litellm.drop_params = True
    # litellm.embedding() turns max_retries=0 into this default, so the SDK would retry under us.
    litellm.DEFAULT_MAX_RETRIES = 0  # type: ignore[misc]  # litellm declares it Final; overriding it is the point
    return litellm


def unlogged() -> AbstractContextManager[Any]:
    """A context in which litellm skips its own success logging of a call.

    What a call cost, used and took is ours (results.measured, log_success); litellm's
    logging only built a payload for callbacks we never register, on its logging thread
    after every call: about 2 ms of CPU a case, which a run's lanes share the interpreter
    with (bench/profile_cases.py). litellm has no public switch for it: `internal_sub_call`
    marks a call as a sub-call that its caller logs, as litellm's own nested calls are.
    Should a litellm release move it, calls are logged again (a test in
    tests/evalsite/test_llm_gateway.py says so), never broken.
    """
    return _litellm_sub_call()()


@functools.cache
def _litellm_sub_call() -> Callable[[], AbstractContextManager[Any]]:
    litellm_module()
    try:
        from litellm._internal_context import internal_sub_call
    except ImportError:
        return nullcontext
    return internal_sub_call


@dataclass(frozen=True)
class Call:
    model: str
    task: str
    timeout: float
    retries: int
    trace: Trace
    max_tokens: int | None

    @classmethod
    def prepare(
        cls,
        purpose: str,
        model: str | None,
        *,
        task: str,
        timeout: float | None,
        retries: int | None,
        trace: Trace | None,
        max_tokens: int | None = None,
    ) -> Call:
        chosen = model_for(purpose, model)
        if chosen is None:
            raise LLMNotConfigured(purpose)
        return cls(
            model=chosen,
            task=task,
            timeout=float(timeout_for(task) if timeout is None else timeout),
            retries=settings.EVALSITE_LLM_RETRIES if retries is None else retries,
            trace=trace or {},
            max_tokens=max_tokens if max_tokens is not None else max_tokens_for(task),
        )

    def kwargs(self) -> dict[str, Any]:
        """Connection, timeout and retry arguments for litellm."""
        headers = {"X-Evalsite-Task": _header_value(self.task)}
        for key, value in self.trace.items():
            headers[f"X-Evalsite-{key.replace('_', '-').title()}"] = _header_value(value)
        # Our timeout always, never the SDK's 10 minutes; zero retries below our own loop.
        kwargs: dict[str, Any] = {"timeout": self.timeout, "num_retries": 0, "max_retries": 0, "extra_headers": headers}
        if settings.EVALSITE_LLM_API_BASE:
            kwargs["api_base"] = settings.EVALSITE_LLM_API_BASE
        if settings.EVALSITE_LLM_API_KEY:
            kwargs["api_key"] = settings.EVALSITE_LLM_API_KEY
        return kwargs

    def chat_kwargs(self) -> dict[str, Any]:
        """kwargs() for a chat completion, with this process's OpenAI client for the server
        when litellm would build that very client itself (see openai_client)."""
        kwargs = self.kwargs()
        if self.model.startswith("openai/") and "api_base" in kwargs and "api_key" in kwargs:
            kwargs["client"] = openai_client(kwargs["api_base"], kwargs["api_key"], self.timeout)
        return kwargs

    def send(self, request: Callable[[], Any], *, retry_server_errors: bool = True) -> tuple[Any, int, float]:
        """Run `request` until it succeeds or fails for good: (response, attempts, start time).

        Retried: 429, 5xx (unless retry_server_errors is False) and refused connections;
        a timeout only with EVALSITE_LLM_RETRY_TIMEOUTS. Each attempt holds a slot of the
        model's concurrency limit.
        """
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            try:
                with model_slot(self.model, self.timeout) as slot:
                    _guard_check()  # waiting for the slot may have taken long: asked last
                    try:
                        with unlogged():
                            return request(), attempt, started
                    except Exception as exc:
                        error = mapped_error(exc, attempts=attempt, timeout=self.timeout)
                        if error is not None and error.kind == "timeout":
                            slot.keep()  # the server may still be generating the abandoned answer
                        raise
            except LLMError:
                raise  # busy: no slot came free in time
            except Exception as exc:
                error = mapped_error(exc, attempts=attempt, timeout=self.timeout)
                if error is None:
                    raise  # a programming error, not a provider failure
                if not self._retryable(error, retry_server_errors) or attempt > self.retries:
                    logger.warning(
                        "llm task=%s model=%s kind=%s status=%s attempts=%d",
                        self.task,
                        self.model,
                        error.kind,
                        error.status,
                        attempt,
                    )
                    raise error from exc
                time.sleep(_retry_delay(exc, attempt))

    @staticmethod
    def _retryable(error: LLMError, retry_server_errors: bool) -> bool:
        if error.kind == "timeout":
            return bool(settings.EVALSITE_LLM_RETRY_TIMEOUTS)
        if error.kind == "server":
            return retry_server_errors
        return error.retryable


# (pid, api_base, api_key, timeout) -> openai.OpenAI. The pid: a client must never cross a
# fork (its connection pool would be shared by the pool children).
_CLIENTS: dict[tuple[int, str, str, float], Any] = {}
# Per thread: what to call as that thread's next request to a model server goes out.
_sending = threading.local()


def on_request_sent(callback: Callable[[], object] | None) -> None:
    """Call `callback` once, as this thread's next request through `openai_client` goes out
    (after litellm has built it; the thread then waits for the answer). None forgets it.

    A run's lane saves its previous case from a thread of its own meanwhile
    (runs/engine/lane.py): started any earlier, that work would share the
    interpreter with the building of the request, and delay it."""
    _sending.callback = callback


class CallRefused(Exception):
    """The thread's guard (`guard_calls`) refused a model call: the work it was for is no
    longer this thread's."""


@contextmanager
def guard_calls(allowed: Callable[[], bool]) -> Iterator[None]:
    """While this is active, each model call of this thread asks `allowed()` just before it goes
    out (after waiting for the model's concurrency slot) and raises CallRefused if it says no.
    A run's lane guards a case's calls with its claim (runs/engine/execution.py): a worker back
    from a network cut, whose case another worker took over, sends nothing more for it."""
    _sending.guard = allowed
    try:
        yield
    finally:
        _sending.guard = None


def _guard_check() -> None:
    guard = getattr(_sending, "guard", None)
    if guard is not None and not guard():
        raise CallRefused("The call was not sent: the work it was for was handed to another worker.")


def _request_sent(request: Any) -> None:
    callback = getattr(_sending, "callback", None)
    if callback is not None:
        _sending.callback = None
        callback()


def openai_client(api_base: str, api_key: str, timeout: float) -> Any:
    """One OpenAI SDK client per server, key and timeout, passed to litellm as `client`.

    litellm looks its own cached client up on every call, hashing the call's parameters,
    about 3% of a call's CPU. Ours is built as litellm builds one for an "openai/" model
    with an api_base: that base URL and key, no SDK retries (our loop retries). Each
    request still carries its own timeout and headers.
    """
    key = (os.getpid(), api_base, api_key, timeout)
    client = _CLIENTS.get(key)
    if client is None:
        import openai

        litellm_module()  # its settings (offline price list...) before the SDK is imported
        import httpx2  # the HTTP client the OpenAI SDK is built on
        from openai._constants import DEFAULT_CONNECTION_LIMITS

        transport = httpx2.HTTPTransport(limits=DEFAULT_CONNECTION_LIMITS, socket_options=_socket_options())
        http_client = openai.DefaultHttpxClient(event_hooks={"request": [_request_sent]}, transport=transport)
        client = _CLIENTS[key] = openai.OpenAI(
            base_url=api_base, api_key=api_key, timeout=timeout, max_retries=0, http_client=http_client
        )
    return client


def _socket_options() -> list[tuple[int, int, int]]:
    """TCP_USER_TIMEOUT: a request the server has not acknowledged within the worker's lease
    (its heartbeat TTL less an interval) is abandoned by the kernel, not delivered late. A
    host cut off from the network would otherwise have TCP deliver, after the link came back,
    a call sent at the moment of the cut, for a case the reaper has since handed to another
    worker (one call over its run's window). A slow answer is not cut: the time the model
    takes to answer is not unacknowledged data. Our send loop retries the aborted call, and
    its guard (guard_calls) then finds the claim gone."""
    if not hasattr(socket, "TCP_USER_TIMEOUT"):
        return []
    lease = settings.EVALSITE_WORKER_HEARTBEAT_TTL - settings.EVALSITE_WORKER_HEARTBEAT_INTERVAL
    return [(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(max(lease, 1.0) * 1000))]


def forget_clients() -> None:
    for client in _CLIENTS.values():
        client.close()
    _CLIENTS.clear()


def _header_value(value: str | int) -> str:
    # A header value must be one line of printable ASCII; trace values can come from user input.
    return re.sub(r"[^\x20-\x7e]", "?", str(value))[:200]


def _retry_delay(exc: Exception, attempt: int) -> float:
    hinted = _retry_after(exc)
    if hinted is not None:
        return min(hinted, MAX_RETRY_AFTER_SECONDS)
    base = min(float(settings.EVALSITE_LLM_BACKOFF) * 2.0 ** (attempt - 1), MAX_BACKOFF_SECONDS)
    return base * random.uniform(0.5, 1.0)  # jitter, so parallel cases don't retry in lockstep


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(exc, "litellm_response_headers", None) or getattr(response, "headers", None) or {}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return max(0.0, float(str(headers.get(name, ""))) * scale)
        except ValueError:
            continue  # absent, or an HTTP date: use our own backoff
    # Google sends no header: its 429 body carries a google.rpc.RetryInfo {"retryDelay": "7s"}.
    hinted = _RETRY_DELAY.search(str(getattr(exc, "message", "") or exc))
    return float(hinted.group(1)) if hinted else None


# ---- the per-model concurrency limit -----------------------------------------------


@functools.cache
def redis_client() -> Any:
    import redis

    return redis.Redis.from_url(settings.REDIS_CLIENT_URL, socket_timeout=5, socket_connect_timeout=5)


class _Slot:
    def __init__(self, key: str, token: str, lease: float) -> None:
        self.key, self.token, self.lease, self.kept = key, token, lease, False

    def keep(self) -> None:
        """Hold the slot for one more lease instead of freeing it at the end."""
        self.kept = True


@contextmanager
def model_slot(model: str, timeout: float) -> Iterator[_Slot]:
    """Hold one of the model's EVALSITE_LLM_CONCURRENCY slots, shared by every worker through
    Redis. A slot is a lease (a crashed holder frees it when it expires). Waiting longer than
    EVALSITE_LLM_QUEUE_TIMEOUT fails as "busy". Without a limit, or with Redis unreachable
    (the limit then does not apply: a model call must not fail on it), nothing is held."""
    limit = settings.EVALSITE_LLM_CONCURRENCY
    if limit <= 0:
        yield _Slot("", "", 0.0)
        return
    slot = _Slot(SLOT_KEY + model, uuid.uuid4().hex, timeout + 10.0)
    if not _acquire(slot, limit, model):
        yield slot
        return
    try:
        yield slot
    finally:
        _release(slot)


def _acquire(slot: _Slot, limit: int, model: str) -> bool:
    import redis

    waited_from = time.monotonic()
    deadline = waited_from + settings.EVALSITE_LLM_QUEUE_TIMEOUT
    try:
        client = redis_client()
        while not client.eval(_ACQUIRE, 1, slot.key, slot.token, time.time(), slot.lease, limit):
            if time.monotonic() >= deadline:
                waited = time.monotonic() - waited_from
                raise LLMError(
                    f"The model {model} was busy with other calls for {waited:.0f} s (at most {limit} at a time).",
                    kind="busy",
                    retryable=True,
                )
            time.sleep(random.uniform(0.05, 0.2))
    except redis.RedisError:
        logger.warning("llm concurrency limit not applied: Redis did not answer", exc_info=True)
        return False
    return True


def _release(slot: _Slot) -> None:
    import redis

    try:
        if slot.kept:
            redis_client().zadd(slot.key, {slot.token: time.time() + slot.lease})
        else:
            redis_client().zrem(slot.key, slot.token)
    except redis.RedisError:
        logger.warning("llm slot not released (it expires on its own)", exc_info=True)


def slots_held(model: str) -> int:
    """Unexpired slots of a model (for tests and the settings page)."""
    return int(redis_client().zcount(SLOT_KEY + model, time.time(), "+inf"))


def forget_slots() -> None:
    for key in redis_client().scan_iter(f"{SLOT_KEY}*"):
        redis_client().delete(key)

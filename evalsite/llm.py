"""The LLM gateway: every model call in Evalsite goes through this module.

It is the only module that imports litellm. It picks the model from settings,
sends routing headers, applies our timeout and our retry policy (litellm's and
the OpenAI SDK's own retries are switched off so they never stack), maps
provider errors to readable LLMError kinds, validates JSON answers against a
JSON Schema with one repair round, and records tokens and cost per call.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

from django.conf import settings

logger = logging.getLogger(__name__)

Messages = list[dict[str, Any]]
Trace = dict[str, str | int]

MAX_BACKOFF_SECONDS = 30.0
MAX_RETRY_AFTER_SECONDS = 30.0
MODEL_SETTINGS = {"llm": "EVALSITE_LLM_MODEL", "judge": "EVALSITE_JUDGE_MODEL", "embedding": "EVALSITE_EMBEDDING_MODEL"}
REPAIR_PROMPT = (
    "Your previous answer could not be used: {problem}. Reply again with only the corrected JSON, "
    "no explanations and no code fences. It must match this JSON schema: {schema}"
)


class LLMError(Exception):
    """A model call failed; .message is readable by a QA person (no class names, no tracebacks).

    kind: not_configured | timeout | rate_limit | auth | bad_request | context_window |
    content_policy | server | connection | invalid_json. retryable: the failure is transient,
    so a later try may work (our own retries are already spent). result: for invalid_json,
    the summed usage of the calls that did answer, so their cost can still be recorded.
    """

    def __init__(
        self, message: str, *, kind: str, attempts: int = 0, retryable: bool = False, result: LLMResult | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.attempts = attempts
        self.retryable = retryable
        self.result = result


class LLMNotConfigured(LLMError):
    def __init__(self, purpose: str = "llm") -> None:
        if purpose == "embedding":
            message = "No embedding model is configured. Set EVALSITE_EMBEDDING_MODEL (see README) to use this feature."
        else:
            message = "No model is configured. Set EVALSITE_LLM_MODEL (see README) to use this feature."
        super().__init__(message, kind="not_configured")


@dataclass
class LLMResult:
    text: str  # assistant text ("" when only tool calls)
    data: Any  # parsed and validated JSON (complete_json only; None for the other calls)
    tool_calls: list[dict[str, Any]]  # [{"id", "name", "arguments": dict}]
    message: dict[str, Any]  # the assistant message, to append to a conversation in tool loops
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0  # USD; 0.0 when litellm knows no price for the model
    attempts: int = 1  # HTTP attempts made, summed over a JSON repair call
    duration_ms: int = 0


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


@functools.cache
def _litellm() -> ModuleType:
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


# ---- public calls -----------------------------------------------------------


def complete(
    messages: Messages,
    *,
    task: str,
    purpose: str = "llm",
    model: str | None = None,
    temperature: float | None = None,
    tools: list[dict[str, Any]] | None = None,
    timeout: float | None = None,
    retries: int | None = None,
    trace: Trace | None = None,
    max_tokens: int | None = None,
) -> LLMResult:
    """One chat completion. `tools` are OpenAI function definitions; tool calls come back parsed.

    timeout is per attempt (default EVALSITE_LLM_TIMEOUT); retries counts attempts after
    the first (default EVALSITE_LLM_RETRIES).
    """
    call = _Call.prepare(purpose, model, task=task, timeout=timeout, retries=retries, trace=trace)
    return _chat(call, messages, temperature=temperature, tools=tools, max_tokens=max_tokens)


def complete_json(
    messages: Messages,
    *,
    schema: dict[str, Any],
    task: str,
    purpose: str = "llm",
    model: str | None = None,
    temperature: float | None = None,
    timeout: float | None = None,
    retries: int | None = None,
    trace: Trace | None = None,
) -> LLMResult:
    """A completion whose answer must be JSON matching `schema` (JSON Schema); .data holds it.

    A bad answer gets one repair call; tokens, cost and attempts of both calls are summed.
    """
    call = _Call.prepare(purpose, model, task=task, timeout=timeout, retries=retries, trace=trace)
    first = _chat_json(call, messages, temperature)
    data, problem = parse_json_answer(first.text, schema)
    if problem is None:
        return replace(first, data=data)
    repair = {"role": "user", "content": REPAIR_PROMPT.format(problem=problem, schema=json.dumps(schema))}
    second = _chat_json(call, [*messages, {"role": "assistant", "content": first.text}, repair], temperature)
    total = _summed(first, second)
    data, problem = parse_json_answer(second.text, schema)
    if problem is None:
        return replace(total, data=data)
    message = f"The model's answer was not valid JSON after one repair attempt: {problem}."
    raise LLMError(message, kind="invalid_json", attempts=total.attempts, result=total)


def embed(
    texts: list[str], *, task: str = "embedding", model: str | None = None, trace: Trace | None = None
) -> tuple[list[list[float]], LLMResult]:
    """Embed texts with the embedding model. Returns (one vector per text, usage), where usage
    is an LLMResult with empty text/message carrying prompt_tokens, cost, attempts, duration_ms."""
    call = _Call.prepare("embedding", model, task=task, timeout=None, retries=None, trace=trace)
    if not texts:
        return [], LLMResult(text="", data=None, tool_calls=[], message={}, model=call.model, attempts=0)
    response, attempts, started = call.send(
        lambda: _litellm().embedding(model=call.model, input=texts, **call.kwargs())
    )
    vectors = [list(item["embedding"]) for item in sorted(response.data, key=lambda item: item["index"])]
    usage = LLMResult(text="", data=None, tool_calls=[], message={}, model=call.model)
    usage = _measured(usage, response, attempts, started)
    _log_success(task, usage)
    return vectors, usage


def parse_json_answer(text: str, schema: dict[str, Any]) -> tuple[Any, str | None]:
    """(data, None) when `text` holds JSON matching `schema`, else (None, a short reason)."""
    import jsonschema

    data = _extract_json(text)
    if data is None:
        return None, "the answer is not valid JSON" if text.strip() else "the answer was empty"
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(data))
    if error is None:
        return data, None
    where = "/".join(str(part) for part in error.absolute_path) or "the top level"
    return None, f"at {where}: {error.message[:200]}"


# ---- one call: model, headers, timeout, retries ------------------------------


@dataclass(frozen=True)
class _Call:
    model: str
    task: str
    timeout: float
    retries: int
    trace: Trace

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
    ) -> _Call:
        chosen = model_for(purpose, model)
        if chosen is None:
            raise LLMNotConfigured(purpose)
        return cls(
            model=chosen,
            task=task,
            timeout=float(settings.EVALSITE_LLM_TIMEOUT if timeout is None else timeout),
            retries=settings.EVALSITE_LLM_RETRIES if retries is None else retries,
            trace=trace or {},
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

    def send(self, request: Callable[[], Any]) -> tuple[Any, int, float]:
        """Run `request` until it succeeds or fails for good: (response, attempts, start time)."""
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            try:
                return request(), attempt, started
            except Exception as exc:
                error = _mapped_error(exc, attempts=attempt, timeout=self.timeout)
                if error is None:
                    raise  # a programming error, not a provider failure
                if not error.retryable or attempt > self.retries:
                    logger.warning(
                        "llm task=%s model=%s kind=%s attempts=%d", self.task, self.model, error.kind, attempt
                    )
                    raise error from exc
                time.sleep(_retry_delay(exc, attempt))


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
    return None


# ---- chat completions ---------------------------------------------------------


def _chat(call: _Call, messages: Messages, **params: Any) -> LLMResult:
    chosen = {name: value for name, value in params.items() if value is not None}
    response, attempts, started = call.send(
        lambda: _litellm().completion(model=call.model, messages=messages, **chosen, **call.kwargs())
    )
    if not getattr(response, "choices", None):
        # litellm returns None when a 422 repeats after it dropped the unsupported params.
        raise LLMError("The model provider returned no answer to the request.", kind="bad_request", attempts=attempts)
    reply = response.choices[0].message
    calls = [(c.id, c.function.name, c.function.arguments) for c in reply.tool_calls or []]
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if calls:
        message["tool_calls"] = [
            {"id": id_, "type": "function", "function": {"name": name, "arguments": raw}} for id_, name, raw in calls
        ]
    result = LLMResult(
        text=reply.content or "",
        data=None,
        tool_calls=[{"id": id_, "name": name, "arguments": _arguments(raw)} for id_, name, raw in calls],
        message=message,
        model=call.model,
    )
    result = _measured(result, response, attempts, started)
    _log_success(call.task, result)
    return result


def _chat_json(call: _Call, messages: Messages, temperature: float | None) -> LLMResult:
    try:
        return _chat(call, messages, temperature=temperature, response_format={"type": "json_object"})
    except LLMError as error:
        # Some OpenAI-compatible servers reject response_format; the prompt and our
        # parser still get JSON out of them, so ask once more without it.
        if error.kind != "bad_request" or "response_format" not in str(error.__cause__):
            raise
        retried = _chat(call, messages, temperature=temperature)
        return replace(retried, attempts=retried.attempts + error.attempts)


def _arguments(raw: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        decoded = json.loads(raw)
    except ValueError:
        return {"_raw": raw}
    return decoded if isinstance(decoded, dict) else {"_raw": raw}


def _extract_json(text: str) -> Any:
    # Models wrap JSON in ``` fences, reasoning blocks or a sentence; take the outermost object/array.
    cleaned = re.sub(r"<think>.*?</think>", "", text, flags=re.DOTALL)
    cleaned = re.sub(r"^\s*```[\w-]*\s*|\s*```\s*$", "", cleaned.strip())
    candidates = [cleaned]
    for opening, closing in ("{}", "[]"):
        start, end = cleaned.find(opening), cleaned.rfind(closing)
        if 0 <= start < end:
            candidates.append(cleaned[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    return None


# ---- usage, cost, logging ------------------------------------------------------


def _measured(result: LLMResult, response: Any, attempts: int, started: float) -> LLMResult:
    usage = getattr(response, "usage", None)
    return replace(
        result,
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        cost=_cost(response),
        attempts=attempts,
        duration_ms=int((time.monotonic() - started) * 1000),
    )


# Models litellm has no price for (local, self-hosted, fakes). Each is registered with
# litellm once at zero price: otherwise every call searched litellm's whole price list
# for a near match, twice (its own cost figure and ours), about 2 ms of CPU a call, a
# real share of a run's per-case overhead.
_UNPRICED_MODELS: set[str] = set()


def _cost(response: Any) -> float:
    # litellm has priced the response already (its x-litellm-response-cost figure):
    # pricing it again took as long as the rest of litellm's bookkeeping for a call.
    priced = _hidden_param(response, "response_cost")
    if isinstance(priced, int | float):
        return float(priced)
    model = getattr(response, "model", None) or ""
    if model in _UNPRICED_MODELS:
        return 0.0
    litellm = _litellm()
    try:
        return float(litellm.completion_cost(completion_response=response) or 0.0)
    except Exception:  # no known price (a local or fake model): cost must never fail a call
        _UNPRICED_MODELS.add(model)
        _register_unpriced(litellm, model, _hidden_param(response, "custom_llm_provider") or "openai")
        return 0.0


def _hidden_param(response: Any, name: str) -> Any:
    hidden = getattr(response, "_hidden_params", None)
    return hidden.get(name) if isinstance(hidden, dict) else getattr(hidden, name, None)


def _register_unpriced(litellm: ModuleType, model: str, provider: str) -> None:
    """Tell litellm a model it has no entry for costs nothing, so it stops searching its
    price list for it on every call. A model it knows is never touched: a failed pricing
    must not turn a real price into zero."""
    if not model or model in litellm.model_cost or f"{provider}/{model}" in litellm.model_cost:
        return
    litellm_logger = logging.getLogger("LiteLLM")
    level = litellm_logger.level
    litellm_logger.setLevel(logging.ERROR)  # its warning that cache pricing defaults to 0: expected here
    try:
        litellm.register_model(
            {model: {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0, "litellm_provider": provider}}
        )
    except Exception:
        logger.info("Could not register model %s at zero price with litellm", model, exc_info=True)
    finally:
        litellm_logger.setLevel(level)


def warm_up() -> None:
    """Import litellm and load what its first completion needs, without any network call.

    Worker processes call this before forking their pool, so each child does not pay
    seconds of import on its first case.
    """
    _litellm().completion(model="openai/warm-up", messages=[{"role": "user", "content": "hi"}], mock_response="ok")


def _summed(first: LLMResult, second: LLMResult) -> LLMResult:
    return replace(
        second,
        prompt_tokens=first.prompt_tokens + second.prompt_tokens,
        completion_tokens=first.completion_tokens + second.completion_tokens,
        cost=first.cost + second.cost,
        attempts=first.attempts + second.attempts,
        duration_ms=first.duration_ms + second.duration_ms,
    )


def _log_success(task: str, result: LLMResult) -> None:
    logger.info(
        "llm task=%s model=%s prompt_tokens=%d completion_tokens=%d cost=%.6f attempts=%d ms=%d",
        task,
        result.model,
        result.prompt_tokens,
        result.completion_tokens,
        result.cost,
        result.attempts,
        result.duration_ms,
    )


# ---- error mapping ---------------------------------------------------------------


def _mapped_error(exc: Exception, *, attempts: int, timeout: float) -> LLMError | None:
    """Our LLMError for a provider failure, or None when `exc` is not one."""
    import httpx
    import openai

    litellm = _litellm()
    causes = _causes(exc)
    status = getattr(exc, "status_code", None)
    after = f" after {attempts} attempts" if attempts > 1 else ""

    def error(kind: str, message: str, retryable: bool = False) -> LLMError:
        return LLMError(message, kind=kind, attempts=attempts, retryable=retryable)

    # Order matters: litellm reports timeouts and refused connections as 408/500 errors.
    if any(isinstance(e, openai.APITimeoutError | httpx.TimeoutException) for e in causes):
        return error("timeout", f"The model did not answer within {timeout:g} s{after}.", retryable=True)
    # litellm spots a context-window error by its message's wording; newer wordings only
    # carry OpenAI's error code, which the BadRequestError keeps.
    if isinstance(exc, litellm.ContextWindowExceededError) or getattr(exc, "code", None) == "context_length_exceeded":
        return error("context_window", "The conversation is longer than the model's context window.")
    if isinstance(exc, litellm.ContentPolicyViolationError):
        return error("content_policy", "The model provider refused the request under its content policy.")
    if any(isinstance(e, openai.APIConnectionError | httpx.TransportError | ConnectionError) for e in causes):
        return error("connection", f"Could not connect to the model provider{after}.", retryable=True)
    if not isinstance(exc, openai.OpenAIError) or not isinstance(status, int):
        return None
    if status == 429:
        return error("rate_limit", f"The model provider rate-limited the request (429){after}.", retryable=True)
    if status == 401:
        return error("auth", "The model provider rejected the API key (401).")
    if status == 403:
        return error("auth", "The model provider refused access to this model (403).")
    if status >= 500:
        return error("server", f"The model provider failed with a server error ({status}){after}.", retryable=True)
    return error("bad_request", f"The model provider rejected the request ({status}){_provider_reason(exc)}.")


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _provider_reason(exc: Exception) -> str:
    """The provider's own words, without litellm's class-name prefixes."""
    text = str(getattr(exc, "message", "") or "")
    text = re.sub(r"\b(?:\w+\.)*[A-Z]\w*(?:Error|Exception)\b\s*[:\-]*\s*", "", text).strip(" .:-")
    return f": {text[:200]}" if text else ""

"""The LLM gateway: every model call in Evalsite goes through this package.

It is the only code that imports litellm. It picks the model from settings, sends
routing headers, bounds every call (max_tokens and a timeout per purpose, a
per-model concurrency limit shared through Redis), applies our retry policy
(litellm's and the OpenAI SDK's own retries are switched off so they never stack),
maps provider errors to readable LLMError kinds, asks for JSON in each server's own
dialect and validates it against a JSON Schema with one repair round, and records
tokens and cost per call.

    client.py      model choice, timeouts, retries, the concurrency slots
    structured.py  structured-output dialects, what worked per model, JSON parsing
    errors.py      LLMError and the mapping of provider failures
    results.py     LLMResult, tokens, cost, logging
    probe.py       the settings page's "Test connection"
    identity.py    what the server says it runs behind a model name (the judge's fingerprint)
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from evalsite.llm import identity, structured
from evalsite.llm.client import (
    Call,
    Trace,
    call_bound,
    is_configured,
    litellm_module,
    max_tokens_for,
    model_for,
    timeout_for,
)
from evalsite.llm.errors import LLMError, LLMNotConfigured, provider_name
from evalsite.llm.results import LLMResult, log_success, measured, price, summed
from evalsite.llm.structured import parse_json_answer

__all__ = [
    "LLMError",
    "LLMNotConfigured",
    "LLMResult",
    "Messages",
    "Trace",
    "call_bound",
    "complete",
    "complete_json",
    "embed",
    "forget_model_state",
    "is_configured",
    "max_tokens_for",
    "model_for",
    "parse_json_answer",
    "price",
    "timeout_for",
    "warm_up",
]

Messages = list[dict[str, Any]]

REPAIR_PROMPT = (
    "Your previous answer could not be used: {problem}. Reply again with only the corrected JSON, "
    "no explanations and no code fences. It must match this JSON schema: {schema}"
)
# The failed answer is echoed in the repair call; a runaway one must not fill the context window.
REPAIR_ECHO_CHARS = 4000


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

    timeout is per attempt (default: the task's, see timeout_for); retries counts attempts
    after the first (default EVALSITE_LLM_RETRIES); max_tokens defaults to the task's
    EVALSITE_LLM_MAX_TOKENS. An answer cut at max_tokens comes back with .truncated set.
    """
    call = Call.prepare(purpose, model, task=task, timeout=timeout, retries=retries, trace=trace, max_tokens=max_tokens)
    return _chat(call, messages, temperature=temperature, tools=tools)


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
    max_tokens: int | None = None,
) -> LLMResult:
    """A completion whose answer must be JSON matching `schema` (JSON Schema); .data holds it.

    The schema is sent as structured output in the provider's dialect (structured.py).
    A bad answer gets one repair call; tokens, cost and attempts of both calls are summed,
    also into the error when the repair fails. An answer cut at max_tokens is reported as
    cut, not as broken JSON, and is not repaired (the repair would be cut the same way).
    """
    call = Call.prepare(purpose, model, task=task, timeout=timeout, retries=retries, trace=trace, max_tokens=max_tokens)
    first = _chat_json(call, messages, temperature, schema)
    data, problem, _ = structured.check_answer(first.text, schema)
    if problem is None:
        return replace(first, data=data)
    if first.truncated:
        raise _cut(call, first)
    echoed = first.text[:REPAIR_ECHO_CHARS]
    repair = {"role": "user", "content": REPAIR_PROMPT.format(problem=problem, schema=json.dumps(schema))}
    try:
        second = _chat_json(call, [*messages, {"role": "assistant", "content": echoed}, repair], temperature, schema)
    except LLMError as error:
        error.result = summed(first, error.result) if error.result else first
        error.attempts += first.attempts
        raise
    total = summed(first, second)
    data, problem, is_json = structured.check_answer(second.text, schema)
    if problem is None:
        return replace(total, data=data)
    if second.truncated:
        raise _cut(call, total)
    if is_json:
        message = f"The model answered JSON, but {problem}, also after one repair attempt."
    else:
        message = f"The model's answer was not valid JSON after one repair attempt: {problem}."
    raise LLMError(message + _began(second.text), kind="invalid_json", attempts=total.attempts, result=total)


def embed(
    texts: list[str],
    *,
    task: str = "embedding",
    model: str | None = None,
    trace: Trace | None = None,
    retries: int | None = None,
) -> tuple[list[list[float]], LLMResult]:
    """Embed texts with the embedding model. Returns (one vector per text, usage), where usage
    is an LLMResult with empty text/message carrying prompt_tokens, cost, attempts, duration_ms."""
    call = Call.prepare("embedding", model, task=task, timeout=None, retries=retries, trace=trace, max_tokens=0)
    if not texts:
        return [], LLMResult(text="", data=None, tool_calls=[], message={}, model=call.model, attempts=0)
    response, attempts, started = call.send(
        lambda: litellm_module().embedding(model=call.model, input=texts, **call.kwargs())
    )
    vectors = [list(item["embedding"]) for item in sorted(response.data, key=lambda item: item["index"])]
    usage = LLMResult(text="", data=None, tool_calls=[], message={}, model=call.model)
    usage = measured(usage, response, attempts, started)
    log_success(task, usage)
    return vectors, usage


def warm_up() -> None:
    """Import litellm and load what its first completion needs, without any network call.

    Worker processes call this before forking their pool, so each child does not pay
    seconds of import on its first case.
    """
    from evalsite.llm.client import unlogged

    with unlogged():  # as the gateway's calls are made
        litellm_module().completion(
            model="openai/warm-up", messages=[{"role": "user", "content": "hi"}], mock_response="ok"
        )


def forget_model_state() -> None:
    """Forget what was learnt about models (JSON modes) and free every concurrency slot."""
    from evalsite.llm.client import forget_clients, forget_slots

    structured.forget()
    identity.forget()
    forget_clients()
    try:
        forget_slots()
    except Exception:
        pass


# ---- chat completions ---------------------------------------------------------


def _chat(call: Call, messages: Messages, *, retry_server_errors: bool = True, **params: Any) -> LLMResult:
    chosen = {name: value for name, value in params.items() if value is not None}
    if call.max_tokens:
        chosen["max_tokens"] = call.max_tokens
    response, attempts, started = call.send(
        lambda: litellm_module().completion(model=call.model, messages=messages, **chosen, **call.chat_kwargs()),
        retry_server_errors=retry_server_errors,
    )
    if not getattr(response, "choices", None):
        # litellm returns None when a 422 repeats after it dropped the unsupported params.
        raise LLMError("The model provider returned no answer to the request.", kind="bad_request", attempts=attempts)
    choice = response.choices[0]
    reply = choice.message
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
        finish_reason=str(getattr(choice, "finish_reason", "") or ""),
        max_tokens=call.max_tokens,
        model_reported=str(getattr(response, "model", "") or ""),
        system_fingerprint=str(getattr(response, "system_fingerprint", "") or ""),
    )
    result = measured(result, response, attempts, started)
    log_success(call.task, result)
    identity.identity_observe(call.model, result)
    if result.finish_reason == "content_filter" and not (result.text or result.tool_calls):
        # Gemini's SAFETY (or a prompt it blocked), Anthropic's refusal, Azure's filter: nothing to use.
        blocked = f"{provider_name(call.model)} refused to answer: its content filter stopped the answer."
        raise LLMError(blocked, kind="content_policy", attempts=attempts, result=result)
    return result


def _chat_json(call: Call, messages: Messages, temperature: float | None, schema: dict[str, Any]) -> LLMResult:
    """One JSON answer, asked for in the best way the server takes (structured.ladder)."""
    modes = structured.ladder(call.model)
    known = structured.remembered(call.model)
    if known in modes:
        modes = modes[modes.index(known) :]
    spent = 0
    for index, mode in enumerate(modes):
        last, confirmed = index == len(modes) - 1, mode == known
        params = structured.request_params(mode, schema, call.task)
        sent = messages if mode in structured.SCHEMA_MODES else structured.with_schema_hint(messages, schema)
        try:
            # A way not yet known to work is tried once: a 500 for it means "not this way".
            result = _chat(call, sent, temperature=temperature, retry_server_errors=confirmed or last, **params)
        except LLMError as error:
            refused = error.kind in ("bad_request", "server") and error.status in structured.FALLBACK_STATUSES
            if last or not refused or (confirmed and error.kind == "server"):
                error.attempts += spent
                raise
            spent += error.attempts
            continue
        structured.remember(call.model, mode)
        return replace(result, attempts=result.attempts + spent, json_mode=mode)
    raise AssertionError("unreachable: the last mode either answers or raises")


def _cut(call: Call, result: LLMResult) -> LLMError:
    limit = result.max_tokens or result.completion_tokens
    setting = f"EVALSITE_LLM_MAX_TOKENS_{call.task.upper()}"
    return LLMError(
        f"The model's answer was cut at {limit} tokens (the limit for {call.task} calls, {setting}) "
        "before its JSON was complete.",
        kind="truncated",
        attempts=result.attempts,
        result=result,
    )


def _began(text: str) -> str:
    excerpt = " ".join(text.split())[:120]
    return f" Its answer began: “{excerpt}”." if excerpt else ""


def _arguments(raw: str | None) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        decoded = json.loads(raw)
    except ValueError:
        return {"_raw": raw}
    return decoded if isinstance(decoded, dict) else {"_raw": raw}

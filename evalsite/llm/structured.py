"""Structured outputs: the schema in each server's own dialect, and what worked per model.

A JSON call walks a ladder of ways to ask for JSON, from the strictest the provider may
understand to the prompt alone, and steps down when the server refuses a way with a 4xx
or a 5xx (llama.cpp answers OpenAI's json_schema with a 500). The first way that answers
is remembered for the model, in the process and in Redis, so only the first call of a
model pays for the discovery.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from django.conf import settings

logger = logging.getLogger("evalsite.llm")

# json_schema: OpenAI's response_format (litellm turns it into Anthropic's tool, Gemini's
# response_schema and Ollama's `format`). llama_cpp: llama.cpp's json_object with a
# "schema" member. vllm: vLLM's guided_json. json_object: plain JSON mode. prompt: no
# parameter, the schema is in the prompt and the answer is parsed and repaired.
JSON_MODES = ("json_schema", "llama_cpp", "vllm", "json_object", "prompt")
# The modes in which the server gets the schema itself; in the others the prompt carries it.
SCHEMA_MODES = ("json_schema", "llama_cpp", "vllm")
SCHEMA_HINT = "Reply with only JSON matching this JSON schema: {schema}"
MEMO_KEY = "evalsite:llm:json-mode"
MEMO_SECONDS = 24 * 3600
# Statuses that mean "not this way of asking": a refused parameter, or a server that
# crashed on it. 503 (overloaded) and 429 are not about the request's shape.
FALLBACK_STATUSES = {400, 415, 422, 500, 501}
_memo: dict[str, str] = {}
# OpenAI's strict structured outputs refuse these keywords; we check them ourselves anyway.
# llama.cpp's own form (llama_cpp) gets them, and its grammar enforces them.
OPENAI_UNSUPPORTED = frozenset({"minLength", "maxLength"})


def ladder(model: str) -> list[str]:
    """The ways to ask `model` for JSON, best first."""
    pinned = settings.EVALSITE_LLM_JSON_MODE
    if pinned in JSON_MODES and pinned != "auto":
        return [pinned] if pinned == "prompt" else [pinned, "prompt"]
    provider = model.split("/", 1)[0] if "/" in model else "openai"
    # Azure OpenAI is OpenAI's API: llama.cpp's json_object + "schema" is a 400 there, a wasted call.
    if provider in ("ollama", "ollama_chat", "anthropic", "gemini", "vertex_ai", "bedrock", "azure"):
        return ["json_schema", "json_object", "prompt"]
    if provider == "hosted_vllm":
        return ["json_schema", "vllm", "json_object", "prompt"]
    # OpenAI itself, and any OpenAI-compatible server behind EVALSITE_LLM_API_BASE.
    return ["json_schema", "llama_cpp", "json_object", "prompt"]


def request_params(mode: str, schema: dict[str, Any], name: str) -> dict[str, Any]:
    if mode == "json_schema":
        sent = _without(schema, OPENAI_UNSUPPORTED)
        spec = {"name": re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64] or "answer", "schema": sent}
        if is_strict(schema):
            spec["strict"] = True
        return {"response_format": {"type": "json_schema", "json_schema": spec}}
    if mode == "llama_cpp":
        return {"response_format": {"type": "json_object", "schema": schema}}
    if mode == "vllm":
        return {"extra_body": {"guided_json": schema}}
    if mode == "json_object":
        return {"response_format": {"type": "json_object"}}
    return {}


def _without(schema: Any, keywords: frozenset[str]) -> Any:
    if isinstance(schema, dict):
        return {k: _without(v, keywords) for k, v in schema.items() if k not in keywords}
    if isinstance(schema, list):
        return [_without(item, keywords) for item in schema]
    return schema


def with_schema_hint(messages: list[dict[str, Any]], schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages with the schema spelled out in the system message, for a server that does
    not take it as a parameter. Callers' prompts then need not repeat a long schema that
    a schema-enforcing server gets anyway."""
    text = json.dumps(schema)
    if any(text in str(message.get("content") or "") for message in messages):
        return messages
    hint = SCHEMA_HINT.format(schema=text)
    if messages and messages[0].get("role") == "system":
        first = {**messages[0], "content": f"{messages[0].get('content') or ''}\n\n{hint}"}
        return [first, *messages[1:]]
    return [{"role": "system", "content": hint}, *messages]


def is_strict(schema: Any) -> bool:
    """True when OpenAI's strict mode accepts the schema: every object closed and all its properties required."""
    if isinstance(schema, dict):
        if schema.get("type") == "object" or "properties" in schema:
            properties = schema.get("properties") or {}
            if schema.get("additionalProperties") is not False or set(schema.get("required") or []) != set(properties):
                return False
        return all(is_strict(value) for key, value in schema.items() if key not in ("enum", "const", "required"))
    if isinstance(schema, list):
        return all(is_strict(item) for item in schema)
    return True


def remembered(model: str) -> str | None:
    key = _memo_key(model)
    if key in _memo:
        return _memo[key]
    try:
        from evalsite.llm.client import redis_client

        value = redis_client().hget(MEMO_KEY, key)
    except Exception:  # Redis down: discover again, it only costs a call
        return None
    if value:
        _memo[key] = value.decode()
    return _memo.get(key)


def remember(model: str, mode: str) -> None:
    key = _memo_key(model)
    if _memo.get(key) == mode:
        return
    _memo[key] = mode
    logger.info("llm model=%s asks for JSON with %s", model, mode)
    try:
        from evalsite.llm.client import redis_client

        client = redis_client()
        client.hset(MEMO_KEY, key, mode)
        client.expire(MEMO_KEY, MEMO_SECONDS)
    except Exception:
        logger.warning("llm json mode of %s not shared: Redis did not answer", model)


def forget() -> None:
    _memo.clear()
    try:
        from evalsite.llm.client import redis_client

        redis_client().delete(MEMO_KEY)
    except Exception:
        pass


def _memo_key(model: str) -> str:
    return f"{model}@{settings.EVALSITE_LLM_API_BASE or ''}@{settings.EVALSITE_LLM_JSON_MODE}"


# ---- reading the answer ------------------------------------------------------------


def parse_json_answer(text: str, schema: dict[str, Any]) -> tuple[Any, str | None]:
    """(data, None) when `text` holds JSON matching `schema`, else (None, a short reason)."""
    data, problem, _ = check_answer(text, schema)
    return data, problem


def check_answer(text: str, schema: dict[str, Any]) -> tuple[Any, str | None, bool]:
    """(data, problem, is_json): is_json tells "not JSON at all" from "JSON that breaks the schema"."""
    import jsonschema

    data = extract_json(text)
    if data is None:
        return None, ("the answer is not valid JSON" if text.strip() else "the answer was empty"), False
    validator = jsonschema.Draft202012Validator(_open(schema))
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is None:
        return data, None, True
    where = "/".join(str(part) for part in error.absolute_path)
    if error.validator == "required":
        missing = re.match(r"'(.+?)' is a required property", error.message)
        field = missing.group(1) if missing else error.message
        return None, f'the JSON has no "{field}" field' + (f" in {where}" if where else ""), True
    return None, f"at {where or 'the top level'}: {error.message[:200]}", True


def _open(schema: Any) -> Any:
    """The schema without additionalProperties: false. Servers get it closed (strict mode needs
    that), but an extra key in an answer from a server that ignored the schema is harmless,
    and refusing it would cost a repair call."""
    if isinstance(schema, dict):
        return {k: _open(v) for k, v in schema.items() if not (k == "additionalProperties" and v is False)}
    if isinstance(schema, list):
        return [_open(item) for item in schema]
    return schema


def extract_json(text: str) -> Any:
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
            # strict=False: raw newlines inside strings, which llama.cpp's JSON grammar lets through.
            return json.loads(candidate, strict=False)
        except ValueError:
            continue
    return None

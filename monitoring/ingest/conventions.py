"""What a trace's spans say, read from the two conventions instrumentations follow.

GenAI semantic conventions (opentelemetry.io/docs/specs/semconv/gen-ai/): `gen_ai.input.messages`
and `gen_ai.output.messages` (JSON, messages of typed parts, as opentelemetry-instrumentation-openai-v2
sends them with content capture on), `gen_ai.system_instructions`, the older span events
(`gen_ai.system.message`, `gen_ai.user.message`, `gen_ai.assistant.message`, `gen_ai.tool.message`,
`gen_ai.choice`, `gen_ai.content.prompt` / `gen_ai.content.completion`) and indexed
`gen_ai.prompt.N.*` / `gen_ai.completion.N.*` attributes; `gen_ai.usage.input_tokens` /
`output_tokens`, `gen_ai.request.model` / `gen_ai.response.model`, tool spans
(`gen_ai.tool.name`, `gen_ai.tool.call.id`, `.arguments`, `.result`), `gen_ai.conversation.id`.

OpenInference (github.com/Arize-ai/openinference, spec/semantic_conventions.md):
`llm.input_messages.N.message.role` / `.content` / `.tool_calls.M.tool_call.*`,
`llm.output_messages...`, `input.value` / `output.value`, `retrieval.documents.N.document.*`,
`tool.name` / `tool.parameters`, `llm.token_count.prompt` / `completion`, `llm.model_name`,
`session.id`, `user.id`, `tag.tags`, `openinference.span.kind`.

A message here is {"role", "content"}, with "tool_calls": [{"id", "name", "arguments"}] on an
assistant's and "tool_call_id" on a tool's; arguments sent as JSON text are parsed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

LLM_OPERATIONS = {"chat", "text_completion", "generate_content"}
TOOL_OPERATIONS = {"execute_tool"}
_INDEXED_MESSAGE = re.compile(r"^llm\.(input|output)_messages\.(\d+)\.message\.(.+)$")
_INDEXED_PROMPT = re.compile(r"^gen_ai\.(prompt|completion)\.(\d+)\.(.+)$")
_INDEXED_DOCUMENT = re.compile(r"^retrieval\.documents\.(\d+)\.document\.(.+)$")
_EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
INT_MAX = 2**31 - 1


def summarise(spans: list[Any]) -> dict[str, Any]:
    """The trace's summary fields from all its spans (model rows or alike: span_id, parent_span_id,
    name, start/end_time_unix_nano, status_code, status_message, attributes, events)."""
    spans = sorted(spans, key=lambda span: (span.end_time_unix_nano, span.start_time_unix_nano))
    root = _root(spans)
    exchanges = [(span, found) for span in spans if (found := llm_messages(span)) is not None]
    summary: dict[str, Any] = {"messages": [], "question": "", "answer": "", "model": ""}
    if exchanges:
        last_span, (inputs, outputs) = exchanges[-1]
        summary["messages"] = inputs + outputs
        summary["model"] = _first_text(
            last_span.attributes, "gen_ai.response.model", "gen_ai.request.model", "llm.model_name"
        )
        summary["answer"] = next((m["content"] for m in reversed(outputs) if m.get("content")), "")
    root_input, root_output = _text_value(root, "input.value"), _text_value(root, "output.value")
    if root_output and llm_messages(root) is None:
        summary["answer"] = root_output  # the agent's own final answer, around its model calls
    if not summary["messages"] and (root_input or root_output):
        summary["messages"] = [{"role": "user", "content": root_input}] * bool(root_input) + [
            {"role": "assistant", "content": root_output}
        ] * bool(root_output)
    summary["question"] = next(
        (m["content"] for m in reversed(summary["messages"]) if m["role"] == "user" and m.get("content")),
        root_input,
    )
    llm_spans = [span for span, _ in exchanges] or spans
    summary["input_tokens"] = min(sum(_tokens(span, "input") for span in llm_spans), INT_MAX)
    summary["output_tokens"] = min(sum(_tokens(span, "output") for span in llm_spans), INT_MAX)
    summary["cost"] = sum(_number(span.attributes, "gen_ai.usage.cost", "llm.cost.total") for span in llm_spans)
    summary["tool_calls"] = tool_calls(spans, [found for _, found in exchanges])
    summary["retrieval_documents"] = [doc for span in spans for doc in retrieval_documents(span.attributes)]
    summary["session_id"] = _first_of(spans, root, "session.id", "gen_ai.conversation.id")
    summary["user_id"] = _first_of(spans, root, "user.id", "enduser.id")
    summary["tags"] = _tags(spans)
    errors = [span for span in spans if span.status_code == "error"]
    summary["status"] = "error" if errors else "ok"
    summary["error"] = (errors[0].status_message or f"{errors[0].name} failed") if errors else ""
    summary["root"] = root
    return summary


def _root(spans: list[Any]) -> Any:
    ids = {span.span_id for span in spans}
    roots = [span for span in spans if not span.parent_span_id or span.parent_span_id not in ids]
    # A true root (no parent) first, then the earliest of the orphans.
    return min(roots or spans, key=lambda span: (bool(span.parent_span_id), span.start_time_unix_nano))


# ---- messages -------------------------------------------------------------------------------


def llm_messages(span: Any) -> tuple[list[dict], list[dict]] | None:
    """(input messages, output messages) of a model call, or None when the span is none."""
    attributes = span.attributes
    for read in (_semconv_json, _openinference, _indexed_prompt, _events):
        found = read(attributes, span.events)
        if found is not None:
            return found
    if attributes.get("gen_ai.operation.name") in LLM_OPERATIONS or attributes.get("openinference.span.kind") == "LLM":
        return _from_input_value(attributes)
    return None


def _semconv_json(attributes: dict, _events: list) -> tuple[list, list] | None:
    if "gen_ai.input.messages" not in attributes and "gen_ai.output.messages" not in attributes:
        return None
    inputs = [_part_message(m) for m in _json_list(attributes.get("gen_ai.input.messages"))]
    system = _json_list(attributes.get("gen_ai.system_instructions"))
    if system:
        inputs.insert(0, {"role": "system", "content": _parts_text(system)})
    outputs = [_part_message(m) for m in _json_list(attributes.get("gen_ai.output.messages"))]
    return inputs, outputs


def _part_message(message: Any) -> dict:
    if not isinstance(message, dict):
        return {"role": "user", "content": _text(message)}
    raw_parts = message.get("parts")
    parts: list[Any] = raw_parts if isinstance(raw_parts, list) else []
    result: dict[str, Any] = {"role": _text(message.get("role")) or "user", "content": _parts_text(parts)}
    calls = [_call(part) for part in parts if isinstance(part, dict) and part.get("type") == "tool_call"]
    if calls:
        result["tool_calls"] = calls
    responses = [part for part in parts if isinstance(part, dict) and part.get("type") == "tool_call_response"]
    if responses:
        result["tool_call_id"] = _text(responses[0].get("id"))
        result["content"] = "".join(_text(part.get("response", part.get("result"))) for part in responses)
    return result


def _parts_text(parts: list) -> str:
    return "".join(
        _text(part.get("content")) for part in parts if isinstance(part, dict) and part.get("type", "text") == "text"
    )


def _openinference(attributes: dict, _events: list) -> tuple[list, list] | None:
    found: dict[str, dict[int, dict]] = {"input": {}, "output": {}}
    for key, value in attributes.items():
        match = _INDEXED_MESSAGE.match(key)
        if match:
            found[match[1]].setdefault(int(match[2]), {})[match[3]] = value
    if not found["input"] and not found["output"]:
        return None
    return [_flat_message(found["input"][i]) for i in sorted(found["input"])], [
        _flat_message(found["output"][i]) for i in sorted(found["output"])
    ]


def _flat_message(flat: dict[str, Any]) -> dict:
    content = _text(flat.get("content"))
    if not content:  # multi-part: message.contents.N.message_content.text
        texts = sorted((k, v) for k, v in flat.items() if k.startswith("contents.") and k.endswith(".text"))
        content = "".join(_text(v) for _, v in texts)
    message: dict[str, Any] = {"role": _text(flat.get("role")) or "user", "content": content}
    calls: dict[int, dict] = {}
    for key, value in flat.items():
        match = re.match(r"^tool_calls\.(\d+)\.tool_call\.(.+)$", key)
        if match:
            calls.setdefault(int(match[1]), {})[match[2]] = value
    if calls:
        message["tool_calls"] = [
            {
                "id": _text(call.get("id")),
                "name": _text(call.get("function.name")),
                "arguments": _arguments(call.get("function.arguments")),
            }
            for _, call in sorted(calls.items())
        ]
    if flat.get("tool_call_id"):
        message["tool_call_id"] = _text(flat["tool_call_id"])
    return message


def _indexed_prompt(attributes: dict, _events: list) -> tuple[list, list] | None:
    found: dict[str, dict[int, dict]] = {"prompt": {}, "completion": {}}
    for key, value in attributes.items():
        match = _INDEXED_PROMPT.match(key)
        if match:
            found[match[1]].setdefault(int(match[2]), {})[match[3]] = value
    if not found["prompt"] and not found["completion"]:
        return None
    return [_flat_message(found["prompt"][i]) for i in sorted(found["prompt"])], [
        _flat_message({"role": "assistant", **found["completion"][i]}) for i in sorted(found["completion"])
    ]


def _events(_attributes: dict, events: list) -> tuple[list, list] | None:
    inputs: list[dict] = []
    outputs: list[dict] = []
    seen = False
    for event in events:
        name, attrs = event.get("name"), event.get("attributes") or {}
        if name in _EVENT_ROLES:
            seen = True
            inputs.append(_openai_message({"role": attrs.get("role") or _EVENT_ROLES[name], **attrs}))
        elif name == "gen_ai.choice":
            seen = True
            message = attrs.get("message")
            message = _json_value(message) if isinstance(message, str) else message
            outputs.append(_openai_message({"role": "assistant", **(message if isinstance(message, dict) else attrs)}))
        elif name in ("gen_ai.content.prompt", "gen_ai.content.completion"):
            seen = True
            target = inputs if name.endswith("prompt") else outputs
            value = attrs.get("gen_ai.prompt" if name.endswith("prompt") else "gen_ai.completion")
            role = "user" if name.endswith("prompt") else "assistant"
            target.extend(_openai_messages(value, role))
    return (inputs, outputs) if seen else None


def _from_input_value(attributes: dict) -> tuple[list, list]:
    request = _json_value(attributes.get("input.value"))
    response = _json_value(attributes.get("output.value"))
    inputs = _openai_messages(
        request.get("messages") if isinstance(request, dict) else attributes.get("input.value"), "user"
    )
    choices = response.get("choices") if isinstance(response, dict) else None
    if isinstance(choices, list):
        outputs = [_openai_message(c.get("message") or {}) for c in choices if isinstance(c, dict)]
    else:
        outputs = _openai_messages(attributes.get("output.value"), "assistant")
    return inputs, outputs


def _openai_messages(value: Any, role: str) -> list[dict]:
    value = _json_value(value) if isinstance(value, str) else value
    if isinstance(value, list):
        return [_openai_message(m) if isinstance(m, dict) else {"role": role, "content": _text(m)} for m in value]
    if isinstance(value, dict):
        return [_openai_message({"role": role, **value})]
    return [{"role": role, "content": _text(value)}] if value not in (None, "") else []


def _openai_message(message: dict) -> dict:
    content = message.get("content")
    if isinstance(content, list):  # OpenAI's content parts
        content = "".join(_text(p.get("text")) for p in content if isinstance(p, dict))
    result: dict[str, Any] = {"role": _text(message.get("role")) or "user", "content": _text(content)}
    calls = message.get("tool_calls")
    calls = _json_value(calls) if isinstance(calls, str) else calls
    if isinstance(calls, list) and calls:
        result["tool_calls"] = [_call(call) for call in calls if isinstance(call, dict)]
    call_id = message.get("tool_call_id") or (message.get("id") if result["role"] == "tool" else None)
    if call_id:
        result["tool_call_id"] = _text(call_id)
    return result


def _call(call: dict) -> dict:
    raw_function = call.get("function")
    function: dict[Any, Any] = raw_function if isinstance(raw_function, dict) else call
    return {
        "id": _text(call.get("id")),
        "name": _text(function.get("name")),
        "arguments": _arguments(function.get("arguments")),
    }


# ---- tools, documents, tokens ------------------------------------------------------------------


def tool_calls(spans: list[Any], exchanges: list[tuple[list, list]]) -> list[dict]:
    """Every tool call the model asked for, with the result the app sent back, and every tool span."""
    calls: dict[str, dict] = {}
    unnamed: list[dict] = []
    for inputs, outputs in exchanges:
        for message in outputs + inputs:
            for call in message.get("tool_calls") or []:
                key = call["id"] or f"{call['name']}:{json.dumps(call['arguments'], sort_keys=True)}"
                calls.setdefault(key, {**call, "result": None})
        for message in inputs:
            if message["role"] == "tool" and message.get("tool_call_id") in calls:
                calls[message["tool_call_id"]]["result"] = message["content"]
    for span in spans:
        call = _tool_span(span.attributes)
        if call is None:
            continue
        if call["id"] and call["id"] in calls:
            known = calls[call["id"]]
            known["result"] = known["result"] if call["result"] is None else call["result"]
        elif call["id"]:
            calls[call["id"]] = call
        else:
            unnamed.append(call)
    return list(calls.values()) + unnamed


def _tool_span(attributes: dict) -> dict | None:
    if attributes.get("openinference.span.kind") == "TOOL" or "tool.name" in attributes:
        return {
            "id": _text(attributes.get("tool_call.id") or attributes.get("tool.id")),
            "name": _text(attributes.get("tool.name")),
            "arguments": _arguments(attributes.get("tool.parameters", attributes.get("input.value"))),
            "result": attributes.get("output.value"),
        }
    if attributes.get("gen_ai.operation.name") in TOOL_OPERATIONS or "gen_ai.tool.name" in attributes:
        return {
            "id": _text(attributes.get("gen_ai.tool.call.id")),
            "name": _text(attributes.get("gen_ai.tool.name")),
            "arguments": _arguments(attributes.get("gen_ai.tool.call.arguments")),
            "result": attributes.get("gen_ai.tool.call.result"),
        }
    return None


def retrieval_documents(attributes: dict) -> list[dict]:
    found: dict[int, dict] = {}
    for key, value in attributes.items():
        match = _INDEXED_DOCUMENT.match(key)
        if match:
            found.setdefault(int(match[1]), {})[match[2]] = value
    return [
        {
            "id": _text(doc.get("id")),
            "content": _text(doc.get("content")),
            "score": doc.get("score"),
            **({"metadata": _json_value(doc["metadata"])} if "metadata" in doc else {}),
        }
        for _, doc in sorted(found.items())
    ]


def _tokens(span: Any, side: str) -> int:
    names = {
        "input": ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt"),
        "output": ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion"),
    }[side]
    return max(0, int(_number(span.attributes, *names)))


# ---- small readers ---------------------------------------------------------------------------


def _number(attributes: dict, *names: str) -> float:
    for name in names:
        value = attributes.get(name)
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            return value if abs(value) < 1e15 else 0
        if isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                continue
            return number if abs(number) < 1e15 else 0
    return 0


def _first_text(attributes: dict, *names: str) -> str:
    return next((_text(attributes[name]) for name in names if attributes.get(name) not in (None, "")), "")


def _first_of(spans: Iterable[Any], root: Any, *names: str) -> str:
    for span in (root, *spans):
        found = _first_text(span.attributes, *names)
        if found:
            return found
    return ""


def _tags(spans: list[Any]) -> list[str]:
    tags: list[str] = []
    for span in spans:
        value = span.attributes.get("tag.tags")
        for tag in value if isinstance(value, list) else _json_list(value) if isinstance(value, str) else []:
            if _text(tag) and _text(tag) not in tags:
                tags.append(_text(tag))
    return tags


def _text_value(span: Any, name: str) -> str:
    value = span.attributes.get(name)
    if not isinstance(value, str) or not value:
        return ""
    mime = span.attributes.get(name.replace(".value", ".mime_type"), "")
    if mime == "application/json" or (value[:1] in "{[" and _json_value(value) is not None):
        return ""  # a request or response document, not an answer's text
    return value


def _arguments(value: Any) -> Any:
    if isinstance(value, str):
        parsed = _json_value(value)
        return parsed if isinstance(parsed, dict | list) else value
    return value if value is not None else {}


def _json_value(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return None


def _json_list(value: Any) -> list:
    value = _json_value(value)
    return value if isinstance(value, list) else []


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value) if isinstance(value, dict | list) else str(value)

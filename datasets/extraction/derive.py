"""With a model, on request: the user's message written from steps that quote none.

A "Quoted question" column whose cell quotes no user message leaves the whole steps text
as the question (tables._quoted_question marks the case with `unquoted_from`). When the
user ticks the mapping step's option, the extraction job asks the model, case by case, for
the message those steps send; the case keeps the steps as metadata and records that the
model wrote its question (extra["question_written_by"]). A failed or empty answer leaves
the case as it was, with its warning, and says why.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings

from evalsite import llm

MAX_MESSAGE_CHARS = 5_000
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"message": {"type": "string"}},
    "required": ["message"],
}
SYSTEM_PROMPT = """You read one test case of a QA test plan: the steps a tester follows in a chat with an AI assistant.
Write the message the user sends to the assistant in these steps, as the user would type it, in the language of the
steps. Use only what the steps and the scenario say, and do not answer it. When the steps send the assistant no
message, reply with an empty message.

Reply with JSON only: {"message": "..."}"""


def questions_derive(cases: list[dict[str, Any]], *, trace: Any = None) -> None:
    """Fill the question of every case marked `unquoted_from` from its steps, in place."""
    todo = [case for case in cases if case.get("unquoted_from")]
    if not todo:
        return
    with ThreadPoolExecutor(max_workers=settings.EVALSITE_EXTRACT_CONCURRENCY) as pool:
        answers = list(pool.map(lambda item: _message(item[1], {"dataset": trace, "case": item[0]}), enumerate(todo)))
    for case, (message, problem) in zip(todo, answers, strict=True):
        column = case.pop("unquoted_from")
        steps = case["metadata"].get(column, "")
        if not message or message == steps:
            case["warnings"].append(problem or f"The model found no message the “{column}” steps send.")
            continue
        case["question"], case["question_from"], case["question_written_by"] = message, column, "model"
        case["warnings"] = [w for w in case["warnings"] if not w.startswith(f"The “{column}” cell quotes")]
        case["warnings"].append(
            f"The model wrote this question from the “{column}” text, which quotes no message (kept below): check it."
        )


def _message(case: dict[str, Any], trace: dict[str, Any]) -> tuple[str, str]:
    """(the message, "") or ("", why not)."""
    column = case["unquoted_from"]
    parts = [f"{header}: {text}" for header, text in case["metadata"].items() if header != column]
    parts.append(f"{column}: {case['metadata'].get(column, '')}")
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n".join(parts)}]
    try:
        result = llm.complete_json(messages, schema=SCHEMA, task="extract", trace=trace)
    except llm.LLMError as error:
        return "", f"The model could not write this question from the “{column}” steps: {error.message}"
    assert result.data is not None
    return " ".join(str(result.data["message"]).split())[:MAX_MESSAGE_CHARS], ""

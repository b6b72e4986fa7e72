"""Is a model-written test case a test case? Checked before it is kept.

A small model asked for cases can answer with the shape right and the content empty:
questions such as "R1" (the rule number it was told to cite), expected answers such as
"{ {" or "{ {'type':" (a piece of the JSON it was asked for), placeholders
("<question>", "..."), the schema's or the prompt's own words, or the question copied
as its answer. Such a case passes the JSON schema and would be counted as Ready; these
checks reject it with a reason the user reads. Generation (generator.py) and extraction
from prose (datasets.extraction.llm_cases) both use them. The labelled set is
tests/datasets/test_generation_checks.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

MIN_QUESTION_WORDS = 2
MIN_QUESTION_LETTERS = 6
# Share of JSON punctuation among a text's non-space characters from which it reads as a
# fragment of JSON rather than words ("{ {'type':" is 5 of 9).
JSON_PUNCTUATION_SHARE = 0.3
PROMPT_COPY_WORDS = 5  # a text this long found word for word in the prompt was copied from it
SHOWN_CHARS = 60

_JSON_PUNCTUATION = set("{}[]\"'<>:,\\")
_WORD = re.compile(r"[^\W_]+")
_PLACEHOLDER_WORDS = (
    r"question|answer|expected[ _]answer|expected|response|string|str|text|value|placeholder|example|sample|"
    r"todo|tbd|tba|n/?a|null|undefined|xxx+|foo|bar|lorem ipsum.*|test(?: case)?|"
    r"your (?:question|answer|text)(?: here)?|insert .{0,40}|type here|\.{2,}|…"
)
_PLACEHOLDER = re.compile(rf"^\W*(?:the\s+|an?\s+)?(?:{_PLACEHOLDER_WORDS})\W*$", re.IGNORECASE)
# "<2-4 short sentences: ...>", "[answer]", "{question}": a slot to fill, not its content.
_SLOT = re.compile(r"^\s*(?:<[^<>]{1,300}>|\[[^\[\]]{1,80}\]|\{[^{}]{1,80}\})\s*$")
_SLOT_WORDS = re.compile(r"lorem ipsum|your (?:question|answer) here|insert (?:the |your )?\w+ here", re.IGNORECASE)
# {"question": ..., {'type': ...: a text that opens a JSON object instead of saying something
# (JSON quoted inside a sentence is words about JSON, and stays).
_JSON_KEY = re.compile(r"[{\[,]\s*['\"][\w ]{1,40}['\"]\s*:")


def text_problem(text: str, *, question: bool) -> str:
    """Why `text` is not a usable question (question=True) or expected answer, or ""."""
    stripped = text.strip()
    if not stripped:
        return "it is empty"
    if (stripped[0] in "{[" and _JSON_KEY.search(stripped)) or _json_share(stripped) >= JSON_PUNCTUATION_SHARE:
        return "it is a fragment of JSON, not words"
    if _PLACEHOLDER.match(stripped) or _SLOT.match(stripped) or _SLOT_WORDS.search(stripped):
        return "it is a placeholder, not real text"
    words = _WORD.findall(stripped)
    if not words:
        return "it has no words"
    letters = sum(ch.isalpha() for ch in stripped)
    if question and (len(words) < MIN_QUESTION_WORDS or letters < MIN_QUESTION_LETTERS):
        return "it is too short to be a question"
    return ""


def case_problem(question: str, answer: str, *, own_words: Iterable[str] = ()) -> str:
    """Why a model-written case is unusable, naming the field, or "".

    own_words: texts the model was given (its instructions, the schema's descriptions);
    a question or answer copied from them is the model repeating its prompt."""
    if problem := text_problem(question, question=True):
        return f"the question {shown(question)}: {problem}"
    if problem := text_problem(answer, question=False):
        return f"the expected answer {shown(answer)}: {problem}"
    if _squash(question) == _squash(answer):
        return f"the expected answer repeats the question {shown(question)}"
    own_words = list(own_words)
    for name, text in (("question", question), ("expected answer", answer)):
        if copied_from(text, own_words):
            return f"the {name} {shown(text)} is copied from the instructions the model was given"
    return ""


def copied_from(text: str, own_words: Iterable[str], *, min_words: int = PROMPT_COPY_WORDS) -> bool:
    """`text` (at least min_words long) appears word for word in one of `own_words`."""
    squashed = _squash(text)
    if len(squashed.split()) < min_words:
        return False
    return any(f" {squashed} " in f" {_squash(words)} " for words in own_words)


def schema_words(schema: Any) -> list[str]:
    """The descriptions and property names of a JSON schema, the text a weak model echoes."""
    found: list[str] = []
    if isinstance(schema, dict):
        if isinstance(schema.get("description"), str):
            found.append(schema["description"])
        for name, value in (schema.get("properties") or {}).items():
            found.append(name)
            found += schema_words(value)
        found += schema_words(schema.get("items"))
    return found


def shown(text: str) -> str:
    """A text as a warning quotes it: on one line, cut at SHOWN_CHARS."""
    line = " ".join(text.split())
    return f"“{line if len(line) <= SHOWN_CHARS else line[: SHOWN_CHARS - 1] + '…'}”"


def _json_share(text: str) -> float:
    visible = [ch for ch in text if not ch.isspace()]
    return sum(ch in _JSON_PUNCTUATION for ch in visible) / len(visible)


def _squash(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))

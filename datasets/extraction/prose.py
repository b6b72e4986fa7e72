"""Prose: labelled question/answer pairs read without a model, and chunks for the model.

Many test plans exported to PDF or Word are lists like

    Q3: Can I get a refund after 40 days?
    Expected answer: No. Refunds are available within 30 days of purchase.

Those become cases deterministically (with the page they are on). Anything else
is cut into chunks that keep page markers, for llm_cases.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

MAX_LABELLED_FIELD = 20_000
MIN_LABELLED_QUESTIONS = 2

_QUESTION_LABEL = re.compile(
    r"^\s*(?:[-*•]\s*)?(?:\*\*)?(?:q|question|prompt|input|query|scenario|user (?:question|input|message|prompt)|"
    r"test (?:question|input|prompt))\s*#?\d{0,4}\s*(?:\*\*)?\s*:(?:\*\*)?\s*(?P<rest>.*)$",
    re.IGNORECASE,
)
_ANSWER_LABEL = re.compile(
    r"^\s*(?:[-*•]\s*)?(?:\*\*)?(?:a|answer|expected|expected (?:answer|output|response|result|behaviou?r)|"
    r"ideal (?:answer|response)|reference answer|correct answer)\s*#?\d{0,4}\s*(?:\*\*)?\s*:(?:\*\*)?\s*(?P<rest>.*)$",
    re.IGNORECASE,
)


def labelled_cases(pages: list[tuple[int | None, str]]) -> list[dict[str, Any]]:
    """Cases written as "Question: ... / Expected answer: ..." lines; [] when the text is not such a list."""
    cases: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    target = ""
    for page, text in pages:
        for line in text.splitlines():
            if match := _QUESTION_LABEL.match(line):
                current = {"question": match["rest"], "expected_answer": "", "page": page, "lines": [line.strip()]}
                cases.append(current)
                target = "question"
            elif current is not None and (match := _ANSWER_LABEL.match(line)):
                current["expected_answer"] = match["rest"]
                current["lines"].append(line.strip())
                target = "expected_answer"
            elif current is not None and target and line.strip():
                if len(current[target]) < MAX_LABELLED_FIELD:
                    current[target] = f"{current[target]}\n{line.strip()}".strip()
                    current["lines"].append(line.strip())
            elif not line.strip() and target == "expected_answer":
                target = ""  # a blank line ends an answer; following prose is not part of it
    found = [case for case in cases if case["question"].strip()]
    if len(found) < MIN_LABELLED_QUESTIONS:
        return []
    return [
        {
            "question": case["question"].strip()[:MAX_LABELLED_FIELD],
            "expected_answer": case["expected_answer"].strip()[:MAX_LABELLED_FIELD],
            "case_id": "",
            "document_context": "",
            "judge_guideline": "",
            "tags": [],
            "location": f"page {case['page']}" if case["page"] else "",
            "span": "\n".join(case["lines"])[:2000],
        }
        for case in found
    ]


@dataclass
class Chunk:
    text: str  # with "[Page N]" markers when the source has pages
    pages: list[int]


def chunk_pages(pages: list[tuple[int | None, str]], *, max_chars: int) -> list[Chunk]:
    """Cut the text into chunks of at most max_chars, on paragraph (or sentence) boundaries."""
    chunks: list[Chunk] = []
    parts: list[str] = []
    numbers: list[int] = []
    size = 0

    def flush() -> None:
        nonlocal parts, numbers, size
        if "".join(parts).strip():
            chunks.append(Chunk(text="\n".join(parts).strip(), pages=numbers))
        parts, numbers, size = [], [], 0

    for page, text in pages:
        marker_needed = page is not None
        for piece in _pieces(text, max_chars - 20):
            if size + len(piece) > max_chars:
                flush()
                marker_needed = page is not None
            if marker_needed and page is not None:
                parts.append(f"[Page {page}]")
                numbers.append(page)
                marker_needed = False
            parts.append(piece)
            size += len(piece) + 1
    flush()
    return chunks


def _pieces(text: str, limit: int) -> list[str]:
    """Paragraphs, and sentences (or hard cuts) of paragraphs longer than limit."""
    pieces: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        paragraph = paragraph.strip()
        if not paragraph:
            continue
        if len(paragraph) <= limit:
            pieces.append(paragraph)
            continue
        sentence_run = ""
        for sentence in re.split(r"(?<=[.!?])\s+", paragraph):
            while len(sentence) > limit:
                pieces.append(sentence[:limit])
                sentence = sentence[limit:]
            if len(sentence_run) + len(sentence) + 1 > limit:
                pieces.append(sentence_run)
                sentence_run = ""
            sentence_run = f"{sentence_run} {sentence}".strip()
        if sentence_run:
            pieces.append(sentence_run)
    return pieces


def page_of(span: str, squashed_pages: dict[int, str], candidates: list[int]) -> int | None:
    """The page whose text holds the span (the model's page number is only a hint).

    squashed_pages: {page: squash(text)}, computed once per document.
    """
    needle = squash(span)[:200]
    if len(needle) < 12:
        return None
    for page in candidates:
        if needle in squashed_pages.get(page, ""):
            return page
    return None


def squash(text: str) -> str:
    return " ".join(text.lower().split())

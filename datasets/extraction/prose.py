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
from dataclasses import field as dataclass_field
from typing import Any

MAX_LABELLED_FIELD = 20_000
MIN_LABELLED_QUESTIONS = 2
MAX_SPAN_CHARS = 2_000

_LEAD = r"^\s*(?:#{1,6}\s*)?(?:[-*•]\s*)?(?:\*\*)?"
_COLON = r"\s*#?\d{0,4}\s*(?:\*\*)?\s*:(?:\*\*)?\s*(?P<rest>.*)$"
_QUESTION_LABEL = re.compile(
    _LEAD + r"(?:q|question|prompt|input|query|(?P<weak>scenario)|utterance|"
    r"(?:user|customer|caller) (?:question|input|message|prompt|says|asks|utterance)|"
    r"test (?:question|input|prompt))" + _COLON,
    re.IGNORECASE,
)
_ANSWER_LABEL = re.compile(
    _LEAD + r"(?:a|answer|expected|expected (?:answer|output|response|result|behaviou?r)|"
    r"ideal (?:answer|response)|reference answer|correct answer)" + _COLON,
    re.IGNORECASE,
)
# Other labels a block may hold; each starts a field of the current case.
_FIELD_LABELS = [
    (
        "judge_guideline",
        re.compile(_LEAD + r"(?:notes?|guidelines?|judge guideline|grading notes|rubric)" + _COLON, re.I),
    ),
    ("document_context", re.compile(_LEAD + r"(?:context|document context|background)" + _COLON, re.I)),
    ("tags", re.compile(_LEAD + r"(?:tags?|labels?|category)" + _COLON, re.I)),
]
# A case's ID line: "ID: TC-001", "Case ID: R7", or a line (or heading) that starts with an
# id such as "TC-001", "REF_12", "BILL-3.2", optionally followed by a title.
_ID_LABEL = re.compile(
    _LEAD
    + r"(?:test case id|case id|test id|tc id|id)\s*(?:\*\*)?\s*:(?:\*\*)?\s*(?P<id>[\w.\-/]{1,100})\s*(?:\*\*)?\s*$",
    re.IGNORECASE,
)
# Not after a list bullet: "- ORD-1: refunded" inside an answer is a list item, not a new case.
_ID_LINE = re.compile(
    r"^\s*(?:#{1,6}\s*)?(?:\*\*)?(?P<id>[A-Z][A-Z0-9]{0,11}[-_.]\d{1,6}(?:[-_.][A-Za-z0-9]{1,10})*)(?:\*\*)?"
    r"\s*(?:$|[:\-–—.)]\s*(?P<title>.*)$)"
)
# A line that ends a block without starting a case: a heading, a rule, a table row.
_BLOCK_END = re.compile(r"^\s*(?:#{1,6}\s|-{3,}\s*$|\*{3,}\s*$|_{3,}\s*$|\|)")
_LIST_ITEM = re.compile(r"^\s*(?:[-*•]|\d{1,3}[.)])\s+")


@dataclass
class _Block:
    page: int | None
    line: int  # 1-based line of the text the block starts on
    case_id: str = ""
    question_weak: bool = False  # the question label describes the case ("Scenario:") rather than quotes the user
    fields: dict[str, list[str]] = dataclass_field(default_factory=dict)
    lines: list[str] = dataclass_field(default_factory=list)
    line_numbers: list[tuple[int | None, int]] = dataclass_field(default_factory=list)

    def add(self, name: str, text: str) -> None:
        self.fields.setdefault(name, []).append(text)


def labelled_cases(
    pages: list[tuple[int | None, str]], *, unit: str = "page"
) -> tuple[list[dict[str, Any]], list[tuple[int | None, str]]]:
    """Cases written as labelled blocks, and the prose left around them.

    A block is an optional ID line, then "Question:", "Expected answer:" and maybe "Notes:"
    (or Context, Tags); it ends at the next case's ID or question label, or at a heading,
    rule or table. Hard wraps inside a paragraph are joined, paragraph breaks kept. The
    location is the page (PDF), the line of the text (unit="line": Markdown, whose prose
    keeps the file's line numbers) or the paragraph (unit="paragraph": Word).
    Returns ([], pages) when the text holds fewer than two such questions.
    """
    blocks: list[_Block] = []
    current: _Block | None = None
    target = ""
    pending_id: tuple[str, int | None, int, str] | None = None  # (id, page, line, the line's text)
    for page, text in pages:
        for number, line in enumerate(text.splitlines(), start=1):
            stripped = line.strip()
            id_match = _ID_LABEL.match(line) or (None if _QUESTION_LABEL.match(line) else _ID_LINE.match(line))
            if id_match:
                pending_id, current, target = (id_match["id"][:100], page, number, stripped), None, ""
                continue
            match = _QUESTION_LABEL.match(line)
            if match and current is not None and _says_after_scenario(current, match):
                # "Scenario: ..." then "User says: ...": what the user says is the question.
                current.fields["scenario"] = current.fields.pop("question")
                target = "question"
                current.add(target, match["rest"])
            elif match:
                start_page, start_line = (pending_id[1], pending_id[2]) if pending_id else (page, number)
                current = _Block(page=start_page, line=start_line, case_id=pending_id[0] if pending_id else "")
                current.question_weak = bool(match["weak"])
                if pending_id:
                    current.lines.append(pending_id[3])
                pending_id = None
                blocks.append(current)
                target = "question"
                current.add(target, match["rest"])
            elif current is not None and (match := _ANSWER_LABEL.match(line)):
                target = "expected_answer"
                current.add(target, match["rest"])
            elif current is not None and (label := _field_label(line)):
                target, rest = label
                current.add(target, rest)
            elif current is not None and _BLOCK_END.match(line):
                current, target = None, ""
                continue
            elif current is not None and target:
                current.add(target, stripped)  # "" keeps a paragraph break
            else:
                continue
            if current is not None:
                current.lines.append(stripped)
                current.line_numbers.append((page, number))
    found = [block for block in blocks if _joined(block.fields.get("question", []))]
    if len(found) < MIN_LABELLED_QUESTIONS:
        return [], pages
    return [_block_case(block, unit, pages) for block in found], _leftover(pages, found)


def _says_after_scenario(block: _Block, match: re.Match[str]) -> bool:
    """A question label naming the user's message inside a block opened by "Scenario:"."""
    return (
        not match["weak"]
        and block.question_weak
        and "scenario" not in block.fields
        and not set(block.fields) - {"question", "document_context", "tags"}
    )


def _field_label(line: str) -> tuple[str, str] | None:
    for name, pattern in _FIELD_LABELS:
        if match := pattern.match(line):
            return name, match["rest"]
    return None


def _joined(lines: list[str]) -> str:
    """Lines of one field: wrapped lines joined with a space, paragraph breaks (blank lines)
    kept, and list items kept on their own lines."""
    paragraphs: list[str] = []
    current = ""
    for line in lines:
        if not line:
            if current:
                paragraphs.append(current)
            current = ""
        elif current and _LIST_ITEM.match(line):
            current = f"{current}\n{line}"
        else:
            current = f"{current} {line}".strip()
    if current:
        paragraphs.append(current)
    return "\n\n".join(paragraphs).strip()[:MAX_LABELLED_FIELD]


def _block_case(block: _Block, unit: str, pages: list[tuple[int | None, str]]) -> dict[str, Any]:
    fields = {name: _joined(lines) for name, lines in block.fields.items()}
    tags = [tag.strip()[:50] for tag in re.split(r"[,;]", fields.get("tags", "")) if tag.strip()][:20]
    if unit == "line":
        location = f"line {block.line}"
    elif unit == "paragraph":
        location = f"paragraph {_paragraph_number(pages, block.line)}"
    else:
        location = f"page {block.page}" if block.page else ""
    return {
        "question": fields.get("question", ""),
        "expected_answer": fields.get("expected_answer", ""),
        "case_id": block.case_id,
        "document_context": fields.get("document_context", ""),
        "judge_guideline": fields.get("judge_guideline", ""),
        "tags": tags,
        "metadata": {"Scenario": fields["scenario"]} if fields.get("scenario") else {},
        "location": location,
        "span": "\n".join(line for line in block.lines if line)[:MAX_SPAN_CHARS],
    }


def _paragraph_number(pages: list[tuple[int | None, str]], line: int) -> int:
    text = pages[0][1] if pages else ""
    before = text.splitlines()[: line - 1]
    return (
        sum(1 for index, value in enumerate(before) if value.strip() and (index == 0 or not before[index - 1].strip()))
        + 1
    )


def _leftover(pages: list[tuple[int | None, str]], blocks: list[_Block]) -> list[tuple[int | None, str]]:
    """The prose outside the labelled blocks (rules a model may still turn into cases)."""
    used = {place for block in blocks for place in block.line_numbers}
    used |= {(block.page, block.line) for block in blocks}
    return [
        (page, "\n".join("" if (page, n) in used else line for n, line in enumerate(text.splitlines(), start=1)))
        for page, text in pages
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

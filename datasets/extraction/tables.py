"""Tables to test cases, without a model.

A table is rows of sparse cells ({column number: text}) with the row numbers the
user sees. The header row is found among the first rows (test plans often start
with a title, a date and a blank line), by matching cells against synonyms. Each
later row with a question becomes a case; a row that repeats a header starts a
new table within the same sheet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

HEADER_SEARCH_ROWS = 30
MAX_QUESTION_CHARS = 20_000
MAX_FIELD_CHARS = 50_000

# Normalised header text -> case field. Normalising lower-cases, drops punctuation
# and parentheses, and collapses spaces, so "Expected Answer:" and "expected_answer" match.
SYNONYMS: dict[str, set[str]] = {
    "question": {
        "question",
        "questions",
        "prompt",
        "prompts",
        "input",
        "inputs",
        "query",
        "queries",
        "scenario",
        "scenarios",
        "user question",
        "user input",
        "user message",
        "user prompt",
        "user query",
        "test question",
        "test input",
        "test prompt",
        "test case",
        "test scenario",
        "utterance",
        "request",
        "customer question",
        "ask",
        "q",
    },
    "expected_answer": {
        "expected answer",
        "expected answers",
        "expected output",
        "expected outputs",
        "expected response",
        "expected result",
        "expected results",
        "expected",
        "ideal answer",
        "ideal response",
        "ideal output",
        "answer",
        "answers",
        "reference answer",
        "reference",
        "ground truth",
        "gold answer",
        "correct answer",
        "target",
        "target answer",
        "expected behaviour",
        "expected behavior",
        "response",
        "output",
        "a",
    },
    "case_id": {"id", "case id", "test id", "test case id", "tc id", "tc", "no", "number", "nr", "key", "ref"},
    "document_context": {
        "context",
        "document context",
        "retrieval context",
        "supporting text",
        "source text",
        "knowledge",
        "background",
    },
    "tags": {"tags", "tag", "labels", "label", "category", "categories", "topic", "area"},
    "judge_guideline": {
        "guideline",
        "guidelines",
        "judge guideline",
        "grading notes",
        "grading guideline",
        "evaluation notes",
        "rubric",
        "criteria",
        "notes for judge",
    },
}
_LOOKUP = {synonym: name for name, synonyms in SYNONYMS.items() for synonym in synonyms}
_QUESTION_WORDS = {"question", "prompt", "input", "query", "scenario", "utterance"}


@dataclass
class Table:
    """One sheet, CSV file or document table. rows: (row number as shown to the user, {column: text})."""

    label: str  # "Sheet1", "Table 2", "" for a CSV
    rows: list[tuple[int, dict[int, str]]] = field(default_factory=list)
    unit: str = "row"  # Markdown tables count lines of the file

    def location(self, row_number: int) -> str:
        return f"{self.label} {self.unit} {row_number}".strip()


@dataclass
class TableResult:
    cases: list[dict[str, Any]]
    header_found: bool


def normalise_header(text: str) -> str:
    text = re.sub(r"\(.*?\)|\[.*?\]", " ", text.lower())
    text = re.sub(r"[^a-z0-9]+", " ", text)
    return " ".join(text.split())


def header_field(text: str) -> str | None:
    """The case field a header cell names, or None."""
    key = normalise_header(text)
    if not key or len(key) > 60:
        return None
    if key in _LOOKUP:
        return _LOOKUP[key]
    words = set(key.split())
    # Longer headers ("Expected answer from the bot", "Customer prompt text"), but not
    # sentences that happen to contain a header word ("Question 3: how do I ...").
    if len(key.split()) > 5 or any(ch.isdigit() for ch in key):
        return None
    if "expected" in words or "ideal" in words:
        return "expected_answer"
    if words & _QUESTION_WORDS:
        return "question"
    return None


def header_mapping(cells: dict[int, str]) -> dict[str, int] | None:
    """{field: column} when this row is a header (it names a question column), else None."""
    mapping: dict[str, int] = {}
    for column in sorted(cells):
        name = header_field(cells[column])
        if name and name not in mapping:
            mapping[name] = column
    # "A" and "Q" alone are too weak to make a header without each other.
    if "question" not in mapping:
        return None
    if normalise_header(cells[mapping["question"]]) == "q" and "expected_answer" not in mapping:
        return None
    return mapping


def table_cases(table: Table) -> TableResult:
    """The cases one table holds, each with its provenance."""
    cases: list[dict[str, Any]] = []
    mapping: dict[str, int] | None = None
    for index, (row_number, cells) in enumerate(table.rows):
        candidate = header_mapping(cells) if (mapping is None and index < HEADER_SEARCH_ROWS) or mapping else None
        if candidate and (mapping is None or _repeats_header(cells, candidate)):
            mapping = candidate
            continue
        if mapping is None:
            continue
        case = _row_case(cells, mapping)
        if case:
            case["location"] = table.location(row_number)
            cases.append(case)
    return TableResult(cases=cases, header_found=mapping is not None)


def _repeats_header(cells: dict[int, str], mapping: dict[str, int]) -> bool:
    # A second header inside a sheet: its question cell is exactly a header name.
    return _LOOKUP.get(normalise_header(cells.get(mapping["question"], ""))) == "question"


def _row_case(cells: dict[int, str], mapping: dict[str, int]) -> dict[str, Any] | None:
    question = cells.get(mapping["question"], "").strip()
    if not question:
        return None

    def value(name: str, limit: int = MAX_FIELD_CHARS) -> str:
        column = mapping.get(name)
        return cells.get(column, "").strip()[:limit] if column is not None else ""

    tags = [tag.strip()[:50] for tag in re.split(r"[,;\n]", value("tags")) if tag.strip()][:20]
    return {
        "question": question[:MAX_QUESTION_CHARS],
        "expected_answer": value("expected_answer"),
        "case_id": value("case_id", 100),
        "document_context": value("document_context"),
        "judge_guideline": value("judge_guideline"),
        "tags": tags,
        "span": "",
    }


def cell_text(value: Any) -> str:
    """A spreadsheet value as the user reads it: 3.0 -> "3", dates without midnight times."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    if hasattr(value, "isoformat"):
        text = value.isoformat()
        return text.removesuffix("T00:00:00")
    return str(value)[:MAX_FIELD_CHARS]

"""One case of the model's answer (generator.py asks for them): validated, trimmed to our
limits, its attached document described as writers.py draws it. A case without a
question or an expected answer, or with an unusable document, is dropped with the reason.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from datasets.fields import SCENARIO_KEYS, clean_scenario
from datasets.generation.writers import DocumentSpec, FormalSpec, Party, TableSpec, clean
from evalsite.text import jaccard

NEAR_DUPLICATE = 0.8  # Jaccard similarity of content words at or above which two questions are one
MAX_QUESTION_CHARS = 4_000
MAX_ANSWER_CHARS = 8_000
MAX_PARAGRAPHS = 60
MAX_PARAGRAPH_CHARS = 4_000
MAX_COLUMNS = 30
MAX_ROWS = 500
MAX_CELL_CHARS = 1_000
MAX_LIST_ITEMS = 40


@dataclass(frozen=True)
class Rule:
    number: int
    section: str  # "Instructions", "Skills", "Guardrails", "Knowledge"
    text: str

    @property
    def label(self) -> str:
        return " ".join(f"R{self.number} · {self.section}: {self.text}".split())


@dataclass
class GeneratedCase:
    question: str
    expected_answer: str
    rule: Rule | None
    tests_rule: str  # what the case records ("R3 · Guardrails: Never share ..."), at most 300 characters
    document: DocumentSpec | None = None
    scenario: dict[str, Any] | None = None  # a scenario case's simulated user (datasets.fields.clean_scenario)


def is_near_duplicate(case: GeneratedCase, other: GeneratedCase) -> bool:
    """Two cases are one when their questions share most content words (Jaccard ≥ 0.8 over
    lower-cased words, stop words ignored: evalsite.text.jaccard). The attached document's
    title counts as part of the question, so "What is the total on this invoice?" about two
    different invoices is two cases."""
    return jaccard(_dedup_text(case), _dedup_text(other)) >= NEAR_DUPLICATE


def _dedup_text(case: GeneratedCase) -> str:
    return f"{case.question} {case.document.title}" if case.document else case.question


def parse_case(raw: Any, rules: list[Rule]) -> tuple[GeneratedCase | None, str]:
    """(case, "") or (None, why it was dropped)."""
    if not isinstance(raw, dict):
        return None, "not an object"
    question = clean(raw.get("question") or "")[:MAX_QUESTION_CHARS]
    answer = clean(raw.get("expected_answer") or "")[:MAX_ANSWER_CHARS]
    if not question:
        return None, "no question"
    if not answer:
        return None, "no expected answer"
    document = None
    if raw.get("document"):
        document = parse_document(raw["document"])
        if document is None:
            return None, "unusable document"
    rule = _cited_rule(raw.get("tests_rule"), rules)
    # One line: the case list shows it in a single row, and the case form keeps it so.
    tests_rule = rule.label if rule else " ".join(clean(raw.get("tests_rule") or "").split())
    return GeneratedCase(question, answer, rule, _shorten(tests_rule, 300), document), ""


def _cited_rule(value: Any, rules: list[Rule]) -> Rule | None:
    match = re.search(r"\d+", str(value or ""))
    number = int(match.group()) if match else 0
    return rules[number - 1] if 1 <= number <= len(rules) else None


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def parse_document(raw: Any) -> DocumentSpec | None:
    """The document described by the model, trimmed to our limits; None when it has no content."""
    if not isinstance(raw, dict):
        return None
    title = _shorten(clean(raw.get("title") or ""), 200)
    paragraphs = [_shorten(clean(p), MAX_PARAGRAPH_CHARS) for p in _list(raw.get("paragraphs"))]
    paragraphs = [p for p in paragraphs if p][:MAX_PARAGRAPHS]
    table = _parse_table(raw.get("table"))
    formal = _parse_formal(raw.get("formal"))
    if not title or not (paragraphs or table or formal):
        return None
    return DocumentSpec(
        title=title,
        context=_shorten(clean(raw.get("document_context") or ""), 300),
        format_hint=_shorten(clean(raw.get("format_hint") or ""), 100),
        paragraphs=paragraphs,
        table=table,
        formal=formal,
    )


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _parse_table(raw: Any) -> TableSpec | None:
    if not isinstance(raw, dict):
        return None
    columns = [_shorten(clean(c), 200) for c in _list(raw.get("columns"))][:MAX_COLUMNS]
    rows: list[list[str | int | float]] = []
    for row in _list(raw.get("rows"))[:MAX_ROWS]:
        if not isinstance(row, list):
            continue
        cells = [_cell(v) for v in row[: len(columns)]]
        cells += [""] * (len(columns) - len(cells))  # short rows are padded, long ones cut
        if any(cell != "" for cell in cells):
            rows.append(cells)
    if not columns or not any(columns) or not rows:
        return None
    return TableSpec(columns=[c or f"Column {i}" for i, c in enumerate(columns, start=1)], rows=rows)


def _cell(value: Any) -> str | int | float:
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return value
    return _shorten(clean(value), MAX_CELL_CHARS)


def _parse_formal(raw: Any) -> FormalSpec | None:
    if not isinstance(raw, dict):
        return None
    # Known kinds come back as "purchase_order"; anything else is kept as the model named it.
    kind = _shorten(clean(raw.get("kind") or ""), 40) or "Document"
    parties = [
        Party(
            role=_shorten(clean(p.get("role") or ""), 60),
            name=_shorten(clean(p.get("name") or ""), 200),
            details=[_shorten(clean(d), 200) for d in _list(p.get("details"))[:8] if clean(d)],
        )
        for p in _list(raw.get("parties"))[:3]
        if isinstance(p, dict) and clean(p.get("name") or "")
    ]
    fields = _labelled(raw.get("fields"))
    line_items = _parse_table(raw.get("line_items"))
    totals = _labelled(raw.get("totals"))
    notes = [_shorten(clean(n), MAX_PARAGRAPH_CHARS) for n in _list(raw.get("notes"))[:MAX_LIST_ITEMS] if clean(n)]
    if not (parties or fields or line_items or totals):
        return None
    return FormalSpec(
        kind=kind,
        parties=parties,
        fields=fields,
        line_items=line_items,
        totals=totals,
        notes=notes,
    )


def _labelled(raw: Any) -> list[tuple[str, str]]:
    pairs = []
    for item in _list(raw)[:MAX_LIST_ITEMS]:
        if isinstance(item, dict) and clean(item.get("label") or ""):
            pairs.append((_shorten(clean(item["label"]), 100), _shorten(clean(item.get("value", "")), 500)))
    return pairs


def parse_scenario(raw: Any) -> dict[str, Any] | None:
    """A generated case's scenario, cleaned like a hand-written one; None when it is unusable."""
    if not isinstance(raw, dict) or not isinstance(raw.get("scenario"), dict):
        return None
    wanted = {key: raw["scenario"].get(key) for key in SCENARIO_KEYS if raw["scenario"].get(key) is not None}
    try:
        return clean_scenario(wanted) or None
    except ValueError:
        return None

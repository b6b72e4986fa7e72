"""Dropping duplicate cases: exact repeats everywhere, near-duplicates among model-written cases."""

from __future__ import annotations

import re
from difflib import SequenceMatcher
from typing import Any

NEAR_DUPLICATE_RATIO = 0.9


def question_key(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def drop_exact(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop rows repeating an earlier question *and* expected answer (the same row pasted twice)."""
    seen: set[tuple[str, str]] = set()
    kept = []
    for case in cases:
        key = (question_key(case["question"]), question_key(case.get("expected_answer", "")))
        if key not in seen:
            seen.add(key)
            kept.append(case)
    return kept


class NearDuplicates:
    """Remembers questions kept so far; `is_new` is False for one that says the same thing again.

    Word-set overlap filters candidates cheaply before the character-level ratio,
    so 500 kept questions cost a few thousand comparisons, not a quarter million.
    """

    def __init__(self) -> None:
        self._kept: list[tuple[str, set[str]]] = []
        self._exact: set[str] = set()

    def is_new(self, question: str) -> bool:
        key = question_key(question)
        if not key or key in self._exact:
            return False
        words = set(key.split())
        numbers = {word for word in words if any(ch.isdigit() for ch in word)}
        for other, other_words in self._kept:
            # "Refund after 10 days?" and "Refund after 40 days?" test different rules.
            if numbers != {word for word in other_words if any(ch.isdigit() for ch in word)}:
                continue
            overlap = len(words & other_words) / max(len(words | other_words), 1)
            if overlap >= 0.6 and SequenceMatcher(None, key, other, autojunk=False).ratio() >= NEAR_DUPLICATE_RATIO:
                return False
        self._exact.add(key)
        self._kept.append((key, words))
        return True

"""Retrieval context: which expected passages the agent's retrieved passages hold, and how.

An expected passage is usually a sentence or two; what an agent retrieves is usually a whole
paragraph or chunk around it. So passages are compared by containment, never whole against whole:
an expected passage counts as found when one retrieved passage contains it (compared without case,
punctuation or spacing), or when its sentences are covered (each one contained in, or nearly all
its content words present in, some retrieved passage) to at least SENTENCE_SHARE of them. A
passage split across two retrieved chunks is found that way too; a paraphrase is found when
nearly all its content words are there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evalsite.text import content_terms

# An expected passage is found when at least this share of its sentences is covered.
SENTENCE_SHARE = 0.75
# A sentence is covered by a retrieved passage holding this share of its content words (stemmed).
WORD_SHARE = 0.8

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_NOT_WORD = re.compile(r"[^\w]+")


def normalised(text: str) -> str:
    """Lower case, punctuation and runs of whitespace as single spaces: how containment compares."""
    return " ".join(_NOT_WORD.sub(" ", text.lower()).split())


def sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE_END.split(text.strip()) if normalised(part)]


@dataclass
class PassageMatch:
    """How one expected passage was found in the retrieved passages (1-based numbers), or not."""

    expected: str
    found: bool
    share: float  # the share of its sentences covered, 1.0 when contained whole
    how: str  # "contained" | "sentences" | "partial" | "absent"
    retrieved: list[int]  # which retrieved passages held it, or its covered sentences

    def describe(self, number: int) -> str:
        where = ", ".join(f"#{index}" for index in self.retrieved)
        passages = f"retrieved passage{_plural(self.retrieved)} {where}"
        if self.how == "contained":
            return f"expected passage {number} is inside retrieved passage {where}"
        if self.how == "absent":
            return f"expected passage {number} is in no retrieved passage"
        covered = f"{round(self.share * 100)} % of its sentences"
        if self.how == "sentences":
            return f"expected passage {number} is covered by {passages} ({covered})"
        return f"expected passage {number} is only partly there ({covered}, in {passages})"


def _plural(items: list[int]) -> str:
    return "s" if len(items) != 1 else ""


def match_passage(expected: str, retrieved: list[str]) -> PassageMatch:
    whole = normalised(expected)
    flat = [normalised(item) for item in retrieved]
    holders = [index for index, text in enumerate(flat, 1) if whole and whole in text]
    if holders:
        return PassageMatch(expected, True, 1.0, "contained", holders[:1])
    parts = sentences(expected) or [expected]
    used: list[int] = []
    covered = 0
    for part in parts:
        index = _covering(part, flat, retrieved)
        if index:
            covered += 1
            if index not in used:
                used.append(index)
    share = covered / len(parts)
    if share >= SENTENCE_SHARE:
        return PassageMatch(expected, True, share, "sentences", sorted(used))
    return PassageMatch(expected, False, share, "partial" if covered else "absent", sorted(used))


def _covering(sentence: str, flat: list[str], retrieved: list[str]) -> int:
    """The first retrieved passage (1-based) that covers the sentence, or 0."""
    text = normalised(sentence)
    wanted = set(content_terms(sentence))
    # A figure is never paraphrased: "2 hours" is not covered by a passage that says "8 hours".
    figures = {term for term in wanted if any(ch.isdigit() for ch in term)}
    for index, item in enumerate(flat, 1):
        if text and text in item:
            return index
        terms = set(content_terms(retrieved[index - 1]))
        if wanted and figures <= terms and len(wanted & terms) / len(wanted) >= WORD_SHARE:
            return index
    return 0


def match_context(retrieved: list[str], expected: list[str]) -> list[PassageMatch]:
    """One match per non-blank expected passage, in order."""
    return [match_passage(text, retrieved) for text in expected if text.strip()]

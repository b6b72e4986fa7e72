"""An agent version's configuration as atomic rules, each with an id that does not change.

Instructions, skills and guardrails split into list items and lines, and each line into
sentences; knowledge into paragraphs, then sentences. Headings ("Tone:", "## Refunds")
are not rules but name the rules under them. A rule's id is its field's letter and a
hash of its normalised text ("G-3fa2c1"): the same text has the same id in every
version, so a new version's added or changed rules are those whose id the version before
it does not have (`rules_changed`).

A model may merge and rephrase these into testable statements (datasets.coverage); the
ids of such rules are made the same way from the model's text.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from agents.models import AgentVersion

SECTIONS = (
    ("instructions", "Instructions", "I"),
    ("skills", "Skills", "S"),
    ("guardrails", "Guardrails", "G"),
    ("knowledge", "Knowledge", "K"),
)
MAX_RULE_CHARS = 600
_BULLET = re.compile(r"^\s*(?:[-*•·]|\d{1,3}[.)]|[a-zA-Z][.)])\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'“(])")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*)$")


@dataclass(frozen=True)
class AgentRule:
    id: str
    section: str  # "Instructions", "Skills", "Guardrails", "Knowledge"
    text: str
    topic: str = ""  # the heading the rule sits under, if any

    @property
    def label(self) -> str:
        return f"{self.id} · {self.section}: {self.text}"


def rule_id(letter: str, text: str) -> str:
    # Case, punctuation and spacing do not make another rule ("customer's" = "customers").
    normalised = " ".join(re.sub(r"[^\w\s]", " ", re.sub(r"['’]", "", text.lower())).split())
    return f"{letter}-{hashlib.sha1(normalised.encode()).hexdigest()[:6]}"


def rules_split(version: AgentVersion) -> list[AgentRule]:
    """The version's rules in the order they are written; a repeated rule appears once."""
    rules: list[AgentRule] = []
    seen: set[str] = set()
    for field, section, letter in SECTIONS:
        for topic, text in _statements(getattr(version, field) or ""):
            identifier = rule_id(letter, text)
            if identifier not in seen:
                seen.add(identifier)
                rules.append(AgentRule(id=identifier, section=section, text=text[:MAX_RULE_CHARS], topic=topic))
    return rules


def _statements(text: str) -> list[tuple[str, str]]:
    """(heading, sentence) for every sentence of every line or paragraph under its heading."""
    statements: list[tuple[str, str]] = []
    topic = ""
    for block in _blocks(text):
        heading = _heading(block)
        if heading is not None:
            topic = heading
            continue
        for sentence in _SENTENCE_END.split(block):
            sentence = " ".join(sentence.split())
            if len(sentence.split()) >= 2:  # "OK." is not a rule
                statements.append((topic, sentence))
    return statements


def _blocks(text: str) -> list[str]:
    """List items and lines; lines that continue a sentence (wrapped text) are joined."""
    blocks: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            blocks.append("")
            continue
        item = _BULLET.match(line)
        line = _BULLET.sub("", line).strip()
        continues = blocks and blocks[-1] and not item and not _heading(line) and not _ends_sentence(blocks[-1])
        if continues:
            blocks[-1] = f"{blocks[-1]} {line}"
        else:
            blocks.append(line)
    return [block for block in blocks if block]


def _ends_sentence(text: str) -> bool:
    return text.rstrip().endswith((".", "!", "?", ":", ";")) or _heading(text) is not None


def _heading(line: str) -> str | None:
    match = _HEADING.match(line)
    if match:
        return match.group(1).strip()
    if line.endswith(":") and len(line.split()) <= 6:
        return line[:-1].strip()
    return None


def rules_changed(version: AgentVersion, before: AgentVersion | None) -> set[str]:
    """Ids of the rules `version` added or changed compared with `before` (all, when there is none)."""
    ids = {rule.id for rule in rules_split(version)}
    if before is None:
        return ids
    return ids - {rule.id for rule in rules_split(before)}

"""A word-level diff of two answers, for the side-by-side view of the compare page (pure)."""

from __future__ import annotations

import re
from difflib import SequenceMatcher

# Words with the whitespace after them, so joining the pieces gives back the text.
_WORDS = re.compile(r"\S+\s*|\s+")
# Past this many words per side the diff is not readable anyway, and SequenceMatcher is
# quadratic: both answers are shown whole, and the diff covers their beginnings.
MAX_WORDS = 2000

EQUAL, DELETED, INSERTED = "equal", "del", "ins"


def word_diff(before: str, after: str) -> list[tuple[str, str]]:
    """[(kind, text)], kind "equal" | "del" (only in `before`) | "ins" (only in `after`)."""
    words_a = _WORDS.findall(before or "")[:MAX_WORDS]
    words_b = _WORDS.findall(after or "")[:MAX_WORDS]
    # Compare words without their trailing whitespace: a line break is not a change.
    matcher = SequenceMatcher(None, [w.strip() for w in words_a], [w.strip() for w in words_b], autojunk=False)
    pieces: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            _add(pieces, EQUAL, "".join(words_b[j1:j2]))
            continue
        if i2 > i1:
            _add(pieces, DELETED, "".join(words_a[i1:i2]))
        if j2 > j1:
            _add(pieces, INSERTED, "".join(words_b[j1:j2]))
    return pieces


def _add(pieces: list[tuple[str, str]], kind: str, text: str) -> None:
    if not text:
        return
    if pieces and pieces[-1][0] == kind:
        pieces[-1] = (kind, pieces[-1][1] + text)
    else:
        pieces.append((kind, text))

"""Small text helpers shared by the offline scorer, de-duplication and suggestions."""

import re

_WORD = re.compile(r"[a-z0-9]+(?:[.,'][a-z0-9]+)*")
# Words that carry no meaning on their own; ignored when comparing facts.
STOPWORDS = frozenset(
    """a an and are as at be been but by can could do does for from has have how i if in into is it its
    may more most no not of on or our should so than that the their them then there these they this to
    was we were what when where which who will with would you your yes please also any all""".split()
)


def tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


_POSSESSIVE = re.compile(r"['’]s?$")


def stem(token: str) -> str:
    # Just enough folding that "refunds" finds "refund" and "cancelled" finds "cancel".
    for suffix in ("ies", "ing", "ed", "es", "s"):
        if len(token) > len(suffix) + 2 and token.endswith(suffix):
            return token[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return token


def content_terms(text: str) -> list[str]:
    """The text's words without stopwords, folded by `stem`: what retrieval and rule coverage compare."""
    # A possessive is its word: "customer's" is "customer".
    words = (_POSSESSIVE.sub("", token) for token in tokens(text))
    return [stem(word) for word in words if word and word not in STOPWORDS]


def content_tokens(text: str) -> set[str]:
    return {token for token in tokens(text) if token not in STOPWORDS}


def jaccard(a: str, b: str) -> float:
    left, right = content_tokens(a), content_tokens(b)
    if not left and not right:
        return 1.0
    return len(left & right) / len(left | right)


def key_points(text: str) -> list[str]:
    """Split an expected answer into the facts it states: sentences, list items, or semicolon clauses."""
    parts = re.split(r"(?<=[.!?])\s+|\n+|;\s*", text.strip())
    return [part.strip(" -*•\t") for part in parts if len(content_tokens(part)) >= 2 or _has_number(part)]


def point_covered(point: str, answer: str, *, threshold: float = 0.6) -> bool:
    """A point is covered when most of its content words (and all of its numbers) are in the answer."""
    wanted = content_tokens(point)
    if not wanted:
        return True
    found = content_tokens(answer)
    numbers = {token for token in wanted if any(ch.isdigit() for ch in token)}
    if not numbers <= found:
        return False
    return len(wanted & found) / len(wanted) >= threshold


def _has_number(text: str) -> bool:
    return any(ch.isdigit() for ch in text)


# How an expected answer says "the agent should not know / should decline" (lower case).
_REFUSAL = re.compile(
    r"\b(?:does not|doesn't|do not|don't|cannot|can't|can not|is not able to|isn't able to|unable to)\s+"
    # Not "include", "cover", "provide": "Refunds do not include shipping" is a fact to learn.
    r"(?:say|state|mention|specify|know|answer)\b"
    r"|\bno information\b|\bnot (?:mentioned|covered|stated|specified) in\b|\b(?:i'm|i am) sorry\b"
    r"|\bshould (?:decline|refuse)\b"
)


def is_refusal(expected: str) -> bool:
    """The expected answer is a refusal ("The knowledge does not say...", "I don't know")."""
    return bool(_REFUSAL.search(expected.lower().replace("’", "'")))


def contains_nul(value: object) -> bool:
    """Whether a decoded JSON value holds a NUL character anywhere (PostgreSQL cannot store one in text)."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(contains_nul(key) or contains_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(contains_nul(item) for item in value)
    return False


def cut(text: str, limit: int) -> str:
    """`text` stripped, and cut to at most `limit` characters with an ellipsis when longer."""
    text = (text or "").strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"

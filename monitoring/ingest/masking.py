"""Personal data masked before a trace is stored (issue 47): emails, phone numbers, card numbers and
secrets (API keys, bearer tokens, long random tokens) are replaced by a marker such as
`[masked:email]` in every text a trace keeps — its spans' names, attributes, events, links and
status messages, and the resource's attributes — so nothing downstream (the pages, the API, an
online judge's request, a learning case) ever sees them. Only the service name the trace is filed
under is kept as sent: it maps the trace to its agent. An agent turns masking off with
AgentMonitoring.mask_personal_data.

The rules, applied in this order to each string (a string that is a JSON document is masked inside
and written back as JSON, so a marker never breaks an escape):

- key: OpenAI-style `sk-…`, Stripe-style `sk_live_…`, Evalsite's `evi_…` / `evs_…`, AWS access key
  ids (`AKIA…` / `ASIA…`), GitHub (`ghp_…`, `github_pat_…`), Slack (`xox?-…`), Google (`AIza…`),
  JWTs (`eyJ….….…`), the token after `Bearer `, and, cautiously, any other run of 32 or more
  letters, digits, `_`, `-` or `+` that mixes upper case, lower case and at least 3 digits with the
  entropy and the constant changes of case of random text (hex ids, UUIDs and camelCase identifiers
  are not that).
- email: `name@domain.tld`.
- card: 13 to 19 digits, optionally grouped by spaces or dashes, starting 2-6 (the card networks'
  ranges) and passing the Luhn check; an order number of that length fails Luhn nine times in ten.
- phone: an international number (`+` and 8 to 15 digits, grouped), a North American one
  (`(555) 123-4567`, `555-123-4567`, `555.123.4567`) or a European national one starting with 0 and
  grouped (`020 7946 0958`, `06 12 34 56 78`). A bare run of digits is never a phone number, so
  order numbers, dates, times, versions and ids stay as they are.

`mask(value)` returns the masked copy and the counts per kind, e.g. {"email": 2, "card": 1}.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

MARKER = "[masked:{kind}]"
_EDGE = r"(?<![\w\-])"  # not inside a word, an id or a longer number
_END = r"(?![\w\-])"

_KEY_PATTERNS = [
    r"\bsk-(?:proj-|ant-|live-|test-|svcacct-)?[A-Za-z0-9_\-]{16,}",
    r"\b[sr]k_(?:live|test)_[A-Za-z0-9]{16,}",
    r"\bev[is]_[A-Za-z0-9_\-]{20,}",
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    r"\bgh[pousr]_[A-Za-z0-9]{30,}",
    r"\bgithub_pat_[A-Za-z0-9_]{40,}",
    r"\bxox[abprs]-[A-Za-z0-9\-]{10,}",
    r"\bAIza[0-9A-Za-z_\-]{35}",
    r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
]
_KEY = re.compile("|".join(_KEY_PATTERNS))
_BEARER = re.compile(r"(?i)\b(bearer\s+)([A-Za-z0-9\-._~+/]{12,}=*)")
_LONG_TOKEN = re.compile(r"(?<![\w\-+/])[A-Za-z0-9_\-+]{32,}={0,2}(?![\w\-+/=])")
_EMAIL = re.compile(
    r"(?<![\w.%+\-])[A-Za-z0-9_%+\-](?:[A-Za-z0-9._%+\-]*[A-Za-z0-9_%+\-])?"  # the name
    r"@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}\b"  # the domain
)
_CARD = re.compile(_EDGE + r"\d(?:[ \-]?\d){12,18}" + _END)
_PHONES = [
    re.compile(r"(?<![\w+])\+\d{1,3}(?:[ .\-]?\(?\d{1,5}\)?){1,6}" + _END),
    re.compile(_EDGE + r"(?:\(\d{3}\)\s?|\d{3}[.\- ])\d{3}[.\- ]\d{4}" + _END),
    re.compile(_EDGE + r"0\d{1,4}[ \-]\d{3,4}[ \-]?\d{3,4}" + _END),
    re.compile(_EDGE + r"0\d(?:[ .]\d{2}){4}" + _END),
]

# Every key is a run of 12 or more of these characters; every card or phone number has 8 digits
# with at most separators between them.
_MAYBE_KEY = re.compile(r"[A-Za-z0-9_\-+./~]{12,}")
_MAYBE_NUMBER = re.compile(r"\d(?:[ .\-()]{0,3}\d){7}")


def luhn_valid(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        number = int(char)
        if position % 2:
            number = number * 2 - 9 if number > 4 else number * 2
        total += number
    return total % 10 == 0


def _is_card(text: str) -> bool:
    digits = re.sub(r"[ \-]", "", text)
    return 13 <= len(digits) <= 19 and digits[0] in "23456" and luhn_valid(digits)


def _is_phone(text: str) -> bool:
    return 8 <= sum(char.isdigit() for char in text) <= 15


def _entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _is_random_token(text: str) -> bool:
    """A secret with no known prefix: mixed case and digits, and the entropy of random text.
    Hex (trace ids, hashes), UUIDs and long identifiers are left alone."""
    body = text.rstrip("=")
    upper = sum(char.isupper() for char in body)
    lower = sum(char.islower() for char in body)
    digits = sum(char.isdigit() for char in body)
    if upper < 2 or lower < 2 or digits < 3 or _entropy(body) < 4.0:
        return False
    # Random text changes between upper case, lower case and digits at most characters (about 60 %);
    # camelCase words with a year at the end change only at each word.
    classes = ["u" if c.isupper() else "l" if c.islower() else "d" if c.isdigit() else "o" for c in body]
    changes = sum(a != b for a, b in zip(classes, classes[1:], strict=False))
    digit_runs = sum(1 for a, b in zip(["o", *classes], classes, strict=False) if b == "d" and a != "d")
    return changes >= 0.45 * len(body) and digit_runs >= 2


class _Masker:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def _sub(self, pattern: re.Pattern, kind: str, text: str, check: Callable[[str], bool] | None = None) -> str:
        def replace(match: re.Match) -> str:
            if check is not None and not check(match.group(0)):
                return match.group(0)
            self.counts[kind] += 1
            return MARKER.format(kind=kind)

        return pattern.sub(replace, text)

    def _bearer(self, match: re.Match) -> str:
        if match.group(2).startswith("[masked:"):
            return match.group(0)
        self.counts["key"] += 1
        return match.group(1) + MARKER.format(kind="key")

    def text(self, text: str) -> str:
        if len(text) > 1 and text[0] in "{[" and text[-1] in "}]":
            try:
                document = json.loads(text)
            except (ValueError, RecursionError):
                document = None
            if isinstance(document, dict | list):
                before = sum(self.counts.values())
                masked = self.value(document)
                return json.dumps(masked, ensure_ascii=False) if sum(self.counts.values()) > before else text
        # Cheap looks first: most texts hold nothing any rule could match.
        if _MAYBE_KEY.search(text):
            text = self._sub(_KEY, "key", text)
            text = _BEARER.sub(self._bearer, text)
            text = self._sub(_LONG_TOKEN, "key", text, _is_random_token)
        if "@" in text:
            text = self._sub(_EMAIL, "email", text)
        if _MAYBE_NUMBER.search(text):
            text = self._sub(_CARD, "card", text, _is_card)
            for pattern in _PHONES:
                text = self._sub(pattern, "phone", text, _is_phone)
        return text

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, dict):
            return {key: self.value(item) for key, item in value.items()}  # attribute names stay
        return value


def mask(value: Any) -> tuple[Any, dict[str, int]]:
    """A masked copy of `value` (text, or lists and dicts of it, keys untouched) and what was
    masked, per kind."""
    masker = _Masker()
    masked = masker.value(value)
    return masked, dict(masker.counts)


def mask_span(span: Any) -> dict[str, int]:
    """Mask a span row in place (its name, attributes, events, links and status message); the
    counts."""
    masker = _Masker()
    span.name = masker.text(span.name)[:300]
    span.attributes = masker.value(span.attributes)
    span.events = masker.value(span.events)
    span.links = masker.value(span.links)
    span.status_message = masker.text(span.status_message)
    return dict(masker.counts)


def add_counts(total: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    combined = Counter(total)
    combined.update(more)
    return dict(combined)

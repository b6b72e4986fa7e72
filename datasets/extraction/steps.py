"""The user's message inside a test plan's steps.

Real plans write the message the tester types inside numbered steps:

    1. Open the chat  2. Ask: 'How many days do I have to get a refund on my annual plan?'

The agent must receive the quoted message, not the steps. A message counts when a cue
("Ask:", "Say:", "Type:", "Enter:", "User says:", "Customer:"...) stands right before
a quoted text, in any quote style ("...", '...', “...”, ‘...’, «...», „...“). Without
a cue, one quoted text that ends with a question mark counts too. Runs in the
sandboxed child (no Django).
"""

from __future__ import annotations

import re

# Opening quote -> its closing quotes. A single quote closes only before a space, the
# end or punctuation, so the apostrophe in 'I can't log in' does not end the message.
_QUOTES = {'"': '"', "“": '”"', "„": "“”", "«": "»", "»": "«", "'": "'", "‘": "’'", "‚": "‘’"}
_VERBS = r"ask|asks|asked|say|says|said|type|types|enter|enters|send|sends|write|writes|tell|tells|reply|replies"
_NOUNS = r"user|customer|caller|client|tester|message|prompt|input|query|utterance|question"
# A verb cue may have up to four words before its colon ("Ask the agent:", "Type in the chat box:"),
# or none and no colon ("Ask 'How...'"); a noun cue needs its colon ("Customer: '...'").
_CUE = re.compile(
    rf"(?:\b(?:{_VERBS})\b(?:\s*:|(?:\s+[\w'’-]+){{1,4}}\s*:)?|\b(?:{_NOUNS})\b(?:\s+(?:{_VERBS}))?\s*:)\s*$",
    re.IGNORECASE,
)
MAX_MESSAGE_CHARS = 20_000


def _quoted_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each quoted text, the quotes excluded."""
    spans: list[tuple[int, int]] = []
    index = 0
    while index < len(text):
        opening = text[index]
        closers = _QUOTES.get(opening)
        # An apostrophe inside a word ("don't", "customer's") opens nothing.
        if closers is None or (opening in "'’" and index > 0 and text[index - 1].isalnum()):
            index += 1
            continue
        end = _closing(text, index + 1, closers)
        if end is None:
            index += 1
            continue
        if text[index + 1 : end].strip():
            spans.append((index + 1, end))
        index = end + 1
    return spans


def _closing(text: str, start: int, closers: str) -> int | None:
    for position in range(start, len(text)):
        char = text[position]
        if char not in closers:
            continue
        if char in "'’‘":
            after = text[position + 1 : position + 2]
            if after and (after.isalnum() or after in "'’"):
                continue  # an apostrophe: "can't", "customer's"
        return position
    return None


def quoted_messages(text: str) -> list[str]:
    """The user messages the text quotes after a cue, in order."""
    found = []
    for start, end in _quoted_spans(text):
        before = text[max(0, start - 1 - 60) : start - 1]
        if _CUE.search(before):
            found.append(_clean(text[start:end]))
    return [message for message in found if message]


def user_message(text: str) -> tuple[str, int]:
    """(the one message the steps quote, how many they quote). The message is "" unless
    there is exactly one; a quoted question with no cue counts when it is the only one."""
    messages = quoted_messages(text)
    if not messages:
        questions = [_clean(text[s:e]) for s, e in _quoted_spans(text) if text[s:e].rstrip().endswith("?")]
        messages = questions if len(questions) == 1 else []
    return (messages[0] if len(messages) == 1 else ""), len(messages)


def holds_messages(values: list[str]) -> bool:
    """Whether a column's filled cells mostly quote one user message each (steps, not labels)."""
    filled = [value for value in values if value.strip()]
    if not filled:
        return False
    with_message = sum(1 for value in filled if user_message(value)[0] and user_message(value)[0] != value.strip())
    return with_message * 2 >= len(filled)


def _clean(message: str) -> str:
    return " ".join(message.split())[:MAX_MESSAGE_CHARS]

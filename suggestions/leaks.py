"""Whether text proposed for an agent would teach it its own test (a leaked test).

Two kinds of leak, both checked on the text an agent would receive (a suggestion's text to add,
a rewritten field, the final text confirmed in Apply):

- an **answer copy**: the text repeats one case's expected answer, whole or all but a fifth of
  it, as one run of words (compared case-folded, punctuation ignored). A fact that an expected
  answer states may be taught (the knowledge lacked it); the answer itself may not. Words that
  the agent's current text already held are not new: they were not copied from the test.
- **behaviour wording**: the text describes what the agent is expected to do ("Agent explains
  ...", "directs them to ...", "politely declines ..."), the way a test plan's expected result
  does. Such a line tells the agent its test, not its job, and is never a fact.
"""

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from evalsite.text import cut, tokens

# An expected answer counts as copied when this share of its words appears as one run.
ANSWER_SHARE = 0.8
# Answers shorter than this ("Yes", "30 days") are too short to tell a copy from a coincidence.
MIN_ANSWER_WORDS = 5

# Not "system": "The system returns a 429" is a fact about a product.
_ACTOR = r"(?:the\s+)?(?:agent|assistant|bot|chatbot|ai)"
_VERB = (
    r"(?:explain|decline|refuse|direct|redirect|apologi[sz]e|ask|tell|inform|offer|confirm|escalate|acknowledge"
    r"|say|state|respond|reply|recommend|suggest|provide|give|mention|clarif(?:y|ie)|guide|advise|point|remind"
    r"|warn|verif(?:y|ie)|check|greet|thank|hand|transfer|request|collect|display|show|ensure|return)(?:s|es)"
)
_BEHAVIOUR = re.compile(
    # "Agent explains", "The bot politely declines": a test plan's third person, present tense.
    # Instructions speak to the agent ("Explain...", "You should..."), so they never match.
    rf"\b{_ACTOR}\s+(?:\w+ly\s+)?{_VERB}\b"
    r"|\b(?:directs?|redirects?|points?|refers?|sends?|guides?)\s+(?:them|him|her|the\s+(?:customer|user|caller|client))\s+to\b"
    r"|\bpolitely\s+(?:declines?|refuses?|explains?|asks?|informs?|tells?)\b"
    r"|\b(?:declines?|refuses?)\s+(?:politely|to\s+(?:answer|help|share|give|provide|disclose|promise))\b"
    r"|\b(?:the\s+)?(?:customer|user|caller)\s+(?:is|should\s+be|gets?)\s+(?:told|directed|informed|redirected|asked)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Leak:
    kind: str  # ANSWER or BEHAVIOUR
    excerpt: str  # the behaviour phrase, or the expected answer copied (cut)
    case_number: int | None = None  # the case whose expected answer was copied

    ANSWER = "answer"
    BEHAVIOUR = "behaviour"

    @property
    def reason(self) -> str:
        if self.kind == Leak.ANSWER:
            return f"it repeats the expected answer of case #{self.case_number} (“{self.excerpt}”)"
        return f"it describes the expected behaviour (“{self.excerpt}”) instead of stating a fact"


@dataclass(frozen=True)
class ExpectedAnswer:
    case_number: int
    text: str


def describes_behaviour(text: str) -> str:
    """The first behaviour-describing phrase in `text`, or "" when there is none."""
    match = _BEHAVIOUR.search(text.replace("’", "'"))
    return match.group(0) if match else ""


def text_leaks(text: str, *, answers: Iterable[ExpectedAnswer], known: str = "") -> list[Leak]:
    """Every leak in `text`: copied expected answers (not already in `known`), and behaviour wording."""
    leaks: list[Leak] = []
    if not text.strip():
        return leaks
    for sentence in sentences(text):
        if phrase := describes_behaviour(sentence):
            if sentence.strip() not in known:  # the agent had it before: not taught by this change
                leaks.append(Leak(kind=Leak.BEHAVIOUR, excerpt=cut(phrase, 80)))
    haystack, old = _joined(text), _joined(known)
    for answer in answers:
        if copied_window(answer.text, haystack=haystack, known=old):
            leaks.append(Leak(kind=Leak.ANSWER, excerpt=cut(answer.text, 120), case_number=answer.case_number))
    return leaks


def copied_window(answer: str, *, haystack: str, known: str = "") -> str:
    """The first run of the answer's words long enough to count as a copy that `haystack`
    holds and `known` does not (both from `_joined`); "" when there is none."""
    words = tokens(answer)
    if len(words) < MIN_ANSWER_WORDS:
        return ""
    size = max(MIN_ANSWER_WORDS, math.ceil(ANSWER_SHARE * len(words)))
    for start in range(len(words) - size + 1):
        window = " ".join(words[start : start + size])
        if f" {window} " in haystack and f" {window} " not in known:
            return window
    return ""


def sentences(text: str) -> list[str]:
    """Lines, then sentences: the units a leaking suggestion loses."""
    parts = re.split(r"(?<=[.!?])\s+|\n+", text.strip())
    return [part for part in parts if part.strip()]


def _joined(text: str) -> str:
    return f" {' '.join(tokens(text))} "

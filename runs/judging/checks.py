"""Checks on a judge's answer before its score is believed (issue 33, section 2).

A judge's JSON can have the right shape and still say nothing: a small model echoes the
answer format's placeholder (`<2-4 short sentences: ...>`), parrots the instructions it was
given, or writes a reasoning that contradicts its own score ("This is a very detailed and
accurate answer." with 0/10). `judge_answer_problem` names what is wrong, or returns None.

The rules are few and explainable, and each errs on the side of believing the judge: a
reasoning that weighs both sides ("correct except it misses the 14-day limit"), or says
anything the rules do not recognise, is never flagged. tests/runs/test_judge_checks.py holds
the labelled examples they are held to. Pure functions: no model calls, no database.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# ---- placeholders -------------------------------------------------------------------------------

# A reasoning that is nothing but a template: <...>, [...], {...} or {{...}}, maybe quoted.
_TEMPLATE = re.compile(r"^[\"'`]*(<[^<>]*>|\[[^\[\]]*\]|\{\{?[^{}]*\}?\})[\"'`.]*$")
# Template segments inside a longer text ("Reasoning: <what was right>").
_TEMPLATE_SEGMENT = re.compile(r"<[^<>]{3,}>|\{\{?[^{}]{3,}\}?\}")
# Whole answers (lower case, punctuation dropped) that name the field instead of filling it.
_PLACEHOLDER_TEXTS = frozenset(
    {
        "string",
        "str",
        "text",
        "reason",
        "reasoning",
        "the reasoning",
        "your reasoning",
        "reasoning here",
        "your reasoning here",
        "insert reasoning here",
        "explanation",
        "your explanation",
        "explanation here",
        "short sentences",
        "2 4 short sentences",
        "sentences",
        "placeholder",
        "n a",
        "na",
        "none",
        "null",
        "nil",
        "undefined",
        "todo",
        "tbd",
        "x",
        "xx",
        "xxx",
        "foo",
        "test",
        "example",
        "etc",
    }
)
# A JSON Schema echoed back as the reasoning: its keywords, not a judgment.
_SCHEMA_WORDS = ("minlength", "maxlength", "additionalproperties", "properties", '"type"', "type:")


def _normalised(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def _placeholder(text: str) -> bool:
    normalised = _normalised(text)
    if not re.search(r"[a-z]{2,}", normalised) and normalised not in _PLACEHOLDER_TEXTS:
        return True  # "...", "-", "0": no word at all
    if normalised in _PLACEHOLDER_TEXTS or "lorem ipsum" in normalised:
        return True
    if _TEMPLATE.match(text.strip()):
        return True
    # A template with a word or two around it ("Reasoning: <what was right>").
    segments = _TEMPLATE_SEGMENT.findall(text)
    if segments and len(_words(_TEMPLATE_SEGMENT.sub(" ", text))) <= 2:
        return True
    lowered = text.lower()
    return sum(word in lowered for word in _SCHEMA_WORDS) >= 2 and ("string" in lowered or "integer" in lowered)


# ---- copies of the instructions -------------------------------------------------------------------

# Runs of this many words shared with the instructions count as copied.
COPY_RUN_WORDS = 5
# A reasoning is a copy when at least this many of its words, and this share of them, are copied.
COPY_MIN_WORDS = 8
COPY_MIN_SHARE = 0.75


# Contractions spelt out, so that "I'm not sure" and "I am not sure" are the same words.
_CONTRACTIONS = (("n't", " not"), ("'m", " am"), ("'re", " are"), ("'ve", " have"), ("'ll", " will"))


def _words(text: str) -> list[str]:
    lowered = text.lower().replace("’", "'")
    for short, long in _CONTRACTIONS:
        lowered = lowered.replace(short, long)
    return re.findall(r"[a-z0-9]+(?:['-][a-z0-9]+)*", lowered)


def copied_share(text: str, instructions: Sequence[str]) -> tuple[int, float]:
    """(words of `text` inside a run of COPY_RUN_WORDS words that also occurs in the instructions, their share)."""
    words = _words(text)
    if len(words) < COPY_RUN_WORDS:
        return 0, 0.0
    n = COPY_RUN_WORDS
    runs: set[tuple[str, ...]] = set()
    for source in instructions:
        source_words = _words(source)
        runs.update(tuple(source_words[i : i + n]) for i in range(len(source_words) - n + 1))
    covered = [False] * len(words)
    for i in range(len(words) - n + 1):
        if tuple(words[i : i + n]) in runs:
            covered[i : i + n] = [True] * n
    count = sum(covered)
    return count, count / len(words)


def _copied(text: str, instructions: Sequence[str]) -> bool:
    count, share = copied_share(text, instructions)
    return count >= COPY_MIN_WORDS and share >= COPY_MIN_SHARE


# The agent's answer given back as the reasoning ("I am not sure, please contact support." from
# SmolLM2): almost all of it copied, and no verdict word of its own.
ANSWER_COPY_MIN_SHARE = 0.85


def _answer_echoed(text: str, answer: str, expected: str, instructions: Sequence[str]) -> bool:
    if not answer.strip():
        return False
    count, share = copied_share(text, [answer])
    if count < COPY_RUN_WORDS or share < 0.5:
        return False
    # Restating a right answer, which says what the expected answer says, is not an echo.
    if expected.strip() and copied_share(text, [expected])[1] >= 0.5:
        return False
    if share >= ANSWER_COPY_MIN_SHARE and not any(_sides(text)):
        return True
    # The answer with a sentence of the instructions after it, and no word of its own.
    return copied_share(text, [answer, *instructions])[1] >= ANSWER_COPY_MIN_SHARE


def _question_only(text: str) -> bool:
    """A reasoning that only asks ("What was wrong about the answer?") judges nothing."""
    return text.rstrip().endswith("?") and not re.search(r"[.!?]\s", text.rstrip()[:-1])


# ---- reasoning against its score ------------------------------------------------------------------

# A score at or below this is a clear fail, at or above HIGH_SCORE a clear pass, whatever the threshold.
LOW_SCORE = 3
HIGH_SCORE = 7

# Read first and blanked out, so that "not correct" is not read as praise, nor "nothing is wrong" as a fault.
_NEGATION = r"(?:\bnot|n't|\bnever|\bhardly)\s+(?:a\s+|an\s+|the\s+)?(?:at all\s+|even\s+|very\s+|really\s+)?"
_NEGATED_PRAISE = re.compile(
    _NEGATION + r"(?:correct|accurate|right|true|valid|relevant|helpful|good|great|match(?:es)?)\b"
)
# "Not a complete answer": a gap, which a passing score allows, not a fault.
_NEGATED_FULLNESS = re.compile(_NEGATION + r"(?:complete|comprehensive|detailed|thorough|full)\b")
_PRAISE_OF_ABSENCE = re.compile(
    r"\b(?:nothing|none)\s+(?:of it\s+)?(?:is\s+|was\s+)?(?:wrong|incorrect|missing|inaccurate|misleading)\b"
    r"|\bno\s+(?:errors?|mistakes?|inaccurac(?:y|ies)|omissions?|missing\s+facts?)\b"
    r"|\bwithout\s+(?:any\s+)?(?:errors?|mistakes?|omissions?)\b"
)
# Words that weigh both sides: a reasoning with one of them is never read as one-sided.
_HEDGES = re.compile(
    r"\b(?:but|however|although|though|except|apart from|aside from|while|whereas|yet|partially|partly|"
    r"mostly|largely|somewhat|some|only|minor|small|slightly|not fully|not entirely|not completely|"
    r"not quite|almost|nearly|half)\b"
)
# Praise of the answer as a whole (not of a word that happens to be "right", as in "the right to cancel").
_PRAISE = re.compile(
    r"\b(?:answer|response|reply|it|this|that|everything)(?:'s|\s+is|\s+was)\s+(?:[\w-]+\s+){0,4}?"
    r"(?:correct|accurate|comprehensive|complete|perfect|excellent|flawless|thorough|precise|spot on)\b"
    r"|\b(?:is|was|got it)\s+(?:exactly\s+|entirely\s+|completely\s+)?right\b"
    r"|\b(?:correctly|accurately|precisely|fully)\s+(?:states?|says|gives|answers?|identifies|mentions|explains|"
    r"covers|describes|lists|notes|addresses|reports)\b"
    r"|\bmatch(?:es)?\s+(?:the\s+)?expected\b"
    r"|\b(?:all|every)\s+(?:of\s+)?(?:the\s+)?key\s+(?:facts?|points?)\b"
    r"|\b(?:correct|accurate|excellent|perfect|comprehensive|great|good|complete)\s+(?:answer|response|reply)\b"
    r"|^\W*(?:correct|accurate|perfect|excellent|comprehensive|well done)\b"
)
_FAULT = re.compile(
    r"\b(?:incorrect|incorrectly|wrong|wrongly|inaccurate|irrelevant|unrelated|contradicts?|contradicting|"
    r"false|invented|hallucinat\w*|made up|off[- ]topic|nonsense|useless|unhelpful)\b"
    r"|\b(?:does not|doesn't|did not|didn't|fails to|failed to|never)\s+(?:answer|address|match)\b"
    r"|\bnothing to do with\b"
)
# Faults a passing score allows ("small details may be missing"): they make a reasoning
# two-sided for a low score's check, but do not contradict a high one.
_GAPS = re.compile(
    r"\b(?:missing|misses|missed|omits|omitted|lacks|lacking|incomplete|vague|unclear)\b"
    r"|\b(?:does not|doesn't|did not|didn't|fails to|failed to|never)\s+(?:mention|state|give|provide|include|say)\b"
)


def _sides(text: str) -> tuple[bool, bool, bool, bool]:
    """(praises the answer, faults it, names a gap in it, weighs both sides)."""
    lowered = " ".join(re.sub(r"</?[a-z]+/?>", " ", text.lower().replace("’", "'")).split())  # tags are no words
    absence = bool(_PRAISE_OF_ABSENCE.search(lowered))
    rest = _PRAISE_OF_ABSENCE.sub(" ", lowered)
    negated, partial = bool(_NEGATED_PRAISE.search(rest)), bool(_NEGATED_FULLNESS.search(rest))
    rest = _NEGATED_FULLNESS.sub(" ", _NEGATED_PRAISE.sub(" ", rest))
    praised = absence or bool(_PRAISE.search(rest))
    faulted = negated or bool(_FAULT.search(rest))
    return praised, faulted, partial or bool(_GAPS.search(rest)), bool(_HEDGES.search(lowered))


def _contradiction(score: float, text: str) -> str | None:
    praised, faulted, gap, hedged = _sides(text)
    if hedged:
        return None
    if score <= LOW_SCORE and praised and not faulted and not gap:
        return "praises the answer"
    if score >= HIGH_SCORE and faulted and not praised:
        return "finds the answer wrong"
    return None


# ---- the check ---------------------------------------------------------------------------------------


def judge_answer_problem(
    *, score: float, reasoning: str, instructions: Sequence[str] = (), answer: str = "", expected: str = ""
) -> str | None:
    """Why this judge answer cannot be believed, as a phrase to follow "Judge answer unusable: ";
    None when it can be. `instructions` are the texts the judge was told (its instructions,
    rubric, criteria, guideline), never the case's own texts, which a reasoning may quote;
    `answer` and `expected` are the agent's answer under judgment and the expected answer."""
    text = reasoning.strip()
    if not text:
        return "the judge gave a score with no reasoning."
    quoted = f"“{_clip(text)}”, {score:g}/10"
    if _placeholder(text):
        return f"its reasoning is a placeholder or the answer format's own text, not a judgment ({quoted})."
    if _copied(text, instructions):
        return f"its reasoning repeats the instructions it was given instead of judging the answer ({quoted})."
    if _answer_echoed(text, answer, expected, instructions):
        return f"its reasoning repeats the agent's answer instead of judging it ({quoted})."
    if _question_only(text):
        return f"its reasoning is a question, not a judgment ({quoted})."
    side = _contradiction(score, text)
    if side is not None:
        return f"its reasoning {side} but its score says the opposite ({quoted})."
    return None


def _clip(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"

"""What a table's header cells name: the case field each could feed, and how strongly.

Runs in the sandboxed child (no Django). Normalising lower-cases, drops punctuation
and parentheses, and collapses spaces, so "Expected Answer:" and "expected_answer"
match. Strength ranks columns that could feed the same field: a header naming what the
user says ("User says", "Utterance", "Prompt", strength 3) beats one describing the case
("Scenario", "Title", strength 1) wherever the two stand, in every file type.
"""

from __future__ import annotations

import re

# Headers naming the message the user sends: the question itself.
_STRONG_QUESTION = {
    "question",
    "questions",
    "prompt",
    "prompts",
    "input",
    "inputs",
    "query",
    "queries",
    "user question",
    "user input",
    "user message",
    "user prompt",
    "user query",
    "user utterance",
    "user says",
    "user said",
    "user asks",
    "user request",
    "user text",
    "user turn",
    "what the user says",
    "what the customer says",
    "customer says",
    "customer asks",
    "customer utterance",
    "customer input",
    "customer query",
    "caller says",
    "test question",
    "test input",
    "test prompt",
    "utterance",
    "utterances",
    "sample utterance",
    "customer question",
    "customer message",
    "chat message",
    "message",
    "request",
    "ask",
}
# Headers describing the case rather than quoting the user: a question only when nothing better exists.
_WEAK_QUESTION = {
    "scenario",
    "scenarios",
    "test case",
    "test cases",
    "test scenario",
    "title",
    "test title",
    "case",
    "steps",
    "test steps",
}
_STRONG_EXPECTED = {
    "expected answer",
    "expected answers",
    "expected output",
    "expected outputs",
    "expected response",
    "expected result",
    "expected results",
    "expected reply",
    "expected",
    "ideal answer",
    "ideal response",
    "ideal reply",
    "ideal output",
    "reference answer",
    "ground truth",
    "gold answer",
    "correct answer",
    "target answer",
    "expected behaviour",
    "expected behavior",
    "agent says",
    "agent should say",
    "bot says",
    "agent response",
    "bot response",
    "agent reply",
}
_WEAK_EXPECTED = {"answer", "answers", "reference", "target", "response", "output"}
SYNONYMS: dict[str, dict[str, int]] = {
    "question": {**{s: 1 for s in _WEAK_QUESTION}, **{s: 3 for s in _STRONG_QUESTION}, "q": 2},
    "expected_answer": {**{s: 2 for s in _WEAK_EXPECTED}, **{s: 3 for s in _STRONG_EXPECTED}, "a": 1},
    "case_id": {
        s: 3 for s in ("id", "case id", "test id", "test case id", "tc id", "tc", "no", "number", "nr", "key", "ref")
    },
    "document_context": {
        **{
            s: 3
            for s in (
                "context",
                "document context",
                "retrieval context",
                "supporting text",
                "source text",
                "knowledge",
                "background",
            )
        },
        # The situation the user's message is sent in (the account, the order): the agent needs it too.
        **{s: 2 for s in ("test data", "input data", "preconditions", "precondition", "pre conditions")},
    },
    "tags": {s: 3 for s in ("tags", "tag", "labels", "label", "category", "categories", "topic", "area")},
    "judge_guideline": {
        s: 3
        for s in (
            "guideline",
            "guidelines",
            "judge guideline",
            "grading notes",
            "grading guideline",
            "evaluation notes",
            "rubric",
            "criteria",
            "notes for judge",
        )
    },
}
LOOKUP = {synonym: (name, strength) for name, synonyms in SYNONYMS.items() for synonym, strength in synonyms.items()}
# Words that make a longer header name the user's message ("What the caller asks", "Customer prompt text").
_QUESTION_WORDS = {"question", "prompt", "input", "query", "utterance", "says", "asks"}
# ...unless the header is about the agent's side ("What the agent says" is the expected answer).
_AGENT_WORDS = {"agent", "bot", "assistant", "system"}


def normalise_header(text: str) -> str:
    text = re.sub(r"\(.*?\)|\[.*?\]", " ", text.lower())
    text = re.sub(r"[^a-z0-9]+", " ", text)
    return " ".join(text.split())


def header_field(text: str) -> tuple[str, int] | None:
    """The case field a header cell names and how strongly, or None."""
    key = normalise_header(text)
    if not key or len(key) > 60:
        return None
    if key in LOOKUP:
        return LOOKUP[key]
    words = set(key.split())
    # Longer headers ("Expected answer from the bot", "Customer prompt text"), but not
    # sentences that happen to contain a header word ("Question 3: how do I ...").
    if len(key.split()) > 5 or any(ch.isdigit() for ch in key):
        return None
    if "expected" in words or "ideal" in words:
        return ("expected_answer", 2)
    if words & _AGENT_WORDS and words & {"says", "response", "reply", "answer"}:
        return ("expected_answer", 2)
    if words & _QUESTION_WORDS:
        return ("question", 2)
    return None


def is_header(cells: dict[int, str]) -> bool:
    """A row is a header when it names a question column ("Q" only together with an answer column)."""
    hits = {column: header_field(text) for column, text in cells.items()}
    names = {hit[0] for hit in hits.values() if hit}
    if "question" not in names:
        return False
    only_q = all(normalise_header(cells[c]) == "q" for c, hit in hits.items() if hit and hit[0] == "question")
    return not only_q or "expected_answer" in names


def question_strength(cells: dict[int, str]) -> int:
    return max((hit[1] for hit in map(header_field, cells.values()) if hit and hit[0] == "question"), default=0)

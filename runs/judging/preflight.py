"""The judge's preflight: a small fixed calibration set, and what the judge must do on it.

Before a judge configuration scores a run it scores 15 answers whose right place is known:
for each of three questions, the expected answer itself, a paraphrase of it, a partly right
answer, a wrong one and an irrelevant one. A judge fit to score puts the expected answer and
its paraphrase at or above the pass threshold, the wrong and irrelevant answers below it,
and the partly right one between them (below the good ones, not below the bad ones). A judge
that misplaces any of them, gives every answer the same score, or answers something that
cannot be believed (runs.judging.checks, asked again once, as every judge answer) fails: what
it did on each item is kept and shown.

This module is the set and the grading (no database, no model); runs.services.preflight asks
the judge through the same path as a real result (runs.judging.scoring.judge) and stores the outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The expected place of each kind of answer: at/above the threshold, between, below.
KINDS: dict[str, tuple[str, str]] = {
    "exact": ("The expected answer itself", "pass"),
    "paraphrase": ("A paraphrase of it", "pass"),
    "partial": ("A partly right answer", "between"),
    "wrong": ("A wrong answer", "fail"),
    "irrelevant": ("An irrelevant answer", "fail"),
}
PLACES = {
    "pass": "at or above the pass threshold",
    "between": "between the good and the bad answers",
    "fail": "below the pass threshold",
}


@dataclass(frozen=True)
class CalibrationQuestion:
    question: str
    expected: str
    answers: dict[str, str]  # kind -> the answer the judge is shown


CALIBRATION: tuple[CalibrationQuestion, ...] = (
    CalibrationQuestion(
        question="How long is the warranty on the X200 kettle, and what does it cover?",
        expected=(
            "The X200 kettle has a 2-year warranty. It covers manufacturing defects; "
            "damage caused by limescale is not covered."
        ),
        answers={
            "paraphrase": (
                "You are covered for two years against defects in how the X200 was made. "
                "Limescale damage isn't included in the warranty."
            ),
            "partial": "The X200 kettle comes with a 2-year warranty.",
            "wrong": "The X200 kettle has a 5-year warranty that covers all damage, limescale included.",
            "irrelevant": "Our support office is open Monday to Friday, from 9 am to 5 pm.",
        },
    ),
    CalibrationQuestion(
        question="How do I reset my account password?",
        expected=(
            "Open Settings, then Security, choose Reset password, and enter the 6-digit code "
            "that is sent to your registered email address."
        ),
        answers={
            "paraphrase": (
                "Go to the Security part of Settings and pick Reset password; then type in the "
                "six-digit code we email to the address on your account."
            ),
            "partial": "Open Settings and choose Reset password.",
            "wrong": "Call the support line and an agent will read your current password to you.",
            "irrelevant": "The X200 kettle holds 1.7 litres of water.",
        },
    ),
    CalibrationQuestion(
        question="When did the Brooklyn Bridge open, and what does it cross?",
        expected="The Brooklyn Bridge opened in 1883. It crosses the East River, linking Manhattan and Brooklyn.",
        answers={
            "paraphrase": "It was opened in 1883 and spans the East River between Manhattan and Brooklyn.",
            "partial": "The Brooklyn Bridge opened in 1883.",
            "wrong": "It opened in 1932 and crosses the Hudson River, linking Manhattan and New Jersey.",
            "irrelevant": "Restart your router if the connection keeps dropping.",
        },
    ),
)


@dataclass(frozen=True)
class CalibrationItem:
    number: int  # 1-based, in the order the judge is asked
    question_number: int
    kind: str
    question: str
    expected: str
    answer: str

    @property
    def expected_place(self) -> str:
        return KINDS[self.kind][1]


def calibration_items() -> list[CalibrationItem]:
    items: list[CalibrationItem] = []
    for q_number, entry in enumerate(CALIBRATION, 1):
        for kind in KINDS:
            answer = entry.expected if kind == "exact" else entry.answers[kind]
            items.append(CalibrationItem(len(items) + 1, q_number, kind, entry.question, entry.expected, answer))
    return items


# ---- grading ------------------------------------------------------------------------------------


@dataclass
class ItemOutcome:
    item: CalibrationItem
    score: float | None = None
    reasoning: str = ""
    problem: str = ""  # why the answer is unusable (an error, a placeholder...), "" when usable
    misplaced: str = ""  # why the score is out of place, "" when in place

    @property
    def in_place(self) -> bool:
        return not self.problem and not self.misplaced

    def as_dict(self) -> dict[str, Any]:
        return {
            "number": self.item.number,
            "question_number": self.item.question_number,
            "kind": self.item.kind,
            "kind_label": KINDS[self.item.kind][0],
            "expected": self.item.expected_place,
            "expected_label": PLACES[self.item.expected_place],
            "question": self.item.question,
            "answer": self.item.answer,
            "score": self.score,
            "reasoning": self.reasoning,
            "problem": self.problem,
            "misplaced": self.misplaced,
            "in_place": self.in_place,
        }


def grade(outcomes: list[ItemOutcome], *, threshold: float) -> list[str]:
    """Mark each outcome that is out of place; return why the judge fails ([] when it passes)."""
    reasons = []
    unusable = [o for o in outcomes if o.problem]
    if unusable:
        reasons.append(f"{len(unusable)} of {len(outcomes)} answers could not be used.")
    scored = [o for o in outcomes if not o.problem and o.score is not None]
    if len(scored) > 1 and len({o.score for o in scored}) == 1:
        reasons.append(f"It gave every answer the same score ({scored[0].score:g}), right and wrong alike.")
    for q_number in sorted({o.item.question_number for o in outcomes}):
        _place({o.item.kind: o for o in outcomes if o.item.question_number == q_number and not o.problem}, threshold)
    misplaced = [o for o in outcomes if o.misplaced]
    if misplaced:
        reasons.append(f"It put {len(misplaced)} of {len(outcomes)} answers out of place.")
    return reasons


def _place(by_kind: dict[str, ItemOutcome], threshold: float) -> None:
    scores = {kind: outcome.score for kind, outcome in by_kind.items() if outcome.score is not None}
    for kind in ("exact", "paraphrase"):
        if kind in scores and scores[kind] < threshold:
            by_kind[kind].misplaced = f"Scored {scores[kind]:g}, below the pass threshold {threshold:g}."
    for kind in ("wrong", "irrelevant"):
        if kind in scores and scores[kind] >= threshold:
            by_kind[kind].misplaced = f"Scored {scores[kind]:g}, at or above the pass threshold {threshold:g}."
    if "partial" not in scores:
        return
    partial = scores["partial"]
    good = [scores[k] for k in ("exact", "paraphrase") if k in scores]
    bad = [scores[k] for k in ("wrong", "irrelevant") if k in scores]
    if good and partial >= min(good):
        by_kind["partial"].misplaced = f"Scored {partial:g}, as high as a fully right answer ({min(good):g})."
    elif bad and partial < max(bad):
        by_kind["partial"].misplaced = f"Scored {partial:g}, below a wrong or irrelevant answer ({max(bad):g})."


def _clip(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"

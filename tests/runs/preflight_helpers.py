"""Judges for preflight tests, scripted on the fake server: one that ranks the calibration set
as a fit judge does, one that gives every answer the same score, one that echoes placeholders."""

from __future__ import annotations

import re
from typing import Any

from runs.judging.preflight import calibration_items

# What a fit judge gives each kind of calibration answer.
FIT_SCORES = {"exact": 10, "paraphrase": 9, "partial": 5, "wrong": 1, "irrelevant": 0}
ANSWER = re.compile(r"## Actual answer\n<data>\n(.*?)\n</data>", re.S)


def calibration_kind(text: str) -> str | None:
    """Which kind of calibration answer a judge request shows (None: not a preflight request)."""
    found = ANSWER.search(text)
    if found is None:
        return None
    kinds = {item.answer: item.kind for item in calibration_items()}
    return kinds.get(found.group(1))


def fit_judge(fake: Any, *, scores: dict[str, int] | None = None, reasoning: str = "") -> None:
    """Score calibration answers by their kind (FIT_SCORES, or `scores`), anything else 8."""
    chosen = {**FIT_SCORES, **(scores or {})}

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        text = "\n".join(str(m.get("content") or "") for m in request["messages"])
        kind = calibration_kind(text)
        score = chosen[kind] if kind else 8
        return {"json": {"score": score, "reasoning": reasoning or f"Scored {score}: judged against the facts."}}

    fake.add_rule(task="judge", handler=answer)

"""Asking the judge model: one structured call, and its answer checked before it is believed.

Shared by the judge of scripted cases (runs.judging.scoring) and of scenario cases
(runs.judging.scenario). An answer that fails the checks of runs.judging.checks is asked once
more; a second unusable answer is a JudgeError of kind "judge_unusable", never a verdict.
Every call's tokens and cost are the judge's, the failed ones included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalsite import llm
from evalsite.llm.results import summed
from runs.judging import stability
from runs.judging.checks import judge_answer_problem
from runs.models import Result

UNUSABLE_PREFIX = "Judge answer unusable: "


class JudgeError(Exception):
    """The judge gave no usable judgment; the result becomes an Error, never a silent 0.

    `kind` is the result's error_kind; `cut` lists the judge's answers that ended at their
    token limit ([{"call": "judge", "limit": 400}])."""

    UNUSABLE = Result.ErrorKind.JUDGE_UNUSABLE

    def __init__(
        self,
        message: str,
        *,
        tokens: int = 0,
        cost: float = 0.0,
        kind: str = Result.ErrorKind.JUDGE,
        cut: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.tokens = tokens
        self.cost = cost
        self.kind = kind
        self.cut = cut or []


def judge_cut(result: llm.LLMResult) -> list[dict[str, Any]]:
    """The judge's answer as a Result.cut entry when it ended at its token limit."""
    if not result.truncated:
        return []
    return [{"call": "judge", "limit": result.max_tokens or result.completion_tokens}]


def ask_judge(
    messages: list[dict[str, str]],
    schema: dict[str, Any],
    scoring: dict[str, Any],
    trace: dict[str, str | int],
    *,
    temperature: float = 0,
) -> llm.LLMResult:
    """One structured call to the dataset's judge model; JudgeError (with what it spent) when it fails."""
    try:
        return llm.complete_json(
            messages,
            schema=schema,
            task="judge",
            purpose="judge",
            model=scoring.get("judge_model") or None,
            temperature=temperature,
            trace=trace,
        )
    except llm.LLMError as error:
        spent = error.result
        cut = judge_cut(spent) if spent is not None and error.kind == "truncated" else []
        raise JudgeError(
            f"The judge failed: {error.message}",
            tokens=(spent.prompt_tokens + spent.completion_tokens) if spent else 0,
            cost=spent.cost if spent else 0.0,
            cut=cut,
        ) from error


def ask_judge_checked(
    messages: list[dict[str, str]],
    schema: dict[str, Any],
    scoring: dict[str, Any],
    trace: dict[str, str | int],
    *,
    instructions: Sequence[str],
    case_texts: tuple[str, str] = ("", ""),
    temperature: float = 0,
    again: bool = True,
) -> llm.LLMResult:
    """ask_judge, its answer checked (runs.judging.checks). An unusable answer is asked once more
    (unless not `again`), at a little temperature: at 0 a deterministic server would only repeat
    itself. `case_texts` are the agent's answer and the expected answer. The LLMResult returned
    carries the spend of every call made."""
    spent: llm.LLMResult | None = None
    problem = ""
    for attempt in (1, 2) if again else (1,):
        retry = attempt > 1
        try:
            result = ask_judge(
                messages,
                schema,
                scoring,
                {**trace, "judge_check_retry": 1} if retry else trace,
                temperature=max(temperature, stability.RESAMPLE_TEMPERATURE) if retry else temperature,
            )
        except JudgeError as error:
            if spent is not None:
                error.tokens += spent.prompt_tokens + spent.completion_tokens
                error.cost += spent.cost
            raise
        spent = result if spent is None else summed(spent, result)
        found = judge_answer_problem(
            score=float(result.data["score"]),
            reasoning=str(result.data["reasoning"]),
            instructions=instructions,
            answer=case_texts[0],
            expected=case_texts[1],
        )
        if found is None:
            return spent
        problem = found
    assert spent is not None
    raise JudgeError(
        UNUSABLE_PREFIX + problem,
        tokens=spent.prompt_tokens + spent.completion_tokens,
        cost=spent.cost,
        kind=Result.ErrorKind.JUDGE_UNUSABLE,
        cut=judge_cut(spent),
    )


def instruction_texts(instructions: str, rubric: str, scoring: dict[str, Any], guideline: str = "") -> list[str]:
    """What the judge was told (never the case's own texts, which a reasoning may quote)."""
    criteria = [scoring.get(key) or "" for key in ("acceptance_criteria", "rejection_criteria", "evaluation_criteria")]
    return [text for text in (instructions, rubric, *criteria, guideline) if text.strip()]

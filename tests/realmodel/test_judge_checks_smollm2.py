"""SmolLM2-135M as the judge, its answers checked (runs/judging/checks.py, issue 33): whatever the
small model writes, a score is believed only when its reasoning passes the checks; otherwise the
judgment is "Judge answer unusable" (or a named judge failure), never a verdict.

Run with `-m realmodel -s` to see what the checks caught on each answer.
"""

from __future__ import annotations

import pytest

from evalsite.demo import EVALUATION_CRITERIA
from runs.judging.ask import instruction_texts
from runs.judging.checks import judge_answer_problem
from runs.judging.scoring import JUDGE_INSTRUCTIONS, JUDGE_RUBRIC, Evaluation, JudgeError, judge
from runs.models import Result

pytestmark = pytest.mark.realmodel

EXPECTED = "A new subscription can be refunded in full within 30 days of the first payment."
QUESTION = "How long do I have to ask for a full refund?"
# The calibration kinds of issue 33: the expected answer itself, a paraphrase, a partly right
# answer, a wrong one and an irrelevant one.
ANSWERS = {
    "expected": EXPECTED,
    "paraphrase": "You can get all your money back if you ask within 30 days of your first payment.",
    "partly right": "You can ask for a refund, but only part of it is returned.",
    "wrong": "Refunds are possible within 7 days, and only for annual plans.",
    "irrelevant": "Our office is open from 9 am to 5 pm, Monday to Friday.",
}
SCORING = {"evaluation_criteria": EVALUATION_CRITERIA, "pass_threshold": 7}


def test_smollm2_judge_answers_are_believable_or_marked_unusable(real_llm):
    instructions = instruction_texts(JUDGE_INSTRUCTIONS, JUDGE_RUBRIC, SCORING)
    seen = {}
    for name, answer in ANSWERS.items():
        evaluation = Evaluation(question=QUESTION, answer=answer, expected_answer=EXPECTED)
        try:
            judgment = judge(evaluation, SCORING, {"case": name})
        except JudgeError as error:
            seen[name] = f"{error.kind}: {error.message}"
            assert error.kind in (Result.ErrorKind.JUDGE_UNUSABLE, Result.ErrorKind.JUDGE), error.message
            if error.kind == Result.ErrorKind.JUDGE_UNUSABLE:
                assert error.message.startswith("Judge answer unusable: its reasoning ")
                assert error.tokens > 0  # both answers were paid for
        else:
            seen[name] = f"{judgment.score:g}/10: {judgment.reasoning}"
            assert 0 <= judgment.score <= 10
            problem = judge_answer_problem(
                score=judgment.score, reasoning=judgment.reasoning, instructions=instructions
            )
            assert problem is None, problem
    for name, what in seen.items():
        print(f"{name:>12}: {what}")

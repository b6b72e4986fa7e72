"""Work on one claimed result: ask the agent (every turn), then score. No database writes here.

The services claim the result before calling `execute` and save the Outcome after it,
in one transaction with the run's counters.
"""

from __future__ import annotations

import functools
import re
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core import signing
from django.urls import reverse

from agents.adapters import AgentConfigError, AgentError, AgentReply, AgentRequest, DocumentRef, adapter_for
from agents.models import Agent, AgentVersion
from datasets.models import Document
from evalsite import llm
from runs.engine import simulator
from runs.judging.scoring import Evaluation, JudgeError, score_case
from runs.models import Result, Run, RunCase

DOCUMENT_SALT = "runs.document"
PARAPHRASE_STYLES = (
    "as a hurried customer typing on a phone, short and informal",
    "formally and politely, with a sentence of background first",
    "indirectly, describing the situation instead of asking outright",
    "with a typo or two and no punctuation, as people really type",
    "as a non-native English speaker, in simple words",
    "in one long sentence that also mentions an unrelated detail",
    "as a follow-up from someone who is slightly annoyed",
    "as briefly as possible, in under ten words",
    "by asking what would happen in a concrete example situation",
    "as a manager asking on behalf of their team",
)
# Guidance that speaks of how the user writes (tone, register, length, persona, language):
# it then replaces the built-in styles instead of being added after one that contradicts it.
_GUIDANCE_STYLE = re.compile(
    r"\b(?:tone|style|voice|register|formal(?:ly)?|informal(?:ly)?|polite(?:ly)?|rude(?:ly)?|casual(?:ly)?|"
    r"friendly|angry|annoyed|frustrated|hurr(?:y|ied)|impatient|short|brief(?:ly)?|long|concise|verbose|"
    r"typos?|slang|emojis?|misspell\w*|sound(?:s|ing)? like|as an? |persona|speak(?:s|ing)?|in (?:english|french|"
    r"german|spanish|italian|dutch|portuguese|\w+ish)|words?|sentences?|childlike|elderly|non-native)\b",
    re.IGNORECASE,
)


@dataclass
class Outcome:
    status: str  # Result.Status: pass | fail | error | abstained
    question: str
    actual_answer: str = ""
    conversation: list[dict[str, Any]] = field(default_factory=list)  # scenario turns add timing, tool calls
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    retrieval_context: list[str] = field(default_factory=list)
    trace_id: str = ""
    score: float | None = None
    verdict: str = ""
    reasoning: str = ""
    error: str = ""
    scorers: list[dict[str, Any]] = field(default_factory=list)
    agent_tokens: int = 0
    agent_cost: float = 0.0
    judge_tokens: int = 0
    judge_cost: float = 0.0
    # A scenario case's user simulator (runs/engine/simulator.py): its spend, and how the conversation ended.
    simulator_tokens: int = 0
    simulator_cost: float = 0.0
    scenario: dict[str, Any] = field(default_factory=dict)
    duration_ms: int = 0
    judge_samples: list[float] = field(default_factory=list)
    judge_stable: bool | None = None
    error_kind: str = ""  # Result.ErrorKind of an error: agent, judge, judge_unusable
    # Model answers that ended at their token limit (Result.cut): [{"call": "agent", "limit": 256}].
    cut: list[dict[str, Any]] = field(default_factory=list)
    # The agent answered and the judge has not scored it yet (runs.engine.case.judge); not saved.
    to_judge: bool = False

    def add_judgment(self, scored: Any) -> None:
        """The judge's verdict on this outcome (runs.judging.scoring.Scored or a scenario's judgment)."""
        self.status = Result.Status.PASS if scored.passed else Result.Status.FAIL
        self.score, self.verdict, self.reasoning = scored.score, scored.verdict, scored.reasoning
        if getattr(scored, "abstained", False):  # the offline scorer cannot check it: no score, no verdict
            self.status, self.score = Result.Status.ABSTAINED, None
        self.scorers = scored.scorers
        self.judge_tokens += scored.tokens
        self.judge_cost += scored.cost
        self.cut += scored.cut

    def add_judge_error(self, error: JudgeError) -> None:
        """The judge could not score (or answered unusably): an Error result, its spend counted as judge cost."""
        self.error, self.error_kind = error.message, error.kind
        self.judge_tokens += error.tokens
        self.judge_cost += error.cost
        self.cut += error.cut

    def add_agent_reply(self, reply: AgentReply, *, turn: int | None = None) -> None:
        """One of the agent's answers: its spend, and whether it ended at its token limit."""
        self.agent_tokens += reply.tokens
        self.agent_cost += reply.cost
        if reply.cut:
            entry: dict[str, Any] = {"call": "agent", "limit": reply.token_limit}
            self.cut.append(entry if turn is None else {**entry, "turn": turn})

    @property
    def agent_cut_at(self) -> int | None:
        """The agent's token limit when one of its answers ended there (the judge is told)."""
        return next((entry["limit"] or 0 for entry in self.cut if entry["call"] == "agent"), None)


def execute(result: Result, run: Run, version: AgentVersion) -> Outcome:
    """Ask and score one result. AgentConfigError (the version can't run at all) propagates."""
    outcome = ask(result, run, version)
    judge(outcome, result, run)
    return outcome


def judge(outcome: Outcome, result: Result, run: Run) -> None:
    """Score the answer `ask` got, onto the outcome: not an agent's error, nor a scenario's
    conversation (its judge scored it as it ended, runs/engine/simulator.py)."""
    if not outcome.to_judge:
        return
    started = time.monotonic()
    outcome.to_judge = False
    _score(outcome, result.case, run, {"run": run.pk, "case": result.pk})
    outcome.duration_ms += int((time.monotonic() - started) * 1000)


def ask(result: Result, run: Run, version: AgentVersion) -> Outcome:
    """Ask the agent about one result (every turn), for `judge` to score; a re-score's answer is
    its source result's. AgentConfigError (the version can't run at all) propagates."""
    if run.purpose == Run.Purpose.RESCORE:
        return _rescore(result, run)
    started = time.monotonic()
    case = result.case
    trace: dict[str, str | int] = {"run": run.pk, "case": result.pk}
    adapter = adapter_for(version)
    adapter.check()
    outcome = Outcome(status=Result.Status.ERROR, question=result.question or case.question)
    if case.data.get("scenario"):  # a simulated user instead of scripted turns
        documents, context = _documents(case, run), _judge_context(case)
        simulator.play(
            adapter, case, run, outcome, trace, _idempotency(result, run), documents=documents, judge_context=context
        )
        outcome.duration_ms = int((time.monotonic() - started) * 1000)
        return outcome
    try:
        if result.variant:
            outcome.question = _paraphrase(case, result.variant, outcome, trace)
        reply = _converse(adapter, case, run, outcome, trace, _idempotency(result, run))
    except AgentConfigError:
        raise
    except (AgentError, llm.LLMError) as error:  # an LLMError here is the paraphrase's
        outcome.error = error.message
        outcome.error_kind = Result.ErrorKind.AGENT if isinstance(error, AgentError) else ""
    else:
        outcome.actual_answer = reply.answer
        outcome.trace_id = reply.trace_id
        outcome.to_judge = True
    outcome.duration_ms = int((time.monotonic() - started) * 1000)
    return outcome


def _rescore(result: Result, run: Run) -> Outcome:
    """A re-score's result: the answer copied from its source result (runs.services.rescore),
    for the judge to score again. The agent is not asked and a smoke variant's question is not
    paraphrased."""
    return Outcome(
        status=Result.Status.ERROR,
        question=result.question or result.case.question,
        actual_answer=result.actual_answer,
        conversation=list(result.conversation),
        tool_calls=list(result.tool_calls),
        retrieval_context=list(result.retrieval_context),
        trace_id=result.trace_id,
        cut=[entry for entry in result.cut if entry.get("call") == "agent"],  # the same answer, cut the same
        to_judge=True,
    )


def _idempotency(result: Result, run: Run) -> tuple[str, int]:
    """The key an http agent can de-duplicate on: the same for every execution of this result
    (a re-execution after its worker was lost included), and which execution this is (1, 2...)."""
    key = f"evalsite-run{run.pk}-case{result.case_id}-repeat{result.repeat}-variant{result.variant}"
    return key, max(1, result.attempts)


def _converse(
    adapter: Any,
    case: RunCase,
    run: Run,
    outcome: Outcome,
    trace: dict[str, str | int],
    identity: tuple[str, int] = ("", 1),
) -> AgentReply:
    """Send each user turn in order with the conversation so far, the question last.

    A multi-turn case's `turns` are the user turns before the question (datasets.models.TestCase).
    """
    data = case.data
    earlier = [turn.get("user", "") for turn in data.get("turns") or [] if turn.get("user")]
    user_turns = [*earlier, outcome.question]
    documents = _documents(case, run)
    conversation: list[dict[str, str]] = []
    reply = AgentReply(answer="")
    for turn, text in enumerate(user_turns, start=1):
        key = identity[0] if len(user_turns) == 1 or not identity[0] else f"{identity[0]}-turn{turn}"
        request = AgentRequest(
            question=text,
            conversation=list(conversation),
            documents=documents,
            document_context=data.get("document_context", ""),
            case_id=case.case_id or str(case.display_number),
            run_id=run.pk,
            trace=trace,
            idempotency_key=key,
            attempt=identity[1],
        )
        reply = adapter.ask(request)
        outcome.add_agent_reply(reply, turn=turn if len(user_turns) > 1 else None)
        outcome.tool_calls += reply.tool_calls
        outcome.retrieval_context += [item for item in reply.retrieval_context if item not in outcome.retrieval_context]
        conversation += [{"role": "user", "content": text}, {"role": "assistant", "content": reply.answer}]
    if earlier:
        outcome.conversation = conversation
    return reply


def _score(outcome: Outcome, case: RunCase, run: Run, trace: dict[str, str | int]) -> None:
    data = case.data
    evaluation = Evaluation(
        question=outcome.question,
        answer=outcome.actual_answer,
        expected_answer=case.expected_answer,
        conversation=outcome.conversation,
        expected_turns=[turn.get("expected", "") for turn in data.get("turns") or [] if turn.get("user")],
        document_context=_judge_context(case),
        guideline=data.get("judge_guideline", ""),
        tool_calls=outcome.tool_calls,
        expected_tools=data.get("expected_tools") or [],
        trajectory_mode=data.get("trajectory_mode") or "strict",
        check_tool_args=bool(data.get("check_tool_args")),
        retrieval_context=outcome.retrieval_context,
        expected_context=data.get("expected_context") or [],
        answer_cut_at=outcome.agent_cut_at,
    )
    try:
        scored = score_case(
            evaluation=evaluation, scoring=run.scoring, offline=run.scorer == Run.Scorer.OFFLINE, trace=trace
        )
    except JudgeError as error:
        outcome.add_judge_error(error)
        return
    outcome.add_judgment(scored)
    outcome.judge_samples, outcome.judge_stable = scored.samples, scored.stable


def paraphrase_prompt(guidance: str, variant: int) -> str:
    """The paraphraser's instructions for one variant. The team's guidance decides the style when it
    speaks of one ("informal tone"); a built-in style is given only where the guidance is silent."""
    task = "Rewrite the user's question so that it asks for exactly the same thing in different words"
    keep = "Keep every name, number and condition. Reply with the rewritten question only."
    if guidance and _GUIDANCE_STYLE.search(guidance):
        return f"{task}, in the style this guidance asks for: {guidance}\nThis is variant {variant}. {keep}"
    style = PARAPHRASE_STYLES[(variant - 1) % len(PARAPHRASE_STYLES)]
    return f"{task}, {style}. {keep}" + (f"\nFollow this guidance too: {guidance}" if guidance else "")


def _paraphrase(case: RunCase, variant: int, outcome: Outcome, trace: dict[str, str | int]) -> str:
    """A smoke-test variant: the question (a multi-turn case's last turn) reworded in its own style."""
    original = case.question
    prompt = paraphrase_prompt((case.data.get("smoke_guidance") or "").strip(), variant)
    result = llm.complete(
        [{"role": "system", "content": prompt}, {"role": "user", "content": original}],
        task="paraphrase",
        temperature=0.9,
        trace=trace,
    )
    outcome.judge_tokens += result.prompt_tokens + result.completion_tokens
    outcome.judge_cost += result.cost
    text = result.text.strip().strip('"').strip()
    return text or original


# ---- documents --------------------------------------------------------------------------


def _documents(case: RunCase, run: Run) -> list[DocumentRef]:
    """Signed short-lived links for http agents; extracted text for agents the console runs itself."""
    refs = case.data.get("documents") or []
    if not refs:
        return []
    if run.agent.kind == Agent.Kind.HTTP:
        return [DocumentRef(name=ref["name"], url=document_url(run, ref["id"])) for ref in refs]
    return [DocumentRef(name=ref["name"], text=document_text(ref["id"])) for ref in refs]


def document_url(run: Run, document_id: int) -> str:
    token = signing.dumps({"r": run.pk, "d": document_id}, salt=DOCUMENT_SALT, compress=True)
    path = reverse("runs:document_signed", kwargs={"agent_id": run.agent_id, "token": token})
    return f"{settings.SITE_URL}{path}"


def document_token_load(token: str) -> dict[str, int]:
    """The {"r": run id, "d": document id} a link was signed for; raises signing.BadSignature when forged or expired."""
    return signing.loads(token, salt=DOCUMENT_SALT, max_age=settings.EVALSITE_DOCUMENT_URL_TTL)


@functools.lru_cache(maxsize=32)
def document_text(document_id: int) -> str:
    # A document's text is final once its dataset is Ready, so a worker reads it once.
    return Document.objects.filter(pk=document_id).values_list("text", flat=True).first() or ""


def _judge_context(case: RunCase) -> str:
    parts = [case.data.get("document_context", "")]
    for ref in case.data.get("documents") or []:
        text = document_text(ref["id"])
        if text:
            parts.append(f"{ref['name']}:\n{text}")
    return "\n\n".join(part for part in parts if part).strip()

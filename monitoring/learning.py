"""Learning cases (issue 47): a production trace becomes a reviewed test case.

A reviewer makes a candidate from a trace (a low online score, a thumbs-down, or their own pick):
the question and the earlier turns come from the trace, the agent's answer is shown beside, and
the reviewer writes or corrects the expected answer. The queue puts the most doubtful first: a
low score, and above all a judge that disagrees with the end user (passed, yet thumbs-down).
Approving adds the case to a dataset of the agent through datasets.services.case_create, with
provenance back to the trace (source_file "production trace <id>", source_location with its time
and service, metadata trace_id/trace_time/service); rejecting keeps the reason.

Candidates are not made automatically: a thumbs-down or a failed score only puts the trace on the
queue page's "worth a look" list (learning_suggestions), one click from a candidate. A reviewer
decides what becomes a test case; a burst of thumbs-downs does not fill the queue on its own.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from accounts.models import Membership
from agents.models import Agent
from datasets.fields import MAX_TURNS
from datasets.models import Dataset, TestCase
from datasets.services import case_create
from monitoring.models import Feedback, LearningCase, OnlineScore, Trace
from monitoring.selectors import NEGATIVE_FEEDBACK, trace_list

REJECT_REASON_MAX = 500
SUGGESTIONS_MAX = 20


def _check_member(user: User | None, agent_team_id: int) -> None:
    """Only a member of the agent's team reviews its traces (the pages and the API reach the agent
    through the user's teams already: this holds for any other caller too). None: the system."""
    if user is not None and not Membership.objects.filter(team_id=agent_team_id, user=user).exists():
        raise PermissionDenied("Only a member of the agent's team can review its traces.")


def learning_doubt(*, trace: Trace) -> float:
    """How doubtful a trace's answer is, 0 (nothing says it is wrong) to 2.

    The lowest counted online score adds up to 1 (a 0/10 is 1); negative feedback adds 0.5; a
    judge that disagrees with the user adds 1 more: it passed an answer the user turned down,
    or failed one the user liked (the judge or the user is wrong: worth a reviewer's look)."""
    scores = [score for score in trace.scores.all() if score.status == OnlineScore.Status.SCORED]
    feedback = list(trace.feedback.all())
    negative = any(item.negative for item in feedback)
    positive = any(not item.negative for item in feedback)
    doubt = 0.0
    counted = [score.score for score in scores if score.score is not None]
    if counted:
        doubt += max(0.0, min(1.0, (10 - min(counted)) / 10))
    if negative:
        doubt += 0.5
    passed = any(score.passed for score in scores)
    failed = any(score.passed is False for score in scores)
    if (passed and negative) or (failed and positive):
        doubt += 1.0
    return round(doubt, 3)


def _earlier_turns(trace: Trace) -> list[dict[str, str]]:
    """The conversation before the trace's last question, as the roles sent it. An assistant turn
    with no text only called tools (their results came back in the next turn): a test case's
    history holds what the user read, so it is left out rather than kept as a blank turn."""
    messages = [
        m
        for m in trace.messages
        if isinstance(m, dict) and m.get("role") in ("user", "assistant") and (m["role"] == "user" or m.get("content"))
    ]
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=len(messages))
    return [{"role": m["role"], "content": str(m.get("content") or "")} for m in messages[:last_user]]


def learning_case_create(*, trace: Trace, reason: str, user: User | None) -> LearningCase:
    """A candidate from the trace, or the trace's open candidate when it already has one."""
    if trace.agent_id is None:
        raise ValidationError("This trace belongs to no agent yet: map its service to an agent first.")
    _check_member(user, trace.team_id)
    if reason not in LearningCase.Reason.values:
        raise ValidationError({"reason": [f"Choose one of {', '.join(LearningCase.Reason.values)}."]})
    question = trace.question.strip()
    if not question:
        raise ValidationError("This trace has no question (no user message was sent): it cannot become a test case.")
    existing = LearningCase.objects.filter(
        agent_id=trace.agent_id, otel_trace_id=trace.otel_trace_id, status=LearningCase.Status.CANDIDATE
    ).first()
    if existing:
        return existing
    case = LearningCase(
        agent_id=trace.agent_id,
        trace=trace,
        otel_trace_id=trace.otel_trace_id,
        trace_time=trace.started_at,
        service_name=trace.service_name,
        reason=reason,
        doubt=learning_doubt(trace=trace),
        question=question,
        conversation=_earlier_turns(trace),
        actual_answer=trace.answer,
        created_by=user,
    )
    try:
        with transaction.atomic():
            case.save()
    except IntegrityError:  # made meanwhile by another request
        return LearningCase.objects.get(
            agent_id=trace.agent_id, otel_trace_id=trace.otel_trace_id, status=LearningCase.Status.CANDIDATE
        )
    return case


def _case_turns(conversation: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Earlier turns as a test case holds them: each user message with the reply that followed;
    the last MAX_TURNS of a longer conversation (the ones nearest the question)."""
    turns: list[dict[str, str]] = []
    for message in conversation:
        if message.get("role") == "user":
            turns.append({"user": message.get("content", ""), "expected": ""})
        elif message.get("role") == "assistant" and turns and not turns[-1]["expected"]:
            turns[-1]["expected"] = message.get("content", "")
    return [turn for turn in turns if turn["user"].strip()][-MAX_TURNS:]


def _claim(case: LearningCase, status: str, user: User | None, **fields: Any) -> None:
    claimed = LearningCase.objects.filter(pk=case.pk, status=LearningCase.Status.CANDIDATE).update(
        status=status, reviewed_by=user, reviewed_at=timezone.now(), **fields
    )
    if not claimed:
        raise ValidationError("This learning case was already reviewed.")


@transaction.atomic
def learning_case_approve(*, case: LearningCase, dataset: Dataset, expected_answer: str, user: User | None) -> TestCase:
    """The candidate becomes a test case of `dataset` (a dataset of the case's agent), through the
    datasets app's own case_create; all or nothing (a case reviewed meanwhile adds no test case)."""
    _check_member(user, case.agent.team_id)
    if dataset.agent_id != case.agent_id:
        raise ValidationError({"dataset": ["Choose a dataset of this agent."]})
    expected = expected_answer.strip()
    if not expected:
        raise ValidationError({"expected_answer": ["Write the answer the agent should have given."]})
    when = case.trace_time.isoformat(timespec="seconds")
    test_case = case_create(
        dataset=dataset,
        question=case.question,
        expected_answer=expected,
        turns=_case_turns(case.conversation),
        tags=["production"],
        source_file=f"production trace {case.otel_trace_id}",
        source_location=f"{when} {case.service_name}".strip()[:100],
        metadata={"trace_id": case.otel_trace_id, "trace_time": when, "service": case.service_name},
    )
    _claim(case, LearningCase.Status.APPROVED, user, dataset=dataset, test_case=test_case, expected_answer=expected)
    case.refresh_from_db()
    return test_case


@transaction.atomic
def learning_case_reject(*, case: LearningCase, reason: str, user: User | None) -> LearningCase:
    """The candidate is set aside, with the reviewer's reason kept on it."""
    _check_member(user, case.agent.team_id)
    reason = reason.strip()
    if not reason:
        raise ValidationError({"reason": ["Say why this trace should not become a test case."]})
    _claim(case, LearningCase.Status.REJECTED, user, reject_reason=reason[:REJECT_REASON_MAX])
    case.refresh_from_db()
    return case


def learning_case_list(*, agent: Agent, status: str = LearningCase.Status.CANDIDATE) -> QuerySet[LearningCase]:
    """The agent's learning cases of a status; candidates most doubtful first (the model's order)."""
    cases = LearningCase.objects.filter(agent=agent).select_related("dataset", "test_case", "reviewed_by")
    if status:
        cases = cases.filter(status=status)
    if status != LearningCase.Status.CANDIDATE:
        cases = cases.order_by("-reviewed_at", "-id")
    return cases


def learning_suggestions(*, agent: Agent, limit: int = SUGGESTIONS_MAX) -> list[Trace]:
    """Traces worth a look that have no learning case yet: negative feedback or a failed online
    score, newest first."""
    has_case = LearningCase.objects.filter(agent=agent, otel_trace_id=OuterRef("otel_trace_id"))
    traces = trace_list(agent=agent).filter(~Exists(has_case))
    negative = Exists(Feedback.objects.filter(NEGATIVE_FEEDBACK, trace=OuterRef("pk")))
    failed = Exists(OnlineScore.objects.filter(trace=OuterRef("pk"), status=OnlineScore.Status.SCORED, passed=False))
    return list(traces.filter(negative | failed)[:limit])


def learning_reason_for(trace: Trace) -> str:
    """The reason a one-click candidate from the suggestions list records."""
    if getattr(trace, "negative_feedback", False):
        return LearningCase.Reason.THUMBS_DOWN
    if getattr(trace, "failed_score", False):
        return LearningCase.Reason.LOW_SCORE
    return LearningCase.Reason.PICKED

"""JSON API for reviews: a run's results with their reviews, post a review, the review
queue of a run or an agent, and the agreement figures per judge configuration.

Every object is reached through the token owner's teams: another team's run, result or
agent is a 404. Numbers are 1-based as on the pages (`case_position`, `repeat`).
"""

from datetime import datetime
from typing import Any, Literal

from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404
from ninja import Field, Query, Router, Schema, Status
from ninja.pagination import paginate

from agents.selectors import agent_get_for_user
from evalsite.api_errors import refusal
from evalsite.http import ApiRequest
from evalsite.paging import BoundedLimitOffsetPagination
from evalsite.schemas import StrictSchema
from reviews import queue, selectors, services
from reviews.models import Review
from runs.api_schemas import ErrorOut
from runs.models import Result
from runs.selectors import run_get_for_user

router = Router(tags=["reviews"])


class ReviewIn(StrictSchema):
    verdict: Literal["agree", "pass", "fail"] = Field(description="agree: the judge's verdict and score stand")
    score: float | None = Field(None, ge=0, le=10, description="Your score 0-10 (overrides only)")
    note: str = Field("", max_length=Review.NOTE_MAX)


class ReviewOut(Schema):
    id: int
    result_id: int
    reviewer: str
    agrees: bool
    verdict: str = Field(description="pass | fail: the reviewer's (the judge's when agreeing)")
    score: float | None
    note: str
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def resolve_reviewer(review: Review) -> str:
        return review.reviewer.get_username()

    @staticmethod
    def resolve_verdict(review: Review) -> str:
        return "pass" if review.passed else "fail"


class ResultReviewsOut(Schema):
    id: int
    case_position: int
    case_id: str
    repeat: int
    variant: int
    status: str = Field(description="The judge's outcome: pass | fail | error | ...")
    score: float | None
    reviews: list[ReviewOut]

    @staticmethod
    def resolve_case_position(result: Result) -> int:
        return result.case.position + 1

    @staticmethod
    def resolve_case_id(result: Result) -> str:
        return result.case.case_id

    @staticmethod
    def resolve_repeat(result: Result) -> int:
        return result.repeat + 1

    @staticmethod
    def resolve_reviews(result: Result) -> list[Review]:
        return list(result.reviews.all())


class QueueItemOut(Schema):
    run_id: int
    result_id: int
    case_position: int
    repeat: int
    variant: int
    status: str
    score: float | None
    reasons: list[str] = Field(description=", ".join(queue.REASONS))
    details: list[str]
    tags: list[str]


class AgreementOut(Schema):
    agent_id: int
    tag: str
    judge_configurations: list[dict[str, Any]] = Field(
        description="Per judge configuration: agreement_rate, kappa (null when undefined), confusion, "
        "mean_absolute_score_difference, between_reviewers, by_tag, disagreements"
    )


def _item(item: queue.QueueItem) -> dict[str, Any]:
    result = item.result
    return {
        "run_id": item.run.pk,
        "result_id": result.pk,
        "case_position": result.case.position + 1,
        "repeat": result.repeat + 1,
        "variant": result.variant,
        "status": result.status,
        "score": result.score,
        "reasons": item.reasons,
        "details": item.details,
        "tags": item.tags,
    }


@router.get("/runs/{run_id}/reviews", response=list[ResultReviewsOut], summary="A run's results with their reviews")
@paginate(BoundedLimitOffsetPagination)
def run_reviews(request: ApiRequest, run_id: int) -> Any:
    return selectors.result_reviews_list(run=run_get_for_user(user=request.user, run_id=run_id))


@router.post(
    "/runs/{run_id}/results/{result_id}/review",
    response={200: ReviewOut, 201: ReviewOut, 400: ErrorOut},
    summary="Review a result: agree with the judge, or override its verdict",
)
def review_post(request: ApiRequest, run_id: int, result_id: int, payload: ReviewIn) -> Status[Any]:
    """201 for your first review of the result, 200 when it replaces your earlier one."""
    run = run_get_for_user(user=request.user, run_id=run_id)
    result = get_object_or_404(Result, pk=result_id, run=run)
    existed = Review.objects.filter(result=result, reviewer=request.user).exists()
    agrees = payload.verdict == "agree"
    try:
        review = services.review_save(
            result=result,
            reviewer=request.user,
            agrees=agrees,
            passed=None if agrees else payload.verdict == "pass",
            score=None if agrees else payload.score,
            note=payload.note,
        )
    except ValidationError as error:
        return refusal(400, error)
    return Status(200 if existed else 201, review)


@router.get(
    "/runs/{run_id}/review-queue", response=list[QueueItemOut], summary="A run's review queue, most doubtful first"
)
def run_review_queue(
    request: ApiRequest, run_id: int, reason: str = Query("", description="Only this reason"), tag: str = ""
) -> list[dict[str, Any]]:
    run = run_get_for_user(user=request.user, run_id=run_id)
    items = queue.review_queue(runs=[run], reviewer=request.user, seed=run.pk, reason=reason, tag=tag)
    return [_item(item) for item in items]


@router.get(
    "/agents/{agent_id}/review-queue", response=list[QueueItemOut], summary="An agent's review queue (latest runs)"
)
def agent_review_queue(request: ApiRequest, agent_id: int, reason: str = "", tag: str = "") -> list[dict[str, Any]]:
    agent = agent_get_for_user(user=request.user, agent_id=agent_id)
    runs = selectors.agent_queue_runs(agent=agent)
    items = queue.review_queue(runs=runs, reviewer=request.user, seed=agent.pk, reason=reason, tag=tag)
    return [_item(item) for item in items]


@router.get(
    "/agents/{agent_id}/agreement",
    response=AgreementOut,
    summary="Agreement between the judge and the reviewers, per judge configuration",
)
def agent_agreement(request: ApiRequest, agent_id: int, tag: str = "") -> dict[str, Any]:
    agent = agent_get_for_user(user=request.user, agent_id=agent_id)
    groups = selectors.agreement_groups(runs=selectors.agent_agreement_runs(agent=agent), tag=tag)
    return {"agent_id": agent.pk, "tag": tag, "judge_configurations": [group.as_dict() for group in groups]}

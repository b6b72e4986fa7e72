"""JSON API for the review card's "correct the case": change the dataset case a result was made
from (its expected answer, its judge guideline), as reviews.views.case_correct does, with the
same form, service and messages. The run keeps its own copy of the case.

The result is reached through the token owner's teams: another team's is a 404.
"""

from typing import Any

from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404
from ninja import Field, Router, Schema, Status

from evalsite.api_errors import refusal
from evalsite.http import ApiRequest
from evalsite.schemas import StrictSchema
from reviews import services
from reviews.forms import CaseCorrectionForm
from reviews.models import CaseEdit
from runs.api_schemas import ErrorOut
from runs.models import Result
from runs.selectors import run_get_for_user

router = Router(tags=["reviews"])


class CaseCorrectionIn(StrictSchema):
    expected_answer: str | None = Field(None, description="The case's new expected answer; left out: unchanged")
    judge_guideline: str | None = Field(None, description="The case's new judge guideline; left out: unchanged")


class CorrectedCaseOut(Schema):
    case_id: int = Field(description="The dataset's case (the run keeps its copy)")
    dataset_id: int
    expected_answer: str
    judge_guideline: str
    revisions: int = Field(description="Changes recorded on the case so far, one per field changed")
    message: str


@router.post(
    "/runs/{run_id}/results/{result_id}/case",
    response={200: CorrectedCaseOut, 400: ErrorOut},
    url_name="reviews_case_correct",
    summary="Correct the dataset case a result was made from (expected answer, judge guideline)",
)
def result_case_correct(request: ApiRequest, run_id: int, result_id: int, payload: CaseCorrectionIn) -> Status[Any]:
    """Each changed field is recorded as a revision of the case. 400 when nothing changes or
    the case was deleted from its dataset. Idempotent: the same correction again changes
    nothing (400 "Nothing changed")."""
    run = run_get_for_user(user=request.user, run_id=run_id)
    result = get_object_or_404(Result.objects.select_related("case__source_case"), pk=result_id, run=run)
    source = result.case.source_case
    data = {
        name: value if value is not None else (getattr(source, name) if source else "")
        for name, value in payload.model_dump().items()
    }
    form = CaseCorrectionForm(data)
    form.is_valid()  # every field is optional text
    try:
        case = services.case_correct(result=result, user=request.user, **form.cleaned_data)
    except ValidationError as error:
        return refusal(400, error)
    body = {
        "case_id": case.pk,
        "dataset_id": case.dataset_id,
        "expected_answer": case.expected_answer,
        "judge_guideline": case.judge_guideline,
        "revisions": CaseEdit.objects.filter(case=case).count(),
        "message": "The dataset's case is updated. This run keeps its copy.",
    }
    return Status(200, body)

"""Reviews: a person's verdict on a result, and corrections to a case made from its card.

Neither ever changes what the judge said (Result rows) nor a run's snapshot (RunCase):
a review is a row beside the result, a case correction changes the dataset's TestCase
and records the old value.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction

from datasets import services as dataset_services
from datasets.models import TestCase
from reviews.models import CaseEdit, Review
from runs.models import Result

JUDGED = (Result.Status.PASS, Result.Status.FAIL)


def review_save(
    *,
    result: Result,
    reviewer: User,
    agrees: bool,
    passed: bool | None = None,
    score: float | None = None,
    note: str = "",
) -> Review:
    """Agree with the judge, or override its verdict (and optionally its score). A second
    review by the same person replaces the first."""
    # An error or an abstention ("Needs a judge model") has no verdict to agree with: a
    # person's own verdict is exactly what it lacks.
    if result.status not in (*JUDGED, Result.Status.ERROR, Result.Status.ABSTAINED):
        raise ValidationError("Only finished results can be reviewed.")
    if agrees:
        if result.status not in JUDGED:
            raise ValidationError("The judge gave no verdict here: give yours instead of agreeing.")
        passed, score = result.status == Result.Status.PASS, None
    elif passed is None:
        raise ValidationError("Say whether the answer passes or fails.")
    if score is not None and not 0 <= score <= 10:
        raise ValidationError("A score is between 0 and 10.")
    note = (note or "").strip()
    if len(note) > Review.NOTE_MAX:
        raise ValidationError(f"A note is at most {Review.NOTE_MAX} characters.")
    review, _ = Review.objects.update_or_create(
        result=result,
        reviewer=reviewer,
        defaults={"agrees": agrees, "passed": bool(passed), "score": score, "note": note},
    )
    return review


def review_delete(*, review: Review) -> None:
    review.delete()


@transaction.atomic
def case_correct(*, result: Result, user: User, **fields: Any) -> TestCase:
    """Change the dataset case a result was made from (expected answer, judge guideline),
    recording each changed field as a new revision of the case. The run keeps its snapshot."""
    source_id = result.case.source_case_id
    case = TestCase.objects.select_for_update().filter(pk=source_id).first() if source_id else None
    if case is None:
        raise ValidationError("The case this result came from was deleted from its dataset.")
    changed = {name: value for name, value in fields.items() if getattr(case, name) != value}
    if not changed:
        raise ValidationError("Nothing changed: the case already says that.")
    old = {name: getattr(case, name) for name in changed}
    dataset_services.case_update(case=case, **changed)
    revision = CaseEdit.objects.filter(case=case).count()
    for name in changed:
        revision += 1
        CaseEdit.objects.create(
            case=case,
            result=result,
            field=name,
            old_value=old[name],
            new_value=getattr(case, name),
            revision=revision,
            edited_by=user,
        )
    return case

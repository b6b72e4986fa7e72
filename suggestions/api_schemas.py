"""The suggestions API's request and response schemas (suggestions/api.py)."""

from datetime import datetime
from typing import Literal

from ninja import Field, Schema

from evalsite.schemas import Id, StrictSchema

EditableField = Literal["instructions", "skills", "knowledge", "guardrails"]


class GenerationOut(Schema):
    status: str = Field(description="queued | running | done | failed")
    offline: bool = Field(description="Generated without a model")
    error: str
    notes: list[str] = Field(description="Why some failing cases got no suggestion")
    queued_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class SuggestionOut(Schema):
    id: int
    title: str
    category: str = Field(description="instructions | skills | knowledge | guardrails | other")
    target_field: str = Field(description="The agent field it changes (other: the instructions)")
    description: str
    proposed_text: str
    state: str = Field(description="proposed | applied | dismissed")
    offline: bool
    cases: list[int] = Field(description="Numbers of the run's cases that motivated it")
    applied_version: int | None = Field(description="Number of the agent version it was applied in")


class PanelOut(Schema):
    state: str = Field(
        description="active | unavailable | none_needed | not_started | generating | stalled | error | ready"
    )
    generation: GenerationOut | None
    suggestions: list[SuggestionOut]
    apply_blocker: str = Field(description='Why Apply is refused for this agent ("" when it is not)')
    verify_version: int | None = Field(description="The agent version a Verify would test")


class SuggestionEditIn(StrictSchema):
    id: Id
    title: str | None = Field(None, description="The edited title; the suggestion's own when left out")
    category: str | None = Field(None, description="The edited category; the suggestion's own when left out")
    description: str | None = Field(None, description="The edited description; the suggestion's own when left out")


class ApplyIn(StrictSchema):
    suggestions: list[SuggestionEditIn] = Field(
        description="The chosen suggestions (proposed ones of the run), with their edits; the others stay proposed"
    )


class DiffLineOut(Schema):
    kind: str = Field(description="add | del | ctx | hunk")
    text: str


class AffectedCaseOut(Schema):
    number: int
    question: str
    motivating: bool = Field(description="One of the cases the change is for")
    what: str


class ReviewFieldOut(Schema):
    name: str
    label: str
    current: str = Field(description="The field's text in the base version")
    text: str = Field(description="The proposed final text (post it, edited or not, to confirm)")
    diff: list[DiffLineOut]
    suggestions: list[int] = Field(description="The chosen suggestions that change this field")
    unused: bool = Field(description="This kind of agent does not read the field")
    leaks: list[str] = Field(description="Why the text would teach the agent its test (confirming it is refused)")
    affected: list[AffectedCaseOut] = Field(description="The run's cases the new text reaches")


class ApplyReviewOut(Schema):
    suggestions: list[int] = Field(description="The chosen suggestions, to post back to confirm")
    base_version: int | None = Field(description="Number of the agent version the texts change")
    fields: list[ReviewFieldOut]
    can_preview: bool = Field(description="A preview with the model can answer the cases the texts reach")


class RewriteFieldOut(Schema):
    name: str
    status: str = Field(description="pending | running | done | failed | kept")
    current: str
    text: str
    error: str


class ApplyJobOut(Schema):
    id: int
    status: str = Field(description="queued | running | done | failed | cancelled")
    error: str
    base_version: int
    suggestions: list[int]
    fields: list[RewriteFieldOut]
    review: ApplyReviewOut | None = Field(description="Once every field is rewritten: the texts to review and confirm")


class ApplyJobActionIn(StrictSchema):
    action: Literal["cancel", "retry", "keep"]
    field: EditableField | Literal[""] = Field("", description='retry: one field ("" every field); keep: required')


class ConfirmIn(StrictSchema):
    suggestions: list[Id] = Field(description="The chosen suggestions (ApplyReviewOut.suggestions)")
    base_version: int = Field(description="Number of the version the texts change (ApplyReviewOut.base_version)")
    texts: dict[EditableField, str] = Field(description="The final text of every changed field")


class DiffIn(StrictSchema):
    suggestions: list[Id]
    base_version: int
    field: EditableField
    text: str


class DiffOut(Schema):
    field: str
    label: str
    lines: list[DiffLineOut]
    added: int
    removed: int


class AppliedOut(Schema):
    agent_id: int
    version: int = Field(description="Number of the new agent version")
    suggestions: list[int]
    message: str


class PreviewRowOut(Schema):
    number: int
    question: str
    before: str = Field(description="The run's verdict")
    status: str = Field(description="The preview's verdict")
    score: float | None = None
    answer: str = ""
    error: str = ""


class PreviewOut(Schema):
    id: int
    status: str = Field(description="queued | running | done | failed")
    lost: bool = Field(description="Its worker was lost: start another")
    error: str
    positions: int = Field(description="Cases it answers")
    results: list[PreviewRowOut]
    fixes: int
    breaks: int


class VerifyIn(StrictSchema):
    version: int = Field(description="Number of the agent version to verify")
    scope: Literal["all", "sample"] = Field("sample", description="all cases, or the failing ones and a sample")
    sample: int | None = Field(None, description="Passing cases to re-run with the failing ones (scope sample)")
    request_key: str = Field("", description="Same key, same run (or the Idempotency-Key header)")

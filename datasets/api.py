"""JSON API for datasets and their test cases ("items"), under /api/agents/{agent_id}/eval/.

Token auth comes from evalsite.api. A dataset or agent of another team is a 404, never a
403. Bad input is a 422 whose `detail` lists {loc, msg, type} per field, the same shape
django-ninja uses for its own schema errors, so clients handle one error format.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Count, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.http import Http404, HttpRequest
from ninja import Field, Router, Schema, Status
from ninja.errors import ValidationError as NinjaValidationError
from ninja.pagination import paginate

from agents.models import Agent
from agents.selectors import agent_get_for_user
from datasets import selectors, services
from datasets.extraction.mapping import dataset_mapping_confirm, mapping_from_json
from datasets.models import DEFAULT_PASS_THRESHOLD, Dataset, TestCase
from evalsite.api_errors import ValidationErrorOut, refusal
from evalsite.idempotency import idempotency_header, idempotent_create, loader
from evalsite.paging import BoundedLimitOffsetPagination
from evalsite.schemas import StrictSchema

router = Router(tags=["datasets"])

IDEMPOTENCY = idempotency_header()

TrajectoryMode = Literal["strict", "unordered", "superset", "subset"]


# ---- schemas -------------------------------------------------------------------


class NotFoundOut(Schema):
    detail: str


class DatasetOut(Schema):
    id: int
    agent_id: int
    name: str
    description: str
    status: str = Field(description="extracting | review (an upload waiting for its column mapping) | ready | failed")
    failure_reason: str
    notice: str
    warnings: list[dict[str, str]] = Field(
        description='What the import changed or doubts: [{"where": "plan.xlsx, Cases row 4", "message": ...}]'
    )
    mapping: dict[str, Any] = Field(
        description="An upload's tables (header row, field per column, first rows), case count and chosen mapping"
    )
    source: str = Field(description="manual | upload | generated | import")
    source_name: str
    agent_reads_source: bool = Field(
        description="The uploaded file is attached to every case and sent to the agent (chosen at upload)"
    )
    eval_set_id: str = Field(description="The EvalSet id kept through JSON export and import")
    case_count: int
    acceptance_criteria: str
    rejection_criteria: str
    evaluation_criteria: str
    judge_model: str
    judge_prompt: str
    pass_threshold: int
    number_of_requests: int
    jaccard_enabled: bool
    vector_enabled: bool
    context_gates: bool = Field(description="A failed retrieval-context check fails the case")
    judge_resamples: int = Field(description="Extra judge calls for a score next to the pass threshold (0: off)")
    alignment_examples: int = Field(description="Reviewers' latest overrides shown to the judge (0: off)")
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def resolve_case_count(dataset: Dataset) -> int:
        count = getattr(dataset, "case_count", None)
        return dataset.cases.count() if count is None else count


class DatasetIn(StrictSchema):
    name: str = Field(description="Required, at most 120 characters, unique for the agent")
    description: str = ""
    acceptance_criteria: str = ""
    rejection_criteria: str = ""
    evaluation_criteria: str = ""
    judge_model: str = Field("", description="litellm model name; empty uses the console's judge model")
    judge_prompt: str = Field("", description="Replaces the default judge instructions")
    pass_threshold: int = Field(DEFAULT_PASS_THRESHOLD, ge=0, le=10)
    number_of_requests: int = Field(1, ge=1, le=10, description="Repeats per case")
    jaccard_enabled: bool = True
    vector_enabled: bool = False
    context_gates: bool = Field(False, description="A failed retrieval-context check fails the case")
    judge_resamples: int = Field(2, ge=0, le=4, description="Extra judge calls for a score next to the threshold")
    alignment_examples: int = Field(0, ge=0, le=10, description="Reviewers' latest overrides shown to the judge")


class DatasetPatch(StrictSchema):
    name: str | None = None
    description: str | None = None
    acceptance_criteria: str | None = None
    rejection_criteria: str | None = None
    evaluation_criteria: str | None = None
    judge_model: str | None = None
    judge_prompt: str | None = None
    pass_threshold: int | None = Field(None, ge=0, le=10)
    number_of_requests: int | None = Field(None, ge=1, le=10)
    jaccard_enabled: bool | None = None
    vector_enabled: bool | None = None
    context_gates: bool | None = None
    judge_resamples: int | None = Field(None, ge=0, le=4)
    alignment_examples: int | None = Field(None, ge=0, le=10)


class Turn(Schema):
    user: str
    expected: str = ""


class Tool(Schema):
    name: str
    args: dict[str, Any] = Field(default_factory=dict, description="Arguments to check; {} checks none")


class TurnIn(Turn, StrictSchema):
    pass


class ToolIn(Tool, StrictSchema):
    pass


class Scenario(Schema):
    goal: str = Field("", description="What the simulated user wants to get done (a goal or a plan is needed)")
    plan: str = Field("", description="How the user goes about it; the question is their first message")
    persona: str = ""
    max_turns: int = Field(10, ge=1, le=30, description="User messages at most")
    success_criteria: str = Field("", description="What the judge checks in the whole conversation")


class ScenarioIn(Scenario, StrictSchema):
    pass


class DocumentOut(Schema):
    id: int
    name: str
    file_type: str
    size: int

    @staticmethod
    def resolve_name(document: Any) -> str:
        return document.original_name


class SourceOut(Schema):
    """Where the case was read from: provenance for the team, never sent to the agent."""

    document: DocumentOut | None = Field(description="The uploaded file, while the dataset keeps it")
    file: str
    location: str = Field(description="page 3, Sheet1 row 12, line 40, ...")
    span: str = Field(description="The evidence text")


class ItemOut(Schema):
    id: int
    position: int = Field(description="The case's number in the dataset, from 1, as the dataset page shows it")
    case_id: str
    question: str
    expected_answer: str
    document_context: str
    documents: list[DocumentOut] = Field(
        description="The case's attachments: the only documents the agent under test receives"
    )
    source: SourceOut | None = Field(description="The file the case was extracted from, if any")
    turns: list[Turn] = Field(description="User turns before the question, each with an optional expected reply")
    expected_tools: list[Tool]
    trajectory_mode: TrajectoryMode
    check_tool_args: bool
    expected_context: list[str]
    judge_guideline: str
    tags: list[str]
    smoke_count: int | None
    smoke_guidance: str
    scenario: Scenario | None = Field(description="A simulated user plays this case (None: a scripted case)")
    tests_rule: str
    source_file: str
    source_location: str
    source_span: str
    extra: dict[str, Any]
    metadata: dict[str, str] = Field(description="Source columns mapped to no field, by header")
    import_warnings: list[str]
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def resolve_position(case: TestCase) -> int:
        number = getattr(case, "number", None)  # annotated by item_list
        return number if number is not None else selectors.case_index(case=case) + 1

    @staticmethod
    def resolve_scenario(case: TestCase) -> dict[str, Any] | None:
        return case.scenario or None

    @staticmethod
    def resolve_documents(case: TestCase) -> list[Any]:
        return list(case.documents.all())

    @staticmethod
    def resolve_source(case: TestCase) -> dict[str, Any] | None:
        if not (case.source_document_id or case.source_file):
            return None
        return {
            "document": case.source_document,
            "file": case.source_file,
            "location": case.source_location,
            "span": case.source_span,
        }


class MappingIn(StrictSchema):
    mapping: dict[str, Any] | None = Field(
        None,
        description='How columns become fields, e.g. {"Test plan": {"Question": "question", "Scenario": "ignore"}, '
        '"Glossary": "skip"}: keys are sheet or table names (or "*" for every table no other key names), '
        "columns are headers, letters or numbers, "
        "fields are question, quoted_question (the user message quoted in the column's steps), expected_answer, "
        "document_context, tags, case_id, judge_guideline, metadata or ignore; several columns mapped to one text "
        "field are joined. Omitted: the suggested mapping.",
    )
    keep_first: bool = Field(False, description="Over the case limit, keep the first cases (else it is refused)")
    derive_questions: bool = Field(
        False,
        description="With a model connected: the model writes the user's message for quoted_question rows whose "
        "steps quote none (each marked as written by the model)",
    )


class ItemIn(StrictSchema):
    question: str
    expected_answer: str = ""
    document_context: str = ""
    case_id: str = Field("", description="Stable id, unique in the dataset")
    turns: list[TurnIn] = Field(default_factory=list)
    expected_tools: list[ToolIn] = Field(default_factory=list)
    trajectory_mode: TrajectoryMode = "strict"
    check_tool_args: bool = False
    expected_context: list[str] = Field(default_factory=list)
    judge_guideline: str = ""
    tags: list[str] = Field(default_factory=list)
    smoke_count: int | None = Field(None, ge=1, le=10)
    smoke_guidance: str = ""
    scenario: ScenarioIn | None = Field(None, description="Make it a scenario case: a model plays the user")


class ItemPatch(StrictSchema):
    question: str | None = None
    expected_answer: str | None = None
    document_context: str | None = None
    case_id: str | None = None
    turns: list[TurnIn] | None = None
    expected_tools: list[ToolIn] | None = None
    trajectory_mode: TrajectoryMode | None = None
    check_tool_args: bool | None = None
    expected_context: list[str] | None = None
    judge_guideline: str | None = None
    tags: list[str] | None = None
    smoke_count: int | None = Field(None, ge=1, le=10)
    smoke_guidance: str | None = None
    scenario: ScenarioIn | None = Field(None, description="null makes it a scripted case again")


# ---- helpers -------------------------------------------------------------------


def _invalid(exc: DjangoValidationError) -> NinjaValidationError:
    """A service's ValidationError as ninja's 422, one entry per message."""
    errors: list[dict[str, Any]] = []
    if hasattr(exc, "error_dict"):
        for name, messages in exc.message_dict.items():
            errors += [{"type": "value_error", "loc": ["body", "payload", name], "msg": m} for m in messages]
    else:
        errors += [{"type": "value_error", "loc": ["body", "payload"], "msg": m} for m in exc.messages]
    return NinjaValidationError(errors)


def _user(request: HttpRequest) -> User:
    """The token's owner: every operation here needs TokenAuth, which sets request.user to it."""
    user = request.user
    assert isinstance(user, User)
    return user


def _agent(request: HttpRequest, agent_id: int) -> Agent:
    return agent_get_for_user(user=_user(request), agent_id=agent_id)


def _dataset(request: HttpRequest, agent_id: int, dataset_id: int) -> Dataset:
    dataset = selectors.dataset_get(agent=_agent(request, agent_id), dataset_id=dataset_id)
    if dataset is None:
        raise Http404("No such dataset")
    return dataset


def _item(request: HttpRequest, agent_id: int, dataset_id: int, item_id: int) -> TestCase:
    dataset = _dataset(request, agent_id, dataset_id)
    case = dataset.cases.prefetch_related("documents").select_related("source_document").filter(pk=item_id).first()
    if case is None:
        raise Http404("No such item")
    case.dataset = dataset
    return case


def _case_payload(payload: Schema, *, exclude_unset: bool) -> dict[str, Any]:
    data = payload.model_dump(exclude_unset=exclude_unset)
    # null means "leave as is", except for smoke_count and scenario, where null turns them off.
    return {key: value for key, value in data.items() if value is not None or key in ("smoke_count", "scenario")}


# ---- datasets ------------------------------------------------------------------

DATASETS = "/agents/{agent_id}/eval/datasets"
DATASET = DATASETS + "/{dataset_id}"
ITEMS = DATASET + "/items"
ITEM = ITEMS + "/{item_id}"


@router.get(DATASETS, response={200: list[DatasetOut], 404: NotFoundOut}, summary="List an agent's datasets")
@paginate(BoundedLimitOffsetPagination)
def dataset_list(request: HttpRequest, agent_id: int) -> Any:
    return selectors.dataset_list(agent=_agent(request, agent_id))


@router.post(
    DATASETS,
    response={200: DatasetOut, 201: DatasetOut, 404: NotFoundOut, 422: ValidationErrorOut},
    summary="Create a dataset",
)
def dataset_create(
    request: HttpRequest, agent_id: int, payload: DatasetIn, idempotency_key: str = IDEMPOTENCY
) -> Status[Dataset]:
    """The same Idempotency-Key answers 200 with the dataset the first request made."""
    agent = _agent(request, agent_id)
    try:
        dataset, replayed = idempotent_create(
            user=_user(request),
            operation=f"datasets_create:{agent_id}",
            key=idempotency_key,
            body=payload.model_dump(),
            load=loader(Dataset),
            create=lambda: services.dataset_create(agent=agent, user=_user(request), **payload.model_dump()),
        )
    except DjangoValidationError as exc:
        raise _invalid(exc) from None
    dataset.case_count = dataset.cases.count()  # type: ignore[attr-defined]
    return Status(200 if replayed else 201, dataset)


@router.get(DATASET, response={200: DatasetOut, 404: NotFoundOut}, summary="A dataset with its scoring settings")
def dataset_detail(request: HttpRequest, agent_id: int, dataset_id: int) -> Dataset:
    return _dataset(request, agent_id, dataset_id)


@router.patch(
    DATASET,
    response={200: DatasetOut, 404: NotFoundOut, 422: ValidationErrorOut},
    summary="Rename a dataset or change its scoring settings",
)
def dataset_update(request: HttpRequest, agent_id: int, dataset_id: int, payload: DatasetPatch) -> Dataset:
    dataset = _dataset(request, agent_id, dataset_id)
    try:
        services.dataset_update(dataset=dataset, **payload.model_dump(exclude_unset=True))
    except DjangoValidationError as exc:
        raise _invalid(exc) from None
    return dataset


@router.delete(DATASET, response={204: None, 404: NotFoundOut}, summary="Delete a dataset, its items and documents")
def dataset_delete(request: HttpRequest, agent_id: int, dataset_id: int) -> Status[None]:
    """Runs that used the dataset keep their own copy of its cases and their results."""
    services.dataset_delete(dataset=_dataset(request, agent_id, dataset_id))
    return Status(204, None)


@router.post(
    DATASET + "/mapping",
    response={202: DatasetOut, 404: NotFoundOut, 409: NotFoundOut, 422: ValidationErrorOut},
    summary="Confirm an upload's column mapping; the test cases are then created in the background",
)
def dataset_mapping(request: HttpRequest, agent_id: int, dataset_id: int, payload: MappingIn) -> Status[Any]:
    """409 when the dataset is not waiting for a mapping (status other than "review")."""
    dataset = _dataset(request, agent_id, dataset_id)
    if dataset.status != Dataset.Status.REVIEW:
        return refusal(409, f"This dataset is {dataset.status}, not waiting for a column mapping.")
    try:
        chosen = None
        if payload.mapping is not None:
            chosen = mapping_from_json(tables=dataset.mapping.get("tables", []), raw=payload.mapping)
        dataset_mapping_confirm(
            dataset=dataset, chosen=chosen, keep_first=payload.keep_first, derive_questions=payload.derive_questions
        )
    except DjangoValidationError as exc:
        raise _invalid(exc) from None
    return Status(202, dataset)


# ---- items (test cases) ------------------------------------------------------------


@router.get(ITEMS, response={200: list[ItemOut], 404: NotFoundOut}, summary="List a dataset's test cases")
@paginate(BoundedLimitOffsetPagination)
def item_list(request: HttpRequest, agent_id: int, dataset_id: int, q: str = "") -> Any:
    """In dataset order; `q` keeps the items whose question, expected answer, document
    context or case id contain every word of it."""
    cases = selectors.case_search(dataset=_dataset(request, agent_id, dataset_id), query=q)
    # Each item's number in the whole dataset (a search keeps the numbers the page shows).
    before = TestCase.objects.filter(dataset_id=OuterRef("dataset_id")).filter(
        Q(position__lt=OuterRef("position")) | Q(position=OuterRef("position"), id__lt=OuterRef("id"))
    )
    count = before.order_by().values("dataset_id").annotate(n=Count("id")).values("n")
    return cases.annotate(number=Coalesce(Subquery(count), 0) + 1)


@router.post(
    ITEMS, response={200: ItemOut, 201: ItemOut, 404: NotFoundOut, 422: ValidationErrorOut}, summary="Add a test case"
)
def item_create(
    request: HttpRequest, agent_id: int, dataset_id: int, payload: ItemIn, idempotency_key: str = IDEMPOTENCY
) -> Status[TestCase]:
    """The same Idempotency-Key answers 200 with the case the first request added."""
    dataset = _dataset(request, agent_id, dataset_id)
    try:
        case, replayed = idempotent_create(
            user=_user(request),
            operation=f"datasets_case_create:{agent_id}:{dataset_id}",
            key=idempotency_key,
            body=payload.model_dump(),
            load=loader(TestCase),
            create=lambda: services.case_create(dataset=dataset, **_case_payload(payload, exclude_unset=False)),
        )
    except DjangoValidationError as exc:
        raise _invalid(exc) from None
    if replayed:
        case = _item(request, agent_id, dataset_id, case.pk)
    return Status(200 if replayed else 201, case)


@router.get(ITEM, response={200: ItemOut, 404: NotFoundOut}, summary="A test case")
def item_detail(request: HttpRequest, agent_id: int, dataset_id: int, item_id: int) -> TestCase:
    return _item(request, agent_id, dataset_id, item_id)


@router.patch(
    ITEM, response={200: ItemOut, 404: NotFoundOut, 422: ValidationErrorOut}, summary="Change fields of a test case"
)
def item_update(request: HttpRequest, agent_id: int, dataset_id: int, item_id: int, payload: ItemPatch) -> TestCase:
    case = _item(request, agent_id, dataset_id, item_id)
    try:
        services.case_update(case=case, **_case_payload(payload, exclude_unset=True))
    except DjangoValidationError as exc:
        raise _invalid(exc) from None
    return case


@router.delete(ITEM, response={204: None, 404: NotFoundOut}, summary="Delete a test case")
def item_delete(request: HttpRequest, agent_id: int, dataset_id: int, item_id: int) -> Status[None]:
    services.case_delete(case=_item(request, agent_id, dataset_id, item_id))
    return Status(204, None)

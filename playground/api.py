"""JSON API for the playground: send a message to an agent version (answered in a worker, as on
the page), poll the exchange until it settles, save an answered exchange as a test case.

The page's forms validate (playground/forms.py) and its services write, so the messages are the
page's. A chat is its author's: another user's exchange, or another team's agent, is a 404.
Attachments are sent from the page only (a multipart upload); the API sends text messages.
"""

import json
import uuid
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404
from ninja import Field, Router, Schema, Status
from ninja.pagination import paginate

from agents.models import Agent
from agents.selectors import agent_get_for_user
from datasets.api import ItemOut
from datasets.models import Dataset, TestCase
from evalsite.api_errors import DetailOut, ValidationErrorOut, field_invalid, form_invalid, refusal, service_invalid
from evalsite.http import ApiRequest
from evalsite.idempotency import idempotency_header, idempotent_create
from evalsite.paging import BoundedLimitOffsetPagination
from evalsite.schemas import StrictSchema
from playground import services
from playground.forms import MessageForm, SaveCaseForm
from playground.models import Exchange

router = Router(tags=["playground"])

EXCHANGES = "/agents/{agent_id}/playground/exchanges"
EXCHANGE = EXCHANGES + "/{exchange_id}"


class SendIn(StrictSchema):
    message: str = Field(description=f"At most {services.MAX_MESSAGE_CHARS:,} characters")
    version: int | None = Field(None, description="The agent version's number; by default the current version")
    chat: uuid.UUID | None = Field(
        None, description="Continue this chat (its earlier answered turns are sent); empty starts a new chat"
    )


class SaveCaseIn(StrictSchema):
    dataset: int = Field(description="The id of one of the agent's datasets")
    question: str | None = Field(None, description="By default the message sent")
    expected_answer: str | None = Field(None, description="By default the agent's answer: correct it first")
    expected_tools: list[dict[str, Any]] | None = Field(
        None, description='By default the tool calls made: [{"name": "lookup_order", "args": {"id": "A1"}}]'
    )
    keep_conversation: bool = Field(True, description="Keep the chat's earlier turns (a multi-turn case)")


class ExchangeOut(Schema):
    id: int
    chat: uuid.UUID
    version: int = Field(description="The agent version's number")
    message: str
    status: str = Field(description="queued | running | done | failed")
    settled: bool = Field(description="done or failed: polling can stop")
    answer: str
    tool_calls: list[Any]
    retrieval_context: list[Any]
    trace_id: str
    error: str
    tokens: int
    cost: Decimal
    duration_ms: int | None
    http_attempts: list[Any] = Field(description="http agents: each request sent (secrets masked) and its response")
    saved_case_id: int | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @staticmethod
    def resolve_version(exchange: Exchange) -> int:
        return exchange.version.number

    @staticmethod
    def resolve_settled(exchange: Exchange) -> bool:
        return exchange.is_settled


def _agent(request: ApiRequest, agent_id: int) -> Agent:
    return agent_get_for_user(user=request.user, agent_id=agent_id)


def _exchanges(request: ApiRequest, agent: Agent) -> Any:
    return Exchange.objects.filter(agent=agent, created_by=request.user).select_related("version")


def _exchange(request: ApiRequest, agent_id: int, exchange_id: int) -> Exchange:
    return get_object_or_404(_exchanges(request, _agent(request, agent_id)), pk=exchange_id)


@router.post(
    EXCHANGES,
    response={200: ExchangeOut, 201: ExchangeOut, 404: DetailOut, 422: ValidationErrorOut},
    url_name="playground_send",
    summary="Send a message to an agent version; a worker asks the agent",
)
def exchange_send(
    request: ApiRequest, agent_id: int, payload: SendIn, idempotency_key: str = idempotency_header()
) -> Status[Exchange]:
    """201 with the exchange, queued: poll it until `settled`. The same Idempotency-Key answers
    200 with the first exchange (the message is not sent twice)."""
    agent = _agent(request, agent_id)
    version_pk = agent.current_version_id
    if payload.version is not None:
        version_pk = agent.versions.filter(number=payload.version).values_list("pk", flat=True).first()
        if version_pk is None:
            raise field_invalid("version", f"This agent has no version {payload.version}.")
    data = {"message": payload.message, "chat": str(payload.chat or ""), "version": str(version_pk or "")}
    form = MessageForm(data, agent=agent)
    if not form.is_valid():
        raise form_invalid(form)

    def send() -> Exchange:
        return services.exchange_send(
            agent=agent,
            version=agent.versions.get(pk=form.cleaned_data["version"]),
            user=request.user,
            message=form.cleaned_data["message"],
            chat=form.cleaned_data["chat"],
        )

    try:
        exchange, replayed = idempotent_create(
            user=request.user,
            operation=f"playground_send:{agent.pk}",
            key=idempotency_key,
            body=payload.model_dump(mode="json"),
            create=send,
            load=lambda pk: _exchanges(request, agent).filter(pk=pk).first(),
        )
    except ValidationError as error:
        raise service_invalid(error) from None
    return Status(200 if replayed else 201, _exchange(request, agent.pk, exchange.pk))


@router.get(
    EXCHANGES,
    response={200: list[ExchangeOut], 404: DetailOut},
    url_name="playground_page",
    summary="Your exchanges with an agent, oldest first",
)
@paginate(BoundedLimitOffsetPagination)
def exchange_list(request: ApiRequest, agent_id: int, chat: uuid.UUID | None = None) -> Any:
    """`chat`: only that chat's exchanges."""
    exchanges = _exchanges(request, _agent(request, agent_id)).order_by("created_at", "id")
    return exchanges.filter(chat=chat) if chat else exchanges


@router.get(
    EXCHANGE,
    response={200: ExchangeOut, 404: DetailOut},
    url_name="playground_exchange",
    summary="One exchange: poll it until `settled`",
)
def exchange_detail(request: ApiRequest, agent_id: int, exchange_id: int) -> Exchange:
    return _exchange(request, agent_id, exchange_id)


@router.post(
    EXCHANGE + "/save-case",
    response={200: ItemOut, 201: ItemOut, 404: DetailOut, 409: DetailOut, 422: ValidationErrorOut},
    url_name="playground_save_case",
    summary="Save an answered exchange as a test case of one of the agent's datasets",
)
def exchange_save_case(
    request: ApiRequest,
    agent_id: int,
    exchange_id: int,
    payload: SaveCaseIn,
    idempotency_key: str = idempotency_header(),
) -> Status[Any]:
    """As the page's Save as test case: the question, the expected answer and tools (by default
    the exchange's own), the chat's earlier turns and the attachments; tagged "playground".
    409 when the exchange has no answer. The same Idempotency-Key answers 200 with the first case."""
    exchange = _exchange(request, agent_id, exchange_id)
    datasets = list(
        Dataset.objects.filter(agent_id=exchange.agent_id).exclude(
            status__in=(Dataset.Status.EXTRACTING, Dataset.Status.REVIEW)
        )
    )
    tools = payload.expected_tools if payload.expected_tools is not None else exchange.tool_calls
    data = {
        "dataset": str(payload.dataset),
        "question": exchange.message if payload.question is None else payload.question,
        "expected_answer": exchange.answer if payload.expected_answer is None else payload.expected_answer,
        "expected_tools": json.dumps(tools) if tools else "",
        "keep_conversation": "on" if payload.keep_conversation else "",
    }
    form = SaveCaseForm(data, datasets=datasets)
    if not form.is_valid():
        raise form_invalid(form)
    if exchange.status != Exchange.Status.DONE:
        return refusal(409, "Only an answered message can become a test case.")
    cleaned = form.cleaned_data
    dataset = next(d for d in datasets if d.pk == cleaned["dataset"])

    def save() -> TestCase:
        return services.exchange_save_as_case(
            exchange=exchange,
            dataset=dataset,
            question=cleaned["question"],
            expected_answer=cleaned["expected_answer"],
            expected_tools=cleaned["expected_tools"],
            keep_conversation=cleaned["keep_conversation"],
        )

    try:
        case, replayed = idempotent_create(
            user=request.user,
            operation=f"playground_save_case:{exchange.pk}",
            key=idempotency_key,
            body=payload.model_dump(mode="json"),
            create=save,
            load=lambda pk: TestCase.objects.filter(pk=pk, dataset__agent_id=exchange.agent_id).first(),
        )
    except ValidationError as error:
        raise service_invalid(error) from None
    return Status(200 if replayed else 201, case)

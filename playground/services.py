"""Playground writes: send a message to an agent version, answer it in a worker, save it as a case.

The agent is never called inside a web request (an http agent may take its full timeout,
an llm agent the gateway's retries): `exchange_send` stores the message and enqueues
`playground.tasks.exchange_answer` after commit; the page polls the exchange until it
settles. `exchange_reap` (beat) fails an exchange no worker finished, so a chat never
says "Thinking" for good.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core import signing
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from agents.adapters import AgentError, AgentReply, AgentRequest, DocumentRef, HttpAdapter, adapter_for
from agents.models import Agent, AgentVersion
from datasets.documents import document_file_delete, document_store, upload_validate
from datasets.extraction import sandbox
from datasets.extraction.errors import ExtractionFailed
from datasets.models import Dataset, Document, TestCase
from datasets.services import case_create
from playground.models import Exchange

logger = logging.getLogger(__name__)

MAX_MESSAGE_CHARS = 20_000
MAX_ATTACHMENTS = 5
MAX_TURNS_PER_CHAT = 50
DOCUMENT_SALT = "playground-document"
TEXT_TIMEOUT_SECONDS = 30.0


# ---- send ------------------------------------------------------------------------------


def exchange_send(
    *,
    agent: Agent,
    version: AgentVersion,
    user: User,
    message: str,
    chat: uuid.UUID | None = None,
    uploads: Sequence[UploadedFile] = (),
) -> Exchange:
    """Store one message of a chat and queue the agent's answer. Raises ValidationError for the form."""
    message = (message or "").strip()
    if not message:
        raise ValidationError({"message": ["Write a message to send."]})
    if len(message) > MAX_MESSAGE_CHARS:
        raise ValidationError({"message": [f"A message can be at most {MAX_MESSAGE_CHARS:,} characters."]})
    if version.agent_id != agent.pk:
        raise ValidationError({"version": ["Choose a version of this agent."]})
    if len(uploads) > MAX_ATTACHMENTS:
        raise ValidationError({"attachments": [f"Attach at most {MAX_ATTACHMENTS} files to one message."]})
    validated = [(upload, _validated(upload)) for upload in uploads]
    chat = chat or uuid.uuid4()
    earlier = Exchange.objects.filter(agent=agent, created_by=user, chat=chat)
    first = earlier.order_by("pk").first()
    if first is not None and first.version_id != version.pk:
        raise ValidationError({"version": ["This chat talks to another version. Start a new chat to switch."]})
    if earlier.count() >= MAX_TURNS_PER_CHAT:
        raise ValidationError({"message": [f"A chat holds at most {MAX_TURNS_PER_CHAT} messages. Start a new chat."]})
    stored: list[Document] = []
    try:
        with transaction.atomic():
            exchange = Exchange.objects.create(
                agent=agent, version=version, chat=chat, created_by=user, message=message
            )
            for upload, checked in validated:
                stored.append(document_store(team=agent.team, dataset=None, upload=upload, validated=checked))
            exchange.documents.set(stored)
            _enqueue_answer(exchange.pk)
    except Exception:
        for document in stored:  # storage is not transactional
            document_file_delete(document)
        raise
    return exchange


def _validated(upload: UploadedFile) -> Any:
    try:
        return upload_validate(upload)
    except ValidationError as error:
        raise ValidationError({"attachments": [f"{upload.name}: {message}" for message in error.messages]}) from None


def _enqueue_answer(exchange_id: int) -> None:
    from playground.tasks import exchange_answer as exchange_answer_task

    # robust: if Redis is down the exchange stays queued and exchange_reap settles it with a message.
    transaction.on_commit(lambda: exchange_answer_task.delay(exchange_id), robust=True)


# ---- answer (in a worker) ----------------------------------------------------------------


def exchange_answer(*, exchange_id: int) -> None:
    """Ask the agent; record the reply or the error. A second delivery of the same message does nothing."""
    claimed = Exchange.objects.filter(pk=exchange_id, status=Exchange.Status.QUEUED).update(
        status=Exchange.Status.RUNNING, started_at=timezone.now()
    )
    if not claimed:
        return
    exchange = Exchange.objects.select_related("agent", "version__agent").get(pk=exchange_id)
    adapter = adapter_for(exchange.version)
    started = time.monotonic()
    reply: AgentReply | None = None
    error = ""
    try:
        adapter.check()
        reply = adapter.ask(_request(exchange))
    except AgentError as exc:
        error = exc.message
    except ExtractionFailed as exc:
        error = f"An attachment could not be read: {exc.reason}"
    fields: dict[str, Any] = {
        "duration_ms": int((time.monotonic() - started) * 1000),
        "finished_at": timezone.now(),
        "http_attempts": adapter.attempts if isinstance(adapter, HttpAdapter) else [],
    }
    if reply is None:
        fields.update(status=Exchange.Status.FAILED, error=error)
    else:
        fields.update(
            status=Exchange.Status.DONE,
            answer=reply.answer,
            tool_calls=reply.tool_calls,
            retrieval_context=reply.retrieval_context,
            trace_id=reply.trace_id,
            tokens=reply.tokens,
            cost=Decimal(str(round(reply.cost, 6))),
        )
    # Only a running exchange settles: the reaper may have failed it meanwhile.
    Exchange.objects.filter(pk=exchange_id, status=Exchange.Status.RUNNING).update(**fields)


def exchange_fail(*, exchange_id: int, reason: str) -> None:
    Exchange.objects.filter(pk=exchange_id, status__in=(Exchange.Status.QUEUED, Exchange.Status.RUNNING)).update(
        status=Exchange.Status.FAILED, error=reason, finished_at=timezone.now()
    )


def _request(exchange: Exchange) -> AgentRequest:
    return AgentRequest(
        question=exchange.message,
        conversation=exchange_conversation(exchange),
        documents=_documents(exchange),
        trace={"playground": exchange.pk},
    )


def exchange_conversation(exchange: Exchange) -> list[dict[str, str]]:
    """The chat's earlier answered turns, as the conversation an agent receives before this message."""
    conversation: list[dict[str, str]] = []
    earlier = Exchange.objects.filter(
        chat=exchange.chat, agent_id=exchange.agent_id, created_by_id=exchange.created_by_id, pk__lt=exchange.pk
    ).filter(status=Exchange.Status.DONE)
    for message, answer in earlier.order_by("pk").values_list("message", "answer"):
        conversation += [{"role": "user", "content": message}, {"role": "assistant", "content": answer}]
    return conversation


def _documents(exchange: Exchange) -> list[DocumentRef]:
    documents = list(exchange.documents.order_by("pk"))
    if exchange.agent.kind == Agent.Kind.HTTP:
        return [DocumentRef(name=doc.original_name, url=document_url(exchange, doc.pk)) for doc in documents]
    return [DocumentRef(name=doc.original_name, text=_document_text(doc)) for doc in documents]


def _document_text(document: Document) -> str:
    """The attachment's text, read once in the sandbox (the same reader and limits as an upload)."""
    if document.text:
        return document.text
    answer = sandbox.run(
        {"mode": "extract", "path": document.file.path, "file_type": document.file_type, "max_cases": 0},
        timeout=TEXT_TIMEOUT_SECONDS,
        memory_mb=settings.EVALSITE_PARSE_MEMORY_MB,
    )
    text = str(answer.get("text") or "")
    Document.objects.filter(pk=document.pk).update(text=text)
    return text


def document_url(exchange: Exchange, document_id: int) -> str:
    token = signing.dumps({"e": exchange.pk, "d": document_id}, salt=DOCUMENT_SALT, compress=True)
    path = reverse("playground:document_signed", kwargs={"agent_id": exchange.agent_id, "signed": token})
    return f"{settings.SITE_URL}{path}"


def document_token_load(token: str) -> dict[str, int]:
    """{"e": exchange id, "d": document id}; raises signing.BadSignature when forged or expired."""
    return signing.loads(token, salt=DOCUMENT_SALT, max_age=settings.EVALSITE_DOCUMENT_URL_TTL)


def exchange_reap() -> int:
    """Fail exchanges no worker finished in time (worker down, message lost); how many."""
    limit = timezone.now() - timedelta(seconds=settings.EVALSITE_PLAYGROUND_TIMEOUT)
    stale = Exchange.objects.filter(
        status__in=(Exchange.Status.QUEUED, Exchange.Status.RUNNING), created_at__lt=limit
    ).values_list("pk", flat=True)
    reason = (
        f"No answer within {settings.EVALSITE_PLAYGROUND_TIMEOUT} s: no worker took the message, or it stopped "
        "while the agent was answering. Check that the worker is running (make run starts one) and send it again."
    )
    count = 0
    for exchange_id in list(stale):
        exchange_fail(exchange_id=exchange_id, reason=reason)
        count += 1
    return count


# ---- save as test case -------------------------------------------------------------------


def exchange_save_as_case(
    *,
    exchange: Exchange,
    dataset: Dataset,
    question: str,
    expected_answer: str,
    expected_tools: list[dict[str, Any]],
    keep_conversation: bool = True,
) -> TestCase:
    """A test case from a playground turn: the question, the answer as the expected answer (edited
    by the user first), the tool calls as expected tools, the chat's earlier turns and the attachments."""
    if dataset.agent_id != exchange.agent_id:
        raise ValidationError({"dataset": ["Choose a dataset of this agent."]})
    if exchange.status != Exchange.Status.DONE:
        raise ValidationError("Only an answered message can become a test case.")
    conversation = exchange_conversation(exchange) if keep_conversation else []
    # The earlier turns, each with the reply the agent gave as its expected reply.
    turns = [
        {"user": asked["content"], "expected": replied["content"]}
        for asked, replied in zip(conversation[::2], conversation[1::2], strict=True)
    ]
    with transaction.atomic():
        case = case_create(
            dataset=dataset,
            documents=exchange.documents.all(),
            question=question,
            expected_answer=expected_answer,
            expected_tools=expected_tools,
            turns=turns,
            tags=["playground"],
        )
        Exchange.objects.filter(pk=exchange.pk).update(saved_case=case)
    return case

"""The playground page: chat with one version of an agent, then save a turn as a test case."""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core import signing
from django.core.exceptions import ValidationError
from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HTMX_STOP_POLLING

from agents.models import Agent, AgentVersion
from agents.selectors import agent_get_for_user
from datasets.documents import download_response
from datasets.models import Dataset, Document
from datasets.upload_forms import UploadSizeGuard
from datasets.view_helpers import add_service_errors, size_guarded
from evalsite import paging
from evalsite.http import AuthedRequest, document_link_refused, navigate
from playground import services
from playground.forms import MessageForm, SaveCaseForm
from playground.models import Exchange


def _get_agent_for_user(request: AuthedRequest, agent_id: int) -> Agent:
    return agent_get_for_user(user=request.user, agent_id=agent_id)


def _get_exchange_for_user(request: AuthedRequest, agent: Agent, exchange_id: int) -> Exchange:
    # A chat is its author's: another member of the team sees their own chats only.
    return get_object_or_404(
        Exchange.objects.select_related("version", "saved_case__dataset").prefetch_related("documents"),
        pk=exchange_id,
        agent=agent,
        created_by=request.user,
    )


def _chat_id(raw: str | None) -> uuid.UUID | None:
    try:
        return uuid.UUID(raw) if raw else None
    except ValueError:
        return None


def _chat_context(
    request: AuthedRequest, agent: Agent, chat: uuid.UUID | None, form: MessageForm | None = None
) -> dict[str, Any]:
    exchanges = (
        list(
            Exchange.objects.filter(agent=agent, created_by=request.user, chat=chat)
            .select_related("version", "saved_case__dataset")
            .prefetch_related("documents")
        )
        if chat
        else []
    )
    version = exchanges[0].version if exchanges else _chosen_version(request, agent)
    if form is None:
        form = MessageForm(agent=agent, initial={"chat": chat, "version": version.pk if version else None})
    return {
        "agent": agent,
        "chat": chat,
        "exchanges": exchanges,
        "version": version,
        "form": form,
        "locked_version": bool(exchanges),
    }


def _chosen_version(request: AuthedRequest, agent: Agent) -> AgentVersion | None:
    raw = request.GET.get("version", "")
    if raw.isdigit():
        chosen = agent.versions.filter(pk=int(raw)).first()
        if chosen is not None:
            return chosen
    return agent.current_version


@login_required
@require_GET
def playground(request: AuthedRequest, agent_id: int) -> HttpResponse:
    agent = _get_agent_for_user(request, agent_id)
    context = _chat_context(request, agent, _chat_id(request.GET.get("chat")))
    context["recent_chats"] = _recent_chats(request, agent)
    return render(request, "playground/playground.html", context)


def _recent_chats(request: AuthedRequest, agent: Agent) -> list[dict[str, Any]]:
    """The user's last chats with this agent, newest first: their first message and version."""
    firsts: dict[uuid.UUID, Any] = {}
    rows = (
        Exchange.objects.filter(agent=agent, created_by=request.user)
        .order_by("-created_at", "-id")
        .values("chat", "message", "version__number", "created_at")[:200]
    )
    for row in rows:
        firsts[row["chat"]] = row  # the oldest row of each chat wins, being seen last
    return sorted(firsts.values(), key=lambda row: row["created_at"], reverse=True)[:8]


@login_required
@require_POST
@size_guarded
def send(request: AuthedRequest, agent_id: int, guard: UploadSizeGuard) -> HttpResponse:
    agent = _get_agent_for_user(request, agent_id)
    form = MessageForm(request.POST, agent=agent)
    chat = _chat_id(request.POST.get("chat"))
    if guard.too_big is not None:
        limit = settings.UPLOAD_MAX_BYTES // (1024 * 1024)
        form.add_error(None, f"An attachment is over the {limit} MB limit. Nothing was sent.")
    elif form.is_valid():
        try:
            exchange = services.exchange_send(
                agent=agent,
                version=agent.versions.get(pk=form.cleaned_data["version"]),
                user=request.user,
                message=form.cleaned_data["message"],
                chat=form.cleaned_data["chat"],
                uploads=request.FILES.getlist("attachments"),
            )
        except ValidationError as error:
            add_service_errors(form, error)
        else:
            if not request.htmx:
                return redirect(f"{reverse('playground:page', args=[agent.pk])}?chat={exchange.chat}")
            # The chat with its new (polling) turn, and a fresh box for the next message.
            return render(request, "playground/playground.html#chat", _chat_context(request, agent, exchange.chat))
    context = _chat_context(request, agent, chat, form)
    if request.htmx:
        return render(request, "playground/playground.html#chat", context)
    return render(request, "playground/playground.html", {**context, "recent_chats": _recent_chats(request, agent)})


@login_required
@require_GET
def exchange_poll(request: AuthedRequest, agent_id: int, exchange_id: int) -> HttpResponse:
    """One exchange, polled while the agent answers; 286 (stop polling) once it settled."""
    agent = _get_agent_for_user(request, agent_id)
    exchange = _get_exchange_for_user(request, agent, exchange_id)
    response = render(request, "playground/partials/exchange.html", {"agent": agent, "exchange": exchange})
    if exchange.is_settled:
        response.status_code = HTMX_STOP_POLLING
    return response


@login_required
@require_http_methods(["GET", "POST"])
def save_case(request: AuthedRequest, agent_id: int, exchange_id: int) -> HttpResponse:
    agent = _get_agent_for_user(request, agent_id)
    exchange = _get_exchange_for_user(request, agent, exchange_id)
    datasets = list(
        Dataset.objects.filter(agent=agent)
        .exclude(status__in=(Dataset.Status.EXTRACTING, Dataset.Status.REVIEW))
        .order_by("name")
    )
    if request.method == "POST":
        form = SaveCaseForm(request.POST, datasets=datasets)
        if form.is_valid():
            data = form.cleaned_data
            try:
                case = services.exchange_save_as_case(
                    exchange=exchange,
                    dataset=next(d for d in datasets if d.pk == data["dataset"]),
                    question=data["question"],
                    expected_answer=data["expected_answer"],
                    expected_tools=data["expected_tools"],
                    keep_conversation=data["keep_conversation"],
                )
            except ValidationError as error:
                add_service_errors(form, error)
            else:
                messages.success(request, f"Saved as test case #{case.position + 1} of “{case.dataset.name}”.")
                url = f"{reverse('playground:page', args=[agent.pk])}?chat={exchange.chat}"
                return navigate(request, url)
    else:
        form = SaveCaseForm(
            datasets=datasets,
            initial={
                "question": exchange.message,
                "expected_answer": exchange.answer,
                "expected_tools": json.dumps(exchange.tool_calls, indent=2, ensure_ascii=False)
                if exchange.tool_calls
                else "",
                "keep_conversation": True,
            },
        )
    context = {
        "agent": agent,
        "exchange": exchange,
        "form": form,
        "datasets": datasets,
        "has_earlier_turns": bool(services.exchange_conversation(exchange)),
    }
    template = "playground/partials/save_case_dialog.html" if request.htmx else "playground/save_case.html"
    return render(request, template, context)


@require_GET
def document_signed(request: AuthedRequest, agent_id: int, signed: str) -> HttpResponse | FileResponse:
    """A playground attachment for an HTTP agent: no login, a signed link that expires and names its exchange."""
    try:
        claims = services.document_token_load(signed)
    except signing.BadSignature as error:
        return document_link_refused(error)
    if not paging.in_range(agent_id):
        raise Http404("No such document")
    document = Document.objects.filter(
        pk=claims["d"], playground_exchanges__pk=claims["e"], playground_exchanges__agent_id=agent_id
    ).first()
    if document is None or not document.file:
        raise Http404("No such document")
    try:
        return download_response(document)
    except FileNotFoundError as exc:
        raise Http404("The document's file is gone") from exc

"""Agent adapters: ask one agent version one question, the same way for every kind.

    adapter = adapter_for(version)
    adapter.check()                      # AgentConfigError when the version cannot run at all
    reply = adapter.ask(AgentRequest(...))

Kinds:
- llm: the console composes the system prompt from the version's fields, offers its
  tool definitions and answers tool calls with their canned results, so tool loops
  really happen; every call goes through the LLM gateway.
- http: the team's deployed agent. We POST {question, conversation, documents, case_id,
  run_id} as JSON and read {answer | output, tool_calls, retrieval_context, trace_id}.
- knowledge: offline passage retrieval (BM25) over the knowledge text and the case's
  documents. Needs no model and answers deterministically, which keeps the demo honest.

Errors are AgentError with a readable message; `retryable` marks the transient ones
(429, 5xx, timeouts, dropped connections) after our own retries are spent.
"""

from __future__ import annotations

import functools
import json
import math
import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from agents.diff import MASK
from agents.models import Agent, AgentVersion
from evalsite import llm
from evalsite.text import content_terms

# A model that keeps calling tools is cut off after this many rounds.
MAX_TOOL_ROUNDS = 6
# Document text offered to an LLM agent, per document: enough for policies and forms,
# bounded so one huge upload can't blow every case's context window.
MAX_DOCUMENT_CHARS = 20_000
MAX_RETRY_AFTER_SECONDS = 30.0
MAX_BACKOFF_SECONDS = 30.0
TRANSIENT_HTTP_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


class AgentError(Exception):
    """The agent could not answer this case. `message` is shown on the result card."""

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable


class AgentConfigError(AgentError):
    """The version cannot answer any case (no URL, no model...): the whole run fails."""


@dataclass(frozen=True)
class DocumentRef:
    name: str
    url: str = ""  # a short-lived signed download link (http agents)
    text: str = ""  # the extracted text (llm and knowledge agents)


@dataclass
class AgentRequest:
    question: str
    # Earlier turns of a multi-turn case: [{"role": "user" | "assistant", "content": str}].
    conversation: list[dict[str, str]] = field(default_factory=list)
    documents: list[DocumentRef] = field(default_factory=list)
    document_context: str = ""
    case_id: str = ""
    run_id: int | None = None
    # Sent to the gateway as X-Evalsite-* headers: {"run": 3, "case": 17}.
    trace: dict[str, str | int] = field(default_factory=dict)
    # http agents: Idempotency-Key and X-Evalsite-Attempt (runs.engine.case._idempotency).
    idempotency_key: str = ""
    attempt: int = 1


@dataclass
class AgentReply:
    answer: str
    # [{"name": str, "args": dict}] in call order.
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    retrieval_context: list[str] = field(default_factory=list)
    trace_id: str = ""
    tokens: int = 0
    cost: float = 0.0
    # An llm agent's last model call: "length" when the answer ended at its token limit
    # (token_limit, the max_tokens it was sent with). An http agent can't say: left empty.
    finish_reason: str = ""
    token_limit: int | None = None

    @property
    def cut(self) -> bool:
        return self.finish_reason == "length"


def adapter_for(version: AgentVersion) -> Adapter:
    kind = version.agent.kind
    if kind == Agent.Kind.HTTP:
        return HttpAdapter(version)
    if kind == Agent.Kind.KNOWLEDGE:
        return KnowledgeAdapter(version)
    return LLMAdapter(version)


class Adapter:
    def __init__(self, version: AgentVersion) -> None:
        self.version = version

    def check(self) -> None:
        """Raise AgentConfigError when this version cannot answer anything."""

    def ask(self, request: AgentRequest) -> AgentReply:
        raise NotImplementedError


# ---- llm ------------------------------------------------------------------------


class LLMAdapter(Adapter):
    def check(self) -> None:
        if llm.model_for("llm", self.version.model or None) is None:
            raise AgentConfigError(
                "This LLM agent has no model: set EVALSITE_LLM_MODEL or choose a model on the agent's configuration."
            )

    def ask(self, request: AgentRequest) -> AgentReply:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system_prompt(self.version, request)},
            *request.conversation,
            {"role": "user", "content": request.question},
        ]
        tools = self._tool_definitions()
        reply = AgentReply(answer="")
        for _ in range(MAX_TOOL_ROUNDS):
            result = self._complete(messages, tools, request.trace)
            reply.tokens += result.prompt_tokens + result.completion_tokens
            reply.cost += result.cost
            if not result.tool_calls:
                reply.answer = result.text
                reply.finish_reason, reply.token_limit = result.finish_reason, result.max_tokens
                return reply
            messages.append(result.message)
            for call in result.tool_calls:
                reply.tool_calls.append({"name": call["name"], "args": call.get("arguments") or {}})
                messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": self._tool_result(call["name"])}
                )
        raise AgentError(f"The agent was still calling tools after {MAX_TOOL_ROUNDS} rounds and never answered.")

    def _complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, trace: dict[str, str | int]
    ) -> llm.LLMResult:
        try:
            return llm.complete(
                messages,
                task="agent",
                model=self.version.model or None,
                temperature=self.version.temperature,
                tools=tools,
                trace=trace,
                # The agent's own bound on one answer; None = the gateway's for task "agent".
                timeout=float(self.version.llm_timeout) if self.version.llm_timeout else None,
            )
        except llm.LLMNotConfigured as error:
            raise AgentConfigError(error.message) from error
        except llm.LLMError as error:
            raise AgentError(error.message, retryable=error.retryable) from error

    def _tool_definitions(self) -> list[dict[str, Any]] | None:
        definitions = [
            {
                "type": "function",
                "function": {
                    "name": tool["name"],
                    "description": tool.get("description", ""),
                    "parameters": tool.get("parameters") or {"type": "object", "properties": {}},
                },
            }
            for tool in self.version.tools or []
            if tool.get("name")
        ]
        return definitions or None

    def _tool_result(self, name: str) -> str:
        for tool in self.version.tools or []:
            if tool.get("name") == name:
                return str(tool.get("result") or "OK")
        return f"Error: there is no tool named {name!r}."


def system_prompt(version: AgentVersion, request: AgentRequest | None = None) -> str:
    """The LLM agent's system prompt: instructions, skills, knowledge, guardrails, then the case's documents."""
    sections = [version.instructions.strip()]
    for title, text in (
        ("Skills", version.skills),
        ("Knowledge", version.knowledge),
        ("Guardrails", version.guardrails),
    ):
        if text.strip():
            sections.append(f"## {title}\n{text.strip()}")
    if request is not None:
        documents = [
            f"### {document.name}\n{document.text[:MAX_DOCUMENT_CHARS]}"
            for document in request.documents
            if document.text
        ]
        if request.document_context.strip():
            documents.append(f"### Context\n{request.document_context.strip()}")
        if documents:
            sections.append("## Documents the user shared\n" + "\n\n".join(documents))
    return "\n\n".join(section for section in sections if section)


# ---- http -----------------------------------------------------------------------


class HttpAdapter(Adapter):
    # Kept of each response body, for the playground's "raw response" (agents answer JSON; a
    # proxy's error page can be large).
    MAX_RECORDED_BODY = 20_000

    def __init__(self, version: AgentVersion) -> None:
        super().__init__(version)
        # Every attempt of the last ask, as sent and as received (the playground shows them).
        self.attempts: list[dict[str, Any]] = []

    def check(self) -> None:
        if not self.version.http_url:
            raise AgentConfigError("This HTTP agent has no endpoint URL. Set one on the agent's configuration.")

    def ask(self, request: AgentRequest) -> AgentReply:
        payload: dict[str, Any] = {
            "question": request.question,
            "conversation": request.conversation,
            "documents": [
                {"name": document.name, "url": document.url, "context": request.document_context}
                for document in request.documents
            ],
            "case_id": request.case_id,
            "run_id": request.run_id,
        }
        if not request.documents and request.document_context.strip():
            payload["documents"] = [{"name": "Context", "url": None, "context": request.document_context}]
        response = self._post(payload, _idempotency_headers(request))
        return _http_reply(response)

    def _post(self, payload: dict[str, Any], extra_headers: dict[str, str] | None = None) -> Any:
        import httpx

        timeout = float(self.version.http_timeout or 30)
        headers = {
            **{str(k): str(v) for k, v in (self.version.http_headers or {}).items()},
            "Accept": "application/json",
            **(extra_headers or {}),
        }
        retries = settings.EVALSITE_LLM_RETRIES
        attempt = 0
        self.attempts = []
        while True:
            attempt += 1
            after = f" after {attempt} attempts" if attempt > 1 else ""
            hint: float | None = None
            record = self._record(payload, headers)
            try:
                response = _http_client().post(self.version.http_url, json=payload, headers=headers, timeout=timeout)
                record["status"], record["response"] = response.status_code, response.text[: self.MAX_RECORDED_BODY]
            except httpx.TimeoutException as exc:
                # Not asked again by default: the agent may still be working on it (and a
                # second request repeats the expensive part), as for model calls.
                error = AgentError(
                    f"The agent did not answer within {timeout:g} s{after}.",
                    retryable=settings.EVALSITE_LLM_RETRY_TIMEOUTS,
                )
                cause: Exception = exc
            except httpx.TransportError as exc:
                error = AgentError(f"Could not connect to the agent at {self.version.http_url}{after}.", retryable=True)
                cause = exc
            else:
                if 200 <= response.status_code < 300:
                    return response
                error = AgentError(
                    f"The agent answered HTTP {response.status_code}{after}{_body_excerpt(response.text)}",
                    retryable=response.status_code in TRANSIENT_HTTP_STATUSES,
                )
                cause, hint = Exception(response.status_code), _retry_after(response.headers)
            record["error"] = error.message
            if not error.retryable or attempt > retries:
                raise error from cause
            time.sleep(_backoff(attempt, hint))

    def _record(self, payload: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        """One attempt's entry in `attempts`: the team's own header values masked, the rest as sent."""
        secret = {str(name).lower() for name in (self.version.http_headers or {})}
        shown = {name: (MASK if name.lower() in secret else value) for name, value in headers.items()}
        record: dict[str, Any] = {
            "request": {"method": "POST", "url": self.version.http_url, "headers": shown, "body": payload},
            "status": None,
            "response": "",
            "error": "",
        }
        self.attempts.append(record)
        return record


def _idempotency_headers(request: AgentRequest) -> dict[str, str]:
    """The same Idempotency-Key on every HTTP retry and every re-execution of one result, so an
    agent with side effects can do them once; X-Evalsite-Attempt counts the executions (1, 2...)."""
    if not request.idempotency_key:
        return {}
    return {"Idempotency-Key": request.idempotency_key, "X-Evalsite-Attempt": str(request.attempt)}


@functools.cache
def _http_client() -> Any:
    """One pooled client per worker process: keep-alive connections to the team's agent."""
    import httpx

    return httpx.Client(follow_redirects=False, limits=httpx.Limits(max_connections=20))


def _http_reply(response: Any) -> AgentReply:
    try:
        body = response.json()
    except ValueError as exc:
        raise AgentError(f"The agent's response is not JSON{_body_excerpt(response.text)}") from exc
    if not isinstance(body, dict):
        raise AgentError("The agent's response must be a JSON object with an 'answer' field.")
    answer = body.get("answer", body.get("output"))
    if answer is None:
        raise AgentError("The agent's response has no 'answer' (or 'output') field.")
    return AgentReply(
        answer=answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False),
        tool_calls=_normalised_tool_calls(body.get("tool_calls")),
        retrieval_context=_normalised_context(body.get("retrieval_context")),
        trace_id=str(body.get("trace_id") or "")[:200],
    )


def _normalised_tool_calls(raw: Any) -> list[dict[str, Any]]:
    """Accept {"name", "args"}, {"name", "arguments"} and OpenAI's {"function": {...}} shapes."""
    calls: list[dict[str, Any]] = []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, str):
            calls.append({"name": item, "args": {}})
            continue
        if not isinstance(item, dict):
            continue
        function = item.get("function")
        source = function if isinstance(function, dict) else item
        args = source.get("args", source.get("arguments", source.get("input", {})))
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except ValueError:
                args = {"_raw": args}
        calls.append(
            {"name": str(source.get("name") or ""), "args": args if isinstance(args, dict) else {"_raw": args}}
        )
    return calls


def _normalised_context(raw: Any) -> list[str]:
    if isinstance(raw, str):
        return [raw]
    items: list[str] = []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, dict):
            item = item.get("text") or item.get("content") or item.get("page_content") or json.dumps(item)
        items.append(str(item))
    return items


def _body_excerpt(text: str) -> str:
    text = " ".join((text or "").split())
    return f": {text[:200]}" if text else "."


def _retry_after(headers: Any) -> float | None:
    try:
        return max(0.0, float(headers.get("retry-after")))
    except (TypeError, ValueError):
        return None


def _backoff(attempt: int, hint: float | None) -> float:
    if hint is not None:
        return min(hint, MAX_RETRY_AFTER_SECONDS)
    return min(settings.EVALSITE_LLM_BACKOFF * 2 ** (attempt - 1), MAX_BACKOFF_SECONDS) * random.uniform(0.5, 1.0)


# ---- knowledge (offline retrieval) --------------------------------------------------

BM25_K1 = 1.5
BM25_B = 0.75
# A second passage joins the answer when it scores at least this share of the best one.
SECOND_PASSAGE_SHARE = 0.75
NO_ANSWER = "I could not find anything about that in my knowledge."


class KnowledgeAdapter(Adapter):
    def check(self) -> None:
        if not self.version.knowledge.strip():
            raise AgentConfigError(
                "This knowledge agent has no knowledge text to answer from. Add some on its configuration."
            )

    def ask(self, request: AgentRequest) -> AgentReply:
        passages = list(_knowledge_passages(self.version.pk, self.version.knowledge))
        for document in request.documents:
            passages += split_passages(document.text[:MAX_DOCUMENT_CHARS])
        if request.document_context.strip():
            passages += split_passages(request.document_context)
        best = best_passages(request.question, passages)
        if not best and request.conversation:
            # A follow-up like "and on the Team plan?" borrows the earlier user turns' words.
            earlier = " ".join(m["content"] for m in request.conversation if m.get("role") == "user")
            best = best_passages(f"{earlier} {request.question}", passages)
        if not best:
            return AgentReply(answer=NO_ANSWER)
        return AgentReply(answer="\n\n".join(best), retrieval_context=best)


@functools.lru_cache(maxsize=64)
def _knowledge_passages(version_id: int, knowledge: str) -> tuple[str, ...]:
    # Versions never change, so a worker splits each version's knowledge once.
    return tuple(split_passages(knowledge))


_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*)$")


def split_passages(text: str) -> list[str]:
    """Paragraphs separated by blank lines; a Markdown heading starts a new passage and titles it."""
    passages: list[str] = []
    heading = ""
    current: list[str] = []

    def flush() -> None:
        body = "\n".join(current).strip()
        if body:
            passages.append(f"{heading}: {body}" if heading else body)
        current.clear()

    for line in text.splitlines():
        match = _HEADING.match(line)
        if match:
            flush()
            heading = match.group(1).strip()
        elif not line.strip():
            flush()
        else:
            current.append(line.rstrip())
    flush()
    return passages


def best_passages(question: str, passages: list[str]) -> list[str]:
    """The best passage for the question by BM25, plus the runner-up when it scores nearly as well."""
    query = set(content_terms(question))
    if not query or not passages:
        return []
    documents = [Counter(content_terms(passage)) for passage in passages]
    average_length = sum(sum(doc.values()) for doc in documents) / len(documents) or 1.0
    frequency = Counter(term for doc in documents for term in query if term in doc)
    scored: list[tuple[float, int]] = []
    for index, doc in enumerate(documents):
        length = sum(doc.values())
        score = 0.0
        for term in query:
            if term not in doc:
                continue
            idf = math.log(1 + (len(documents) - frequency[term] + 0.5) / (frequency[term] + 0.5))
            tf = doc[term]
            score += idf * tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * length / average_length))
        if score > 0:
            scored.append((score, index))
    if not scored:
        return []
    scored.sort(key=lambda item: (-item[0], item[1]))
    chosen = [scored[0]]
    if len(scored) > 1 and scored[1][0] >= SECOND_PASSAGE_SHARE * scored[0][0]:
        chosen.append(scored[1])
    return [passages[index] for _, index in sorted(chosen, key=lambda item: item[1])]

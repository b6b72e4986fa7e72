"""Gateway errors, and how provider failures map to them."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalsite.llm.results import LLMResult


class LLMError(Exception):
    """A model call failed; .message is readable by a QA person (no class names, no tracebacks).

    kind: not_configured | timeout | rate_limit | auth | bad_request | context_window |
    content_policy | server | connection | busy | truncated | invalid_json. retryable: the
    failure is transient, so a later try may work (our own retries are already spent).
    status: the HTTP status of the provider's answer, when there was one. result: the
    summed usage of the calls that did answer, so their cost can still be recorded.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str,
        attempts: int = 0,
        retryable: bool = False,
        result: LLMResult | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.attempts = attempts
        self.retryable = retryable
        self.result = result
        self.status = status

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only arguments defeat Exception's default pickling, and Celery pickles
        # the exceptions a task declares in `throws` to log them without a traceback.
        return (_rebuilt, (type(self), self.args, self.__dict__))

    def __str__(self) -> str:
        return self.message


def _rebuilt(cls: type[LLMError], args: tuple[Any, ...], state: dict[str, Any]) -> LLMError:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class LLMNotConfigured(LLMError):
    def __init__(self, purpose: str = "llm") -> None:
        if purpose == "embedding":
            message = "No embedding model is configured. Set EVALSITE_EMBEDDING_MODEL (see README) to use this feature."
        else:
            message = "No model is configured. Set EVALSITE_LLM_MODEL (see README) to use this feature."
        super().__init__(message, kind="not_configured")


# litellm's provider names, as a QA person knows them. An "openai/" model is any OpenAI-compatible
# server (llama.cpp, vLLM, a proxy) as often as OpenAI itself: it stays "the model provider".
PROVIDER_NAMES = {
    "anthropic": "Anthropic",
    "azure": "Azure OpenAI",
    "bedrock": "AWS Bedrock",
    "gemini": "Google Gemini",
    "ollama": "Ollama",
    "ollama_chat": "Ollama",
    "vertex_ai": "Vertex AI",
    "vertex_ai_beta": "Vertex AI",
}
GENERIC_PROVIDER = "The model provider"
# Statuses of a server too busy to answer now (Anthropic's 529, Gemini's and Ollama's 503).
OVERLOADED_STATUSES = {503, 529}
# Context-window errors in the words of providers litellm does not recognise (Ollama).
CONTEXT_WORDS = ("input length exceeds the context length",)


def provider_name(provider: str | None) -> str:
    """The provider of a litellm provider name ("gemini", or a model "gemini/..."), readably."""
    return PROVIDER_NAMES.get((provider or "").split("/", 1)[0], GENERIC_PROVIDER)


def mapped_error(exc: Exception, *, attempts: int, timeout: float) -> LLMError | None:
    """Our LLMError for a provider failure, or None when `exc` is not one."""
    import httpx
    import openai

    from evalsite.llm.client import litellm_module

    litellm = litellm_module()
    causes = _causes(exc)
    status = _wire_status(exc, causes)
    after = f" after {attempts} attempts" if attempts > 1 else ""
    reason = provider_reason(exc)
    who = provider_name(getattr(exc, "llm_provider", None))
    named = who != GENERIC_PROVIDER

    def error(kind: str, message: str, retryable: bool = False) -> LLMError:
        return LLMError(message, kind=kind, attempts=attempts, retryable=retryable, status=status)

    # Order matters: litellm reports timeouts and refused connections as 408/500 errors.
    if any(isinstance(e, openai.APITimeoutError | httpx.TimeoutException) for e in causes):
        return error("timeout", f"The model did not answer within {timeout:g} s{after}.", retryable=True)
    # litellm spots a context-window error by its message's wording; newer wordings only
    # carry OpenAI's error code, which the BadRequestError keeps.
    if (
        isinstance(exc, litellm.ContextWindowExceededError)
        or getattr(exc, "code", None) == "context_length_exceeded"
        or any(words in str(exc) for words in CONTEXT_WORDS)
    ):
        if named:
            return error(
                "context_window", f"The conversation is longer than the model's context window ({who}{reason})."
            )
        return error("context_window", "The conversation is longer than the model's context window.")
    if isinstance(exc, litellm.ContentPolicyViolationError):
        return error("content_policy", f"{who} refused the request under its content policy.")
    if re.search(r"\bMissing\b.*\bAPI key\b", str(exc)):  # litellm checks before sending anything
        return error("auth", f"{who} needs an API key: set EVALSITE_LLM_API_KEY.")
    if any(isinstance(e, openai.APIConnectionError | httpx.TransportError | ConnectionError) for e in causes):
        target = who if named else "the model provider"
        return error("connection", f"Could not connect to {target}{after}.", retryable=True)
    if not isinstance(exc, openai.OpenAIError) or status is None:
        return None
    if status == 429:
        if named:
            return error("rate_limit", f"{who} rate limited the request (429){after}{reason}.", retryable=True)
        return error("rate_limit", f"The model provider rate-limited the request (429){after}.", retryable=True)
    if status == 401:
        return error("auth", f"{who} rejected the API key (401).")
    if status == 403:
        return error("auth", f"{who} refused access to this model (403){reason if named else ''}.")
    if status == 404 and named:
        return error("bad_request", f"{who} has no model or deployment by that name (404){reason}.")
    if status in OVERLOADED_STATUSES and named:
        return error("server", f"{who} is overloaded ({status}){after}{reason}.", True)
    if status >= 500:
        return error("server", f"{who} failed with a server error ({status}){after}{reason}.", True)
    return error("bad_request", f"{who} rejected the request ({status}){reason}.")


def _wire_status(exc: Exception, causes: list[BaseException]) -> int | None:
    """The HTTP status of the provider's answer. litellm reports some 5xx as a 500 of its own
    (Anthropic's 529, Gemini's 503 "The model is overloaded."): the answer it keeps
    (provider_status_code), or the provider's own exception it chains, still has the status
    that came over the wire."""
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    answered = getattr(exc, "provider_status_code", None)
    if isinstance(answered, int) and answered in OVERLOADED_STATUSES:
        return answered
    if status == 500:
        for cause in causes[1:]:
            original = getattr(cause, "status_code", None)
            if isinstance(original, int) and original > 500:
                return original
    return status


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def provider_reason(exc: Exception) -> str:
    """The provider's own words (": ..."), without litellm's class-name prefixes or a JSON wrapper."""
    text = str(getattr(exc, "message", "") or "")
    # litellm wraps an OpenAI-style body as text: keep its "message" field.
    inner = re.search(r"""['"]message['"]\s*:\s*['"](.+?)['"]\s*[,}]""", text)
    # Ollama's body is {"error": "..."}.
    inner = inner or re.search(r"""['"]error['"]\s*:\s*['"](.+?)['"]\s*[,}]""", text)
    if inner:
        text = inner.group(1)
    text = re.sub(r"\b(?:\w+\.)*[A-Z]\w*(?:Error|Exception)\b\s*[:\-]*\s*", "", text)
    text = re.sub(r"^\s*Error code: \d+\s*-\s*", "", text)
    text = re.sub(r"\b(?:litellm|openai)\.\S*|Received Model Group=\S*|Available Model Group Fallbacks=\S*", "", text)
    text = re.sub(r"\s+", " ", text).strip(" .:-")
    if text.lower().startswith(("openai", "hosted_vllm", "ollama")):
        text = text.split(" ", 1)[-1].strip(" .:-") if " " in text else ""
    return f": {text[:200]}" if text else ""

"""Test connection: a few short calls per configured model, and what they showed.

The settings page's badge shows the last test of the model now configured, never the
mere presence of a model name. Reports live in the shared cache (Redis), so every web
process shows the same one.

The calls take up to a minute or two (a timeout each), longer than a web request may, so
the button starts a job (`model_test_start`, the task `evalsite.tasks.model_test`) and
the Model section polls until it is done. While it runs a marker sits in the cache; it
expires after the longest the calls can take, so a test whose worker died does not say
"Testing" for ever.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction

from evalsite.llm import complete, complete_json, embed, identity
from evalsite.llm.client import model_for, timeout_for
from evalsite.llm.errors import LLMError

CACHE_KEY = "evalsite:llm-test:"
RUNNING_KEY = CACHE_KEY + "running"
# At most three chat calls for the agent model, three for a separate judge, one embedding.
MOST_CALLS = 7
KEEP_SECONDS = 30 * 24 * 3600
PROBE_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string", "enum": ["OK"]}},
    "required": ["answer"],
    "additionalProperties": False,
}
PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The current time in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
PROBE_PROMPT = "Reply with the single word OK."
# The default endpoints of the providers teams use most, to name where a test went.
PROVIDER_URLS = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com/v1beta",
    "mistral": "https://api.mistral.ai/v1",
    "groq": "https://api.groq.com/openai/v1",
    "ollama": "http://localhost:11434",
    "ollama_chat": "http://localhost:11434",
}
# The chat and embedding paths litellm calls under a provider's base URL (default: OpenAI's).
PROVIDER_PATHS = {
    "anthropic": ("v1/messages", "v1/messages"),
    "azure": ("openai/deployments/{name}/chat/completions", "openai/deployments/{name}/embeddings"),
    "gemini": ("models/{name}:generateContent", "models/{name}:batchEmbedContents"),
    "ollama": ("api/generate", "api/embed"),
    "ollama_chat": ("api/chat", "api/embed"),
}
SCHEMA_MODES = {
    "json_schema": "JSON schema (response_format json_schema)",
    "llama_cpp": "JSON schema (llama.cpp json_object + schema)",
    "vllm": "JSON schema (vLLM guided_json)",
    "json_object": "JSON mode only, no schema: answers are checked and repaired by Evalsite",
    "prompt": "no JSON mode: JSON is asked for in the prompt, then checked and repaired",
}
PURPOSES = {"llm": "Agents and generation", "judge": "Judge", "embedding": "Embeddings"}


@dataclass
class ModelTest:
    purpose: str
    model: str
    ok: bool
    tested_at: float = field(default_factory=time.time)
    latency_ms: int | None = None
    tokens_per_second: float | None = None
    json_schema: bool | None = None  # the server enforces a schema
    json_detail: str = ""
    tools: bool | None = None  # a tool call came back when one was asked for
    embeddings: bool | None = None
    dimensions: int | None = None
    error: str = ""
    same_as: str = ""  # the judge is the agent model: its test is that one
    url: str = ""  # where the calls went
    answer: str = ""  # what came back to "Reply with the single word OK." (clipped)
    warnings: list[str] = field(default_factory=list)  # answered, but not as asked
    identity: str = ""  # what the server said it runs (llm/identity.py)

    @property
    def label(self) -> str:
        return PURPOSES[self.purpose]

    @property
    def tested_just_now(self) -> bool:
        return time.time() - self.tested_at < 60

    @property
    def tested_at_display(self) -> datetime:
        return datetime.fromtimestamp(self.tested_at, tz=UTC)


def model_test_start() -> bool:
    """Queue a test of every configured model; False when one is already under way."""
    from evalsite.tasks import model_test as model_test_task

    expiry = int(MOST_CALLS * _one_attempt() + 60)
    if not cache.add(RUNNING_KEY, time.time(), expiry):
        return False

    def send() -> None:
        try:
            model_test_task.delay()
        except Exception:
            cache.delete(RUNNING_KEY)  # no message, no test: the button is offered again
            raise

    # robust: a broker that is down is logged, not shown to the user as a server error.
    transaction.on_commit(send, robust=True)
    return True


def _one_attempt() -> float:
    """The longest one probe call takes: the test asks with retries=0, maybe after a wait for a slot."""
    queue = settings.EVALSITE_LLM_QUEUE_TIMEOUT if settings.EVALSITE_LLM_CONCURRENCY else 0.0
    return timeout_for("probe") + queue


def model_test_running() -> bool:
    return cache.get(RUNNING_KEY) is not None


def model_test_run() -> list[ModelTest]:
    """The job: test every model, then clear the marker (whatever happened) so the page stops polling."""
    try:
        return model_test_all()
    finally:
        cache.delete(RUNNING_KEY)


def model_test_all() -> list[ModelTest]:
    """Test every configured model (the judge only when it differs from the agent model)."""
    reports = []
    chat = model_for("llm")
    for purpose in ("llm", "judge", "embedding"):
        model = model_for(purpose)
        if model is None:
            continue
        if purpose == "judge" and model == chat:
            continue
        report = _test_embedding(model) if purpose == "embedding" else _test_chat(purpose, model)
        cache.set(CACHE_KEY + purpose, asdict(report), KEEP_SECONDS)
        reports.append(report)
    return reports


def model_test_last(purpose: str) -> ModelTest | None:
    """The last test of the model configured now for `purpose` (None when it was never tested)."""
    model = model_for(purpose)
    stored = cache.get(CACHE_KEY + purpose)
    if model is None or not isinstance(stored, dict) or stored.get("model") != model:
        return None
    return ModelTest(**stored)


def _test_chat(purpose: str, model: str) -> ModelTest:
    report = ModelTest(purpose=purpose, model=model, ok=False, url=endpoint_url(model))
    ask = [{"role": "user", "content": PROBE_PROMPT}]
    try:
        plain = complete(ask, task="probe", purpose=purpose, retries=0, temperature=0)
    except LLMError as error:
        report.error = f"{error.message} (tried {report.url})"
        return report
    report.latency_ms = plain.duration_ms
    report.answer = _clip(plain.text)
    if not plain.text.strip():
        # A server that answers nothing is not connected to a model that can do the work.
        report.error = (
            f"The model answered nothing ({plain.completion_tokens} completion tokens) to “{PROBE_PROMPT}” "
            f"(tried {report.url}). Check the model and its chat format on the server."
        )
        return report
    report.ok = True
    seconds = plain.duration_ms / 1000
    report.tokens_per_second = round(plain.completion_tokens / seconds, 1) if seconds > 0 else None
    if not _says_ok(plain.text):
        report.warnings.append(
            f"Asked to “{PROBE_PROMPT}”, it answered “{report.answer}”: a model that ignores a plain "
            "instruction will not follow an agent's instructions or the judge's rubric either."
        )
    _test_json(report, purpose, ask)
    report.tools = _calls_tools(purpose)
    seen = identity.identity_refresh(model)
    report.identity = seen.shown if seen else ""
    return report


def _test_json(report: ModelTest, purpose: str, ask: list[dict[str, str]]) -> None:
    try:
        answer = complete_json(ask, schema=PROBE_SCHEMA, task="probe", purpose=purpose, retries=0, temperature=0)
    except LLMError as error:
        report.json_schema, report.json_detail = False, "the answer did not follow the schema (below)"
        report.warnings.append(
            f"Asked for JSON following a schema, it answered something else: {error.message} "
            "Generation, the judge and suggestions need JSON."
        )
    else:
        report.json_schema = answer.json_mode in ("json_schema", "llama_cpp", "vllm")
        report.json_detail = SCHEMA_MODES.get(answer.json_mode, answer.json_mode)


def _says_ok(text: str) -> bool:
    return text.strip().strip("\"'“”.!` ").upper() == "OK"


def _clip(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def endpoint_url(model: str, *, embedding: bool = False) -> str:
    """Where a chat (or embedding) call for `model` goes: the configured API base, else the
    provider's own, with the path litellm calls there."""
    provider, _, name = model.rpartition("/") if "/" in model else ("openai", "", model)
    provider = provider.split("/", 1)[0]
    base = settings.EVALSITE_LLM_API_BASE or PROVIDER_URLS.get(provider)
    if not base:
        return f"{provider}'s default endpoint"
    chat_path, embedding_path = PROVIDER_PATHS.get(provider, ("chat/completions", "embeddings"))
    path = (embedding_path if embedding else chat_path).format(name=name)
    base = base.rstrip("/")
    return base if base.endswith("/" + path) else f"{base}/{path}"  # litellm takes Anthropic's full URL too


def _calls_tools(purpose: str) -> bool | None:
    ask = [{"role": "user", "content": "What time is it in Paris? Use the get_time tool."}]
    try:
        result = complete(ask, task="probe", purpose=purpose, retries=0, temperature=0, tools=[PROBE_TOOL])
    except LLMError:
        return False
    return bool(result.tool_calls)


def _test_embedding(model: str) -> ModelTest:
    report = ModelTest(purpose="embedding", model=model, ok=False, url=endpoint_url(model, embedding=True))
    try:
        vectors, usage = embed(["Evalsite connection test"], task="probe", retries=0)
    except LLMError as error:
        report.embeddings, report.error = False, f"{error.message} (tried {report.url})"
        return report
    report.ok = report.embeddings = True
    report.latency_ms = usage.duration_ms
    report.dimensions = len(vectors[0]) if vectors else 0
    return report


def model_test_context() -> list[dict[str, Any]]:
    """Per configured purpose: its model and last test, for the settings page."""
    rows: list[dict[str, Any]] = []
    for purpose, label in PURPOSES.items():
        model = model_for(purpose)
        if model is None:
            continue
        if purpose == "judge" and model == model_for("llm"):
            rows.append({"purpose": purpose, "label": label, "model": model, "test": None, "same_as_agent": True})
            continue
        rows.append(
            {
                "purpose": purpose,
                "label": label,
                "model": model,
                "test": model_test_last(purpose),
                "same_as_agent": False,
            }
        )
    return rows

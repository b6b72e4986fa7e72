"""What the model server says it runs behind a model name: part of a judge's fingerprint.

A name such as `openai/local` says nothing about the weights behind it: swap the GGUF behind
a llama.cpp alias and every call still names `local`. The server does say more: the
completion's `model` field (a file name, a dated snapshot), a `system_fingerprint` (a
llama.cpp build) and, on an OpenAI-compatible server of our own (EVALSITE_LLM_API_BASE),
the /v1/models entry (llama.cpp's `meta`: parameters, size, training context) and how its
tokenize endpoint splits a fixed text (llama-cpp-python, which names every model by its alias).

Every chat call reports what it saw (`identity_observe`, called by the gateway; when that is
new, one process at a time reads the server's metadata, so a run's lanes do not all stop for
it at their first call); the page's
Test connection and the judge preflight read /v1/models again (`identity_refresh`). The
last identity seen per server and model lives in the shared cache, so a web process sees
what a worker saw; runs.judging.configs puts it in the judge's fingerprint, so a model swapped
behind one name is a new judge configuration.

What counts: the reported model when it says more than the name we asked for, the system
fingerprint and the /v1/models metadata of our own server. A hosted provider's
system_fingerprint is shown but not counted: OpenAI's changes from one call to the next
(one per backend), which would make a new judge for every call.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.cache import cache

logger = logging.getLogger("evalsite.llm")

CACHE_KEY = "evalsite:llm-identity:"
KEEP_SECONDS = 365 * 24 * 3600
MAX_TEXT = 300
METADATA_TIMEOUT = 5.0
# One process reads a model's metadata at a time (the other lanes of a run go on with their
# calls); the mark outlives the two reads' timeouts, in case its process dies reading.
READING_SECONDS = 3 * METADATA_TIMEOUT
# How long a process leaves a model alone after finding another process reading it.
WAIT_SECONDS = 1.0
# Tokenized by the server to tell models apart (words, digits, accents, symbols: vocabularies differ).
TOKENIZER_TEXT = "Evalsite model check: naïve café, 12345 tokens; ⟨αβγ⟩ → done."
# Scalar /v1/models fields that describe the weights (not the listing's own bookkeeping).
IGNORED_FIELDS = {"id", "object", "created", "owned_by", "permission", "permissions", "root", "parent"}

# Per process: what this process last stored for each server and model, so a call costs a
# dict lookup unless what the server reports has changed.
_seen: dict[str, tuple[str, str]] = {}
# Per process: when to look again at a model that another process was reading.
_waiting: dict[str, float] = {}


@dataclass(frozen=True)
class Identity:
    requested: str  # the model name as sent, without the litellm provider prefix
    reported: str = ""
    system_fingerprint: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    own_server: bool = False  # served from EVALSITE_LLM_API_BASE (its fingerprint is a build)

    @property
    def text(self) -> str:
        """The counted identity, readable ("" when the server said nothing beyond the name)."""
        parts = []
        if self.reported and self.reported != self.requested:
            parts.append(self.reported)
        if self.system_fingerprint and self.own_server:
            parts.append(f"build {self.system_fingerprint}")
        if self.metadata:
            parts.append(", ".join(f"{key} {value}" for key, value in sorted(self.metadata.items())))
        return " · ".join(parts)[:MAX_TEXT]

    @property
    def shown(self) -> str:
        """Everything the server said, for Test connection (the fingerprint of a hosted one too)."""
        parts = [self.reported or self.requested]
        if self.system_fingerprint:
            parts.append(f"system fingerprint {self.system_fingerprint}")
        if self.metadata:
            parts.append(", ".join(f"{key} {value}" for key, value in sorted(self.metadata.items())))
        return " · ".join(parts)[:MAX_TEXT]


def identity_observe(model: str, result: Any) -> None:
    """After a chat call: remember what the server said answered, when it changed. Never fails a call."""
    key = _key(model)
    seen = (result.model_reported, result.system_fingerprint)
    if _seen.get(key) == seen:
        return
    if _waiting.get(key, 0.0) > time.monotonic():
        return
    try:
        stored = cache.get(CACHE_KEY + key)
        if isinstance(stored, dict) and (stored.get("reported"), stored.get("system_fingerprint")) == seen:
            _seen[key] = seen
            return
        # A run's lanes make their first calls to a model at once: one reads the server's
        # metadata (three requests) while the others go on, and find it stored a call later.
        reading = CACHE_KEY + key + ":reading"
        if not cache.add(reading, 1, READING_SECONDS):
            _waiting[key] = time.monotonic() + WAIT_SECONDS
            return
        try:
            _store(model, seen[0], seen[1], _metadata(model))
        finally:
            cache.delete(reading)
    except Exception:
        logger.warning("llm model identity not recorded for %s", model, exc_info=True)


def identity_refresh(model: str) -> Identity | None:
    """Read /v1/models again (Test connection, preflight) over the last completion's report."""
    stored = cache.get(CACHE_KEY + _key(model))
    reported, fingerprint = (
        ("", "") if not isinstance(stored, dict) else (stored["reported"], stored["system_fingerprint"])
    )
    try:
        return _store(model, reported, fingerprint, _metadata(model))
    except Exception:
        logger.warning("llm model identity not refreshed for %s", model, exc_info=True)
        return identity_get(model)


def identity_get(model: str) -> Identity | None:
    """The last identity seen for this model on the server configured now (None: never seen)."""
    stored = cache.get(CACHE_KEY + _key(model))
    if not isinstance(stored, dict):
        return None
    return Identity(
        requested=_requested(model),
        reported=stored.get("reported", ""),
        system_fingerprint=stored.get("system_fingerprint", ""),
        metadata=stored.get("metadata") or {},
        own_server=bool(settings.EVALSITE_LLM_API_BASE),
    )


def forget() -> None:
    _seen.clear()
    _waiting.clear()


def _store(model: str, reported: str, fingerprint: str, metadata: dict[str, Any]) -> Identity:
    record = {"reported": reported, "system_fingerprint": fingerprint, "metadata": metadata}
    cache.set(CACHE_KEY + _key(model), record, KEEP_SECONDS)
    _seen[_key(model)] = (reported, fingerprint)
    identity = identity_get(model)
    assert identity is not None
    return identity


def _metadata(model: str) -> dict[str, Any]:
    """The /v1/models entry of our own server for this model: its descriptive scalar fields
    and llama.cpp's `meta`. {} for a hosted provider, or when the server lists nothing useful."""
    base = settings.EVALSITE_LLM_API_BASE
    if not base:
        return {}
    import httpx

    headers = {"Authorization": f"Bearer {settings.EVALSITE_LLM_API_KEY}"} if settings.EVALSITE_LLM_API_KEY else {}
    try:
        response = httpx.get(base.rstrip("/") + "/models", headers=headers, timeout=METADATA_TIMEOUT)
        entries = response.json().get("data") or [] if response.status_code == 200 else []
    except (httpx.HTTPError, ValueError, AttributeError):
        return {}
    requested = _requested(model)
    signature = _tokenizer(base, headers, requested)
    described = {"tokenizer": signature} if signature else {}
    entry = next((item for item in entries if isinstance(item, dict) and item.get("id") == requested), None)
    if entry is None and len(entries) == 1 and isinstance(entries[0], dict):
        entry = entries[0]  # a one-model server (llama.cpp) lists its file, not our alias
    if entry is not None:
        meta = entry.get("meta")
        described.update({**entry, **(meta if isinstance(meta, dict) else {})})
    return {
        str(name): value
        for name, value in described.items()
        if name not in IGNORED_FIELDS and isinstance(value, str | int | float | bool) and str(value)
    }


def _tokenizer(base: str, headers: dict[str, str], requested: str) -> str:
    """How the server's model tokenizes a fixed text: "14 tokens #1a2b3c4d", or "" when the server
    has no tokenize endpoint. llama-cpp-python names every model by the alias it was asked for and
    lists nothing else, so its tokenizer is what tells two GGUFs behind one alias apart."""
    import httpx

    root = base.rstrip("/").removesuffix("/v1")
    endpoints = (  # llama-cpp-python's, then llama.cpp's own server's
        (root + "/extras/tokenize", {"input": TOKENIZER_TEXT, "model": requested}),
        (root + "/tokenize", {"content": TOKENIZER_TEXT}),
    )
    for url, body in endpoints:
        try:
            response = httpx.post(url, json=body, headers=headers, timeout=METADATA_TIMEOUT)
            tokens = response.json().get("tokens") if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            continue
        if isinstance(tokens, list) and tokens:
            digest = hashlib.sha256(json.dumps(tokens).encode()).hexdigest()[:8]
            return f"{len(tokens)} tokens #{digest}"
    return ""


def _requested(model: str) -> str:
    return model.split("/", 1)[1] if "/" in model else model


def _key(model: str) -> str:
    raw = json.dumps([settings.EVALSITE_LLM_API_BASE or "", model])
    return hashlib.sha256(raw.encode()).hexdigest()[:32]

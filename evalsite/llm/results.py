"""What a call returns, and its tokens, cost and log line."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any

logger = logging.getLogger("evalsite.llm")


@dataclass
class LLMResult:
    text: str  # assistant text ("" when only tool calls)
    data: Any  # parsed and validated JSON (complete_json only; None for the other calls)
    tool_calls: list[dict[str, Any]]  # [{"id", "name", "arguments": dict}]
    message: dict[str, Any]  # the assistant message, to append to a conversation in tool loops
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0  # USD; 0.0 when litellm knows no price for the model
    attempts: int = 1  # HTTP attempts made, summed over a JSON repair call
    duration_ms: int = 0
    finish_reason: str = ""  # "stop", "length" (cut at max_tokens), "tool_calls"
    max_tokens: int | None = None  # the limit the call was sent with
    json_mode: str = ""  # complete_json: how the JSON was asked for (see structured.JSON_MODES)
    # What the server says answered: the response's `model` field (a dated snapshot, a GGUF
    # file name) and its `system_fingerprint`, "" when it sent none (llm/identity.py).
    model_reported: str = ""
    system_fingerprint: str = ""

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"


def measured(result: LLMResult, response: Any, attempts: int, started: float) -> LLMResult:
    usage = getattr(response, "usage", None)
    return replace(
        result,
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        cost=_cost(response),
        attempts=attempts,
        duration_ms=int((time.monotonic() - started) * 1000),
    )


def summed(first: LLMResult, second: LLMResult) -> LLMResult:
    return replace(
        second,
        prompt_tokens=first.prompt_tokens + second.prompt_tokens,
        completion_tokens=first.completion_tokens + second.completion_tokens,
        cost=first.cost + second.cost,
        attempts=first.attempts + second.attempts,
        duration_ms=first.duration_ms + second.duration_ms,
    )


def log_success(task: str, result: LLMResult) -> None:
    logger.info(
        "llm task=%s model=%s prompt_tokens=%d completion_tokens=%d cost=%.6f attempts=%d ms=%d finish=%s",
        task,
        result.model,
        result.prompt_tokens,
        result.completion_tokens,
        result.cost,
        result.attempts,
        result.duration_ms,
        result.finish_reason or "-",
    )


# Models litellm has no price for (local, self-hosted, fakes). Each is registered with
# litellm once at zero price: otherwise every call searched litellm's whole price list
# for a near match, twice (its own cost figure and ours), about 2 ms of CPU a call, a
# real share of a run's per-case overhead.
_UNPRICED_MODELS: set[str] = set()


def _cost(response: Any) -> float:
    from evalsite.llm.client import litellm_module

    # litellm has priced the response already (its x-litellm-response-cost figure):
    # pricing it again took as long as the rest of litellm's bookkeeping for a call.
    priced = _hidden_param(response, "response_cost")
    if isinstance(priced, int | float):
        return float(priced)
    model = getattr(response, "model", None) or ""
    if model in _UNPRICED_MODELS:
        return 0.0
    litellm = litellm_module()
    try:
        return float(litellm.completion_cost(completion_response=response) or 0.0)
    except Exception:  # no known price (a local or fake model): cost must never fail a call
        _UNPRICED_MODELS.add(model)
        _register_unpriced(litellm, model, _hidden_param(response, "custom_llm_provider") or "openai")
        return 0.0


def _hidden_param(response: Any, name: str) -> Any:
    hidden = getattr(response, "_hidden_params", None)
    return hidden.get(name) if isinstance(hidden, dict) else getattr(hidden, name, None)


def _register_unpriced(litellm: ModuleType, model: str, provider: str) -> None:
    """Tell litellm a model it has no entry for costs nothing, so it stops searching its
    price list for it on every call. A model it knows is never touched: a failed pricing
    must not turn a real price into zero."""
    if not model or model in litellm.model_cost or f"{provider}/{model}" in litellm.model_cost:
        return
    litellm_logger = logging.getLogger("LiteLLM")
    level = litellm_logger.level
    litellm_logger.setLevel(logging.ERROR)  # its warning that cache pricing defaults to 0: expected here
    try:
        litellm.register_model(
            {model: {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0, "litellm_provider": provider}}
        )
    except Exception:
        logger.info("Could not register model %s at zero price with litellm", model, exc_info=True)
    finally:
        litellm_logger.setLevel(level)


def price(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """USD for one call of `model` by litellm's price list (litellm.cost_per_token), or None
    when litellm has no price for it (a local or self-hosted model, one we registered at
    zero above because it had none)."""
    from evalsite.llm.client import litellm_module

    if not model or model in _UNPRICED_MODELS or model.split("/", 1)[-1] in _UNPRICED_MODELS:
        return None
    try:
        prompt, completion = litellm_module().cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens
        )
    except Exception:  # litellm raises for a model it has no entry for
        return None
    return float(prompt) + float(completion)

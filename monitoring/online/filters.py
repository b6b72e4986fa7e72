"""An online evaluator's filters: which of its agent's traces it may score.

Stored on OnlineEvaluator.filters, every key optional (absent or empty: no condition):

    {"service": "support-bot",                       # the trace's service.name, exactly
     "attributes": [{"key": "deployment.environment", "op": "equals", "value": "prod"},
                    {"key": "gen_ai.request.model", "op": "contains", "value": "mini"}],
     "tags": ["vip"],                                # the trace has every one of them
     "feedback": "negative" | "positive" | "any",    # end-user feedback on the trace
     "latency_over_ms": 2000,                        # slower than this
     "errors_only": true}                            # traces whose status is error

Attributes are the trace's own (its resource's and root span's, as Trace.attributes keeps them),
compared as text. All conditions must hold. `filters_clean` normalises what a form or the API
sent and says what is wrong with it; `trace_matches` is pure (the feedback is passed in).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ValidationError

from monitoring.models import Feedback, Trace

FEEDBACK_CHOICES = ("negative", "positive", "any")
ATTRIBUTE_OPS = ("equals", "contains")
KEYS = ("service", "attributes", "tags", "feedback", "latency_over_ms", "errors_only")


def filters_clean(raw: Any) -> dict[str, Any]:
    """The filters, normalised (empty conditions dropped); ValidationError naming the bad one."""
    if raw in (None, ""):
        return {}
    if not isinstance(raw, dict):
        raise ValidationError('Filters must be an object, such as {"service": "support-bot"}.')
    unknown = sorted(set(raw) - set(KEYS))
    if unknown:
        raise ValidationError(f"Unknown filter {', '.join(unknown)}: the filters are {', '.join(KEYS)}.")
    cleaned: dict[str, Any] = {}
    service = str(raw.get("service") or "").strip()
    if service:
        cleaned["service"] = service
    attributes = [_attribute(item, number) for number, item in enumerate(raw.get("attributes") or [], 1)]
    if attributes:
        cleaned["attributes"] = attributes
    tags = raw.get("tags") or []
    if isinstance(tags, str):
        tags = tags.split(",")
    tags = [str(tag).strip() for tag in tags if str(tag).strip()]
    if tags:
        cleaned["tags"] = tags
    feedback = str(raw.get("feedback") or "").strip()
    if feedback:
        if feedback not in FEEDBACK_CHOICES:
            raise ValidationError(f"Filter feedback must be one of {', '.join(FEEDBACK_CHOICES)}, not {feedback!r}.")
        cleaned["feedback"] = feedback
    latency = raw.get("latency_over_ms")
    if latency not in (None, "", 0):
        if isinstance(latency, bool) or not isinstance(latency, int | float | str) or not str(latency).isdigit():
            raise ValidationError(f"Filter latency_over_ms must be a whole number of milliseconds, not {latency!r}.")
        cleaned["latency_over_ms"] = int(latency)
    if raw.get("errors_only") not in (None, False, "", "false", "0"):
        cleaned["errors_only"] = True
    return cleaned


def _attribute(item: Any, number: int) -> dict[str, str]:
    if not isinstance(item, dict) or not str(item.get("key") or "").strip():
        raise ValidationError(f"Attribute filter {number} needs a key, an op and a value.")
    op = str(item.get("op") or "equals")
    if op not in ATTRIBUTE_OPS:
        raise ValidationError(f"Attribute filter {number}: op must be equals or contains, not {op!r}.")
    return {"key": str(item["key"]).strip(), "op": op, "value": str(item.get("value") or "")}


def needs_feedback(filters: dict[str, Any]) -> bool:
    return bool(filters.get("feedback"))


def trace_matches(filters: dict[str, Any], trace: Trace, feedback: Iterable[Feedback] = ()) -> bool:
    if filters.get("service") and trace.service_name != filters["service"]:
        return False
    if filters.get("errors_only") and trace.status != Trace.Status.ERROR:
        return False
    if filters.get("latency_over_ms") and trace.duration_ms <= filters["latency_over_ms"]:
        return False
    if filters.get("tags") and not set(filters["tags"]) <= {str(tag) for tag in trace.tags or []}:
        return False
    for condition in filters.get("attributes") or []:
        value = (trace.attributes or {}).get(condition["key"])
        if value is None:
            return False
        text = value if isinstance(value, str) else str(value)
        if condition["op"] == "equals" and text != condition["value"]:
            return False
        if condition["op"] == "contains" and condition["value"] not in text:
            return False
    wanted = filters.get("feedback")
    if wanted:
        given = list(feedback)
        if wanted == "any" and not given:
            return False
        if wanted == "negative" and not any(item.negative for item in given):
            return False
        if wanted == "positive" and not any(not item.negative for item in given):
            return False
    return True


def filters_text(filters: dict[str, Any]) -> str:
    """ "service support-bot, errors only, tag vip" for the pages; "every trace" when empty."""
    parts = []
    if filters.get("service"):
        parts.append(f"service {filters['service']}")
    for condition in filters.get("attributes") or []:
        parts.append(f"{condition['key']} {condition['op']} “{condition['value']}”")
    for tag in filters.get("tags") or []:
        parts.append(f"tag {tag}")
    if filters.get("feedback"):
        parts.append(f"{filters['feedback']} feedback")
    if filters.get("latency_over_ms"):
        parts.append(f"slower than {filters['latency_over_ms']} ms")
    if filters.get("errors_only"):
        parts.append("errors only")
    return ", ".join(parts) or "every trace"

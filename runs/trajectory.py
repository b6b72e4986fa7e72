"""Tool trajectories: does the agent's sequence of tool calls match the expected one (strict,
unordered, superset or subset, arguments checked or not)? Pure functions, used by runs.scoring."""

from __future__ import annotations

import json
from typing import Any


def call_text(call: dict[str, Any]) -> str:
    args = call.get("args") or {}
    shown = ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in args.items())
    return f"{call.get('name', '?')}({shown})"


# ---- tool trajectories -----------------------------------------------------------------

MODE_LABELS = {
    "strict": "the same tools in the same order",
    "unordered": "the same tools in any order",
    "superset": "at least the expected tools",
    "subset": "only expected tools",
}


def trajectory_match(
    actual: list[dict[str, Any]], expected: list[dict[str, Any]], mode: str, check_args: bool
) -> tuple[bool, str]:
    """(matched, what went wrong). Args, when checked, must hold every expected key with an equal value."""

    def fits(call: dict[str, Any], want: dict[str, Any]) -> bool:
        return call_fits(call, want, check_args)

    if mode == "strict":
        if len(actual) != len(expected):
            return False, f"It made {len(actual)} call(s) where {len(expected)} were expected."
        for position, (call, want) in enumerate(zip(actual, expected, strict=True), 1):
            if not fits(call, want):
                return False, f"Call {position} should have been {call_text(want)}."
        return True, ""
    matched = _matching(actual, expected, fits)
    if mode == "unordered":
        if len(actual) != len(expected) or matched < len(expected):
            return False, _unmatched_text(actual, expected, fits)
        return True, ""
    if mode == "superset":
        return (True, "") if matched == len(expected) else (False, _unmatched_text(actual, expected, fits))
    if mode == "subset":
        if matched == len(actual):
            return True, ""
        extra = [call for call in actual if not any(fits(call, want) for want in expected)]
        names = ", ".join(call_text(call) for call in extra) or "a repeated call"
        return False, f"Not expected: {names}."
    return False, f"Unknown trajectory mode {mode!r}."


def _unmatched_text(actual: list[dict[str, Any]], expected: list[dict[str, Any]], fits: Any) -> str:
    missing = [want for want in expected if not any(fits(call, want) for call in actual)]
    extra = [call for call in actual if not any(fits(call, want) for want in expected)]
    parts = []
    if missing:
        parts.append("Missing: " + ", ".join(call_text(want) for want in missing) + ".")
    if extra:
        parts.append("Not expected: " + ", ".join(call_text(call) for call in extra) + ".")
    return " ".join(parts) or "The number of calls differs."


def _matching(actual: list[dict[str, Any]], expected: list[dict[str, Any]], fits: Any) -> int:
    """Size of a maximum matching between calls and expectations."""
    return len(matching_pairs(actual, expected, fits))


def matching_pairs(actual: list[dict[str, Any]], expected: list[dict[str, Any]], fits: Any) -> dict[int, int]:
    """A maximum matching, as {actual index: expected index} (augmenting paths; lists are short)."""
    owner: dict[int, int] = {}  # actual index -> expected index

    def assign(want_index: int, seen: set[int]) -> bool:
        for call_index, call in enumerate(actual):
            if call_index in seen or not fits(call, expected[want_index]):
                continue
            seen.add(call_index)
            if call_index not in owner or assign(owner[call_index], seen):
                owner[call_index] = want_index
                return True
        return False

    for want_index in range(len(expected)):
        assign(want_index, set())
    return owner


def call_fits(call: dict[str, Any], want: dict[str, Any], check_args: bool) -> bool:
    if str(call.get("name", "")).strip().lower() != str(want.get("name", "")).strip().lower():
        return False
    if not check_args:
        return True
    args = call.get("args") or {}
    return all(key in args and _same_value(args[key], value) for key, value in (want.get("args") or {}).items())


def _same_value(actual: Any, expected: Any) -> bool:
    if isinstance(expected, dict | list) or isinstance(actual, dict | list):
        return json.dumps(actual, sort_keys=True) == json.dumps(expected, sort_keys=True)
    # "42" and 42, "A-1042" and "a-1042 " are the same argument for a QA person.
    return str(actual).strip().casefold() == str(expected).strip().casefold()

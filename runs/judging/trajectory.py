"""Tool trajectories: does the agent's sequence of tool calls match the expected one (strict,
unordered, superset or subset, arguments checked or not)? Pure functions, used by runs.judging.scoring."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
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


# ---- the diagnosis: what went wrong, in the trajectory mode's own terms -------------------


@dataclass
class ToolDiagnosis:
    """Which expected calls were made as expected, made with other arguments, or missing, and which
    calls were not expected; and which of those count against the case in its trajectory mode
    (superset allows extra calls, subset allows missing ones). The card, the exports and the API
    all read this one diagnosis, so they cannot disagree."""

    mode: str
    check_args: bool
    matched: list[dict[str, Any]] = field(default_factory=list)  # expected calls made as expected
    wrong_args: list[tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=list)  # (call, wanted)
    missing: list[dict[str, Any]] = field(default_factory=list)
    extra: list[dict[str, Any]] = field(default_factory=list)
    out_of_order: bool = False  # strict mode: every call made, in another order

    @property
    def extra_allowed(self) -> bool:
        return self.mode == "superset"

    @property
    def missing_allowed(self) -> bool:
        return self.mode == "subset"

    def problems(self) -> list[str]:
        """What fails the check, in words; empty exactly when the check passes."""
        parts = []
        if self.wrong_args:
            shown = "; ".join(
                f"{call_text(call)} where {call_text(want)} was expected" for call, want in self.wrong_args
            )
            parts.append(f"Called with other arguments: {shown}.")
        if self.missing and not self.missing_allowed:
            parts.append("Missing: " + ", ".join(call_text(want) for want in self.missing) + ".")
        if self.extra and not self.extra_allowed:
            parts.append("Not expected: " + ", ".join(call_text(call) for call in self.extra) + ".")
        if self.out_of_order:
            parts.append("Every expected call was made, in another order.")
        return parts

    def explanation(self) -> str:
        """The problems, then what the mode allowed, so nothing allowed reads as a fault."""
        parts = self.problems()
        if self.extra and self.extra_allowed:
            shown = ", ".join(call_text(call) for call in self.extra)
            parts.append(f"Also called (allowed, superset mode): {shown}.")
        if self.missing and self.missing_allowed:
            shown = ", ".join(call_text(want) for want in self.missing)
            parts.append(f"Not called (allowed, subset mode): {shown}.")
        return " ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        """Tool names per outcome (lower case, as the check compares them), for exports and the API."""
        return {
            "matched": [_name(want) for want in self.matched],
            "missing": [_name(want) for want in self.missing],
            "extra": [_name(call) for call in self.extra],
            "wrong_args": [_name(want) for _call, want in self.wrong_args],
        }


def diagnose(
    actual: list[dict[str, Any]], expected: list[dict[str, Any]], mode: str, check_args: bool
) -> ToolDiagnosis:
    """Calls paired with expectations by name and arguments first, then the calls left over with the
    expectations left over by name alone: those pairs are the wrong-argument calls."""
    exact = matching_pairs(actual, expected, lambda call, want: call_fits(call, want, check_args))
    rest_actual = [i for i in range(len(actual)) if i not in exact]
    rest_expected = [j for j in range(len(expected)) if j not in exact.values()]
    by_name = matching_pairs(
        [actual[i] for i in rest_actual],
        [expected[j] for j in rest_expected],
        lambda call, want: call_fits(call, want, False),
    )
    named = {rest_actual[a]: rest_expected[e] for a, e in by_name.items()}
    paired = set(exact.values()) | set(named.values())
    diagnosis = ToolDiagnosis(mode=mode, check_args=check_args)
    diagnosis.matched = [expected[j] for j in sorted(exact.values())]
    diagnosis.wrong_args = [(actual[i], expected[j]) for i, j in sorted(named.items(), key=lambda pair: pair[1])]
    diagnosis.missing = [want for j, want in enumerate(expected) if j not in paired]
    diagnosis.extra = [call for i, call in enumerate(actual) if i not in exact and i not in named]
    if mode == "strict" and len(exact) == len(actual) == len(expected):
        diagnosis.out_of_order = any(not call_fits(a, e, check_args) for a, e in zip(actual, expected, strict=True))
    return diagnosis


def _name(call: dict[str, Any]) -> str:
    return str(call.get("name", "")).strip().lower()

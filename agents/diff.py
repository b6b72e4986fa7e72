"""Readable per-field differences between two agent versions (unified line diffs).

HTTP header values are secrets: a diff shows header names only, and marks a header
whose value changed without ever printing either value.
"""

import dataclasses
import difflib
import json
from dataclasses import dataclass
from typing import Any

from agents.models import AgentVersion

MASK = "••••••••"
LABELS = {
    "instructions": "Instructions",
    "skills": "Skills",
    "knowledge": "Knowledge",
    "guardrails": "Guardrails",
    "model": "Model",
    "temperature": "Temperature",
    "tools": "Tools",
    "llm_timeout": "Timeout",
    "http_url": "Endpoint URL",
    "http_headers": "Headers",
    "http_timeout": "Timeout",
}


@dataclass
class DiffLine:
    kind: str  # "add" | "del" | "ctx" | "hunk"
    text: str


@dataclass
class FieldDiff:
    field: str
    label: str
    # dataclasses.field in full: the `field` attribute above shadows the bare name in this class.
    lines: list[DiffLine] = dataclasses.field(default_factory=list)

    @property
    def added(self) -> int:
        return sum(1 for line in self.lines if line.kind == "add")

    @property
    def removed(self) -> int:
        return sum(1 for line in self.lines if line.kind == "del")


def _tool_lines(tools: list[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    for tool in tools:
        lines.append(f"tool {tool.get('name', '')}")
        lines.append(f"  description: {tool.get('description', '')}")
        # Pretty-printed with sorted keys, so a changed property shows as one changed line.
        parameters = json.dumps(tool.get("parameters", {}), indent=2, sort_keys=True, ensure_ascii=False)
        lines.append("  parameters:")
        lines.extend("    " + line for line in parameters.splitlines())
        result = str(tool.get("result", ""))
        lines.append("  result:" + ("" if result else " (empty)"))
        lines.extend("    " + line for line in result.splitlines())
    return lines


def _header_lines(old: dict[str, str], new: dict[str, str]) -> tuple[list[str], list[str]]:
    """Names with masked values; a changed value differs only by a marker, never by content."""

    def render(headers: dict[str, str], marker: str) -> list[str]:
        return [
            f"{name}: {MASK}" + (marker if name in old and name in new and old[name] != new[name] else "")
            for name in sorted(headers, key=str.lower)
        ]

    return render(old, "  (previous value)"), render(new, "  (new value)")


def _lines(name: str, value: Any) -> list[str]:
    if name == "tools":
        return _tool_lines(value or [])
    if name == "model":
        return [value or "(default model)"]
    if name == "temperature":
        return ["(model default)" if value is None else f"{value:g}"]
    if name == "llm_timeout":
        return ["(console default)" if value is None else f"{value} seconds"]
    if name == "http_timeout":
        return [f"{value} seconds"]
    return str(value or "").splitlines()


def _unified(old: list[str], new: list[str]) -> list[DiffLine]:
    lines: list[DiffLine] = []
    # Skip the "---"/"+++" file headers: the page already says which versions are compared.
    for raw in list(difflib.unified_diff(old, new, lineterm="", n=3))[2:]:
        if raw.startswith("@@"):
            lines.append(DiffLine("hunk", raw))
        elif raw.startswith("+"):
            lines.append(DiffLine("add", raw[1:]))
        elif raw.startswith("-"):
            lines.append(DiffLine("del", raw[1:]))
        else:
            lines.append(DiffLine("ctx", raw[1:]))
    # "@@ -12,4 +12,5 @@" headers mean little to readers: drop the first, and show a gap
    # marker between blocks of changes that are far apart.
    if lines and lines[0].kind == "hunk":
        lines.pop(0)
    for line in lines:
        if line.kind == "hunk":
            line.text = "⋯"
    return lines


def version_diff(old: AgentVersion, new: AgentVersion) -> list[FieldDiff]:
    """The fields that differ from `old` to `new`, in display order."""
    diffs: list[FieldDiff] = []
    for name in LABELS:
        if name == "http_headers":
            if old.http_headers == new.http_headers:
                continue
            before, after = _header_lines(old.http_headers, new.http_headers)
        else:
            if getattr(old, name) == getattr(new, name):
                continue
            before, after = _lines(name, getattr(old, name)), _lines(name, getattr(new, name))
        lines = _unified(before, after) or [DiffLine("ctx", "(only trailing whitespace or line endings changed)")]
        diffs.append(FieldDiff(name, LABELS[name], lines))
    return diffs

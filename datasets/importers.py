"""Parse ADK/10xgraph EvalSet JSON files into cleaned test case fields, and what every import
returns (a CSV in Evalsite's columns is datasets.csv_import).

Parsing never writes: it returns every case or raises one ValidationError listing the
problems with their row (CSV) or eval case (JSON) numbers, so an import is all or nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError

from datasets.fields import (
    EVAL_SET_EXTENSION_FIELDS,
    EVAL_SET_EXTRA_KEYS,
    EVAL_SET_SCENARIO_KEYS,
    SCORING_FIELDS,
    case_field_errors,
    case_fields_clean,
    invocation_ids,
    scoring_fields_clean,
)
from evalsite.text import contains_nul

# How many problems to list before summarising the rest.
MAX_LISTED_ERRORS = 15


@dataclass
class ParsedFile:
    cases: list[dict[str, Any]]
    name: str = ""
    description: str = ""
    scoring: dict[str, Any] = field(default_factory=dict)
    # Columns that name no field: their cells are kept on each case as metadata.
    ignored_columns: list[str] = field(default_factory=list)
    eval_set_id: str = ""
    # Cases of the file that were not imported, each with the reason ("Eval case 3 (plan-b): ...").
    skipped: list[str] = field(default_factory=list)
    # What the import changed or doubts: [{"where": "row 4", "message": ...}].
    warnings: list[dict[str, str]] = field(default_factory=list)


@dataclass
class ImportResult:
    created: int = 0
    updated: int = 0
    ignored_columns: list[str] = field(default_factory=list)  # kept on each case as metadata
    # Cases of the file that were not imported, each with its reason (importers.ParsedFile.skipped).
    skipped: list[str] = field(default_factory=list)
    warnings: list[dict[str, str]] = field(default_factory=list)

    @property
    def level(self) -> str:
        """How the message is shown: a warning when something in the file was left out or doubted."""
        return "warning" if self.skipped or self.warnings else "success"

    @property
    def message(self) -> str:
        total = self.created + self.updated
        noun = "test case" if total == 1 else "test cases"
        text = f"Imported {total} {noun}"
        if self.updated:
            text += f" ({self.created} new, {self.updated} updated by case_id)"
        text += "."
        if self.ignored_columns:
            # The message travels in the HX-Trigger header: a file with thousands of columns
            # must not make a header bigger than a proxy accepts (nginx answers 502).
            shown = [name if len(name) <= 40 else name[:39] + "…" for name in self.ignored_columns[:10]]
            more = len(self.ignored_columns) - len(shown)
            text += f" Kept as case metadata: {', '.join(shown)}{f' and {more} more' if more else ''}."
        if self.skipped:
            # Cut like the columns above: the message travels in a header.
            listed = [item if len(item) <= 200 else item[:199] + "…" for item in self.skipped[:5]]
            more = len(self.skipped) - len(listed)
            noun = "case was" if len(self.skipped) == 1 else "cases were"
            text += f" {len(self.skipped)} {noun} skipped: {' '.join(listed)}{f' …and {more} more.' if more else ''}"
        if self.warnings:
            # The first one is said here, where the person is (the toast, the API's answer); all
            # are on the dataset page. Cut, as the message travels in a header.
            count, first = len(self.warnings), self.warnings[0]
            said = f"{first['where']}: {first['message']}" if first.get("where") else first["message"]
            said = said if len(said) <= 160 else said[:159] + "…"
            text += f" {count} warning{'s' if count != 1 else ''} (see the dataset page), the first: {said}"
        return text


def refusal(problems: list[str]) -> ValidationError:
    listed = problems[:MAX_LISTED_ERRORS]
    if len(problems) > MAX_LISTED_ERRORS:
        listed.append(f"…and {len(problems) - MAX_LISTED_ERRORS} more problems. Nothing was imported.")
    return ValidationError(listed)


def case_count_check(count: int) -> None:
    limit = settings.EVALSITE_MAX_CASES_PER_DOCUMENT
    if count > limit:
        raise ValidationError(
            f"The file has {count} test cases; at most {limit} can be imported from one file. "
            "Split it into smaller files."
        )
    if count == 0:
        raise ValidationError("The file has no test cases.")


def _decode(data: bytes) -> str:
    try:
        # utf-8-sig drops the byte order mark an editor may write.
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationError(
            f"The file is not UTF-8 text (byte {exc.start + 1} is invalid). Save or export it as UTF-8."
        ) from None
    if "\x00" in text:
        raise ValidationError("The file contains NUL bytes, so it is not valid JSON text.")
    return text


def file_kind(name: str, data: bytes) -> str:
    """ "json" or "csv", from the extension, else from the first character."""
    suffix = PurePath(name).suffix.lower()
    if suffix == ".json":
        return "json"
    if suffix in (".csv", ".tsv", ".txt"):
        return "csv"
    return "json" if data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"[") else "csv"


# ---- EvalSet JSON ----------------------------------------------------------------


def _object(value: Any) -> dict[str, Any]:
    """The value when it is a JSON object, else {}: our "evalsite" blocks are optional in a file."""
    return value if isinstance(value, dict) else {}


def _get(mapping: Any, snake: str, default: Any = None) -> Any:
    """ADK writes snake_case files but its models also accept camelCase aliases."""
    if not isinstance(mapping, dict):
        return default
    if snake in mapping:
        return mapping[snake]
    parts = snake.split("_")
    camel = parts[0] + "".join(part.title() for part in parts[1:])
    return mapping.get(camel, default)


def _content_text(content: Any) -> str:
    """Text of a genai Content ({"role", "parts": [{"text"}]}), or a plain string."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        parts = content.get("parts")
        if isinstance(parts, list):
            return "\n".join(
                part["text"] for part in parts if isinstance(part, dict) and isinstance(part.get("text"), str)
            )
        if isinstance(content.get("text"), str):
            return content["text"]
    raise ValueError("expected text or a content object with parts[].text")


def _tool_uses(invocation: dict) -> list:
    intermediate = _get(invocation, "intermediate_data") or {}
    uses = _get(intermediate, "tool_uses")
    if uses is None:
        uses = _get(invocation, "expected_tool_trajectory")
    if uses is None:
        return []
    if not isinstance(uses, list):
        raise ValueError("tool_uses must be a list")
    return uses


def _case_from_eval_case(item: Any) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise ValueError("expected an object")
    conversation = _get(item, "conversation") or []
    if not isinstance(conversation, list):
        raise ValueError("conversation must be a list of invocations")
    exchanges: list[tuple[str, str]] = []
    tools: list = []
    for invocation in conversation:
        if not isinstance(invocation, dict):
            raise ValueError("each conversation entry must be an object")
        reply = _get(invocation, "final_response")
        if reply is None:
            reply = _get(invocation, "expected_final_response")
        exchanges.append((_content_text(_get(invocation, "user_content")), _content_text(reply)))
        tools.extend(_tool_uses(invocation))
    scenario = _get(item, "conversation_scenario")
    if scenario is not None and not conversation:
        return _case_from_scenario(item, scenario)
    if not exchanges:
        # Flat cases: {"query"|"question"|"input", "expected_final_response"|"reference"}.
        question = next((item[key] for key in ("query", "question", "input") if key in item), "")
        exchanges.append((_content_text(question), ""))
    question, expected = exchanges[-1]
    case_expected = _get(item, "expected_final_response", _get(item, "reference"))
    if not expected and case_expected is not None:
        expected = _content_text(case_expected)
    for key in ("expected_tool_trajectory", "expected_tool_use"):
        if not tools and _get(item, key):
            tools = _get(item, key)

    extension = _object(item.get("evalsite"))
    eval_id = str(_get(item, "eval_id") or "")
    fields: dict[str, Any] = {
        # Our own exports say when a case had no stable id (eval_id was made up on export).
        "case_id": extension["case_id"] if "case_id" in extension else eval_id,
        "question": question,
        "expected_answer": expected,
        "turns": [{"user": user, "expected": reply} for user, reply in exchanges[:-1]],
        "expected_tools": tools,
        "tags": item.get("tags") or [],
    }
    fields.update({key: extension[key] for key in EVAL_SET_EXTENSION_FIELDS if key in extension})
    extra = {key: _get(item, key) for key in EVAL_SET_EXTRA_KEYS if _get(item, key) is not None}
    ids = [str(_get(invocation, "invocation_id") or "") for invocation in conversation]
    if ids and all(ids) and ids != invocation_ids(fields["case_id"] or eval_id, len(ids)):
        # The file's own invocation ids, written back on export (ours are derived from the eval_id).
        extra["invocation_ids"] = ids
    if extra:
        fields["extra"] = extra
    return fields


def _case_from_scenario(item: dict[str, Any], scenario: Any) -> dict[str, Any]:
    """ADK's user-simulator case: its starting prompt is the question, its plan the scenario's.

    Our own export also carries the whole scenario (goal, persona, turns, criteria) in the
    "evalsite" object; a scenario's other keys are kept in extra and written back on export.
    """
    if not isinstance(scenario, dict):
        raise ValueError("conversation_scenario must be an object with a starting_prompt and a conversation_plan")
    extension = _object(item.get("evalsite"))
    eval_id = str(_get(item, "eval_id") or "")
    fields: dict[str, Any] = {
        "case_id": extension["case_id"] if "case_id" in extension else eval_id,
        "question": _content_text(_get(scenario, "starting_prompt")),
        "scenario": {"plan": _get(scenario, "conversation_plan") or ""},
        "tags": item.get("tags") or [],
    }
    fields.update({key: extension[key] for key in EVAL_SET_EXTENSION_FIELDS if key in extension})
    extra = {key: _get(item, key) for key in EVAL_SET_EXTRA_KEYS if _get(item, key) is not None}
    known = {*EVAL_SET_SCENARIO_KEYS, "startingPrompt", "conversationPlan"}
    others = {key: value for key, value in scenario.items() if key not in known}
    if others:
        extra["conversation_scenario"] = others
    if extra:
        fields["extra"] = extra
    return fields


def _eval_cases(document: Any) -> tuple[list, dict]:
    if isinstance(document, list):
        # A bare list of eval cases, or ADK's older *.test.json list of {"query", ...}.
        return document, {}
    if isinstance(document, dict):
        cases = _get(document, "eval_cases")
        if isinstance(cases, list):
            return cases, document
    raise ValidationError(
        "This JSON is not an eval set: expected an object with an “eval_cases” list "
        "(ADK/10xgraph EvalSet) or a list of eval cases."
    )


def parse_eval_set(data: bytes) -> ParsedFile:
    """Cases from an ADK or 10xgraph EvalSet (or a bare list of eval cases).

    A conversation's last invocation becomes the question and expected answer; earlier
    invocations become `turns`; tool uses of every invocation, in order, become the
    expected tool trajectory.
    """
    text = _decode(data)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(
            f"The file is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})."
        ) from None
    except RecursionError:
        raise ValidationError("The JSON is nested too deeply to read.") from None
    if contains_nul(document):
        raise ValidationError(
            "The file contains a NUL character (written \\u0000), which a test case cannot hold. "
            "Remove it and try again."
        )
    raw_cases, envelope = _eval_cases(document)
    case_count_check(len(raw_cases))

    cases: list[dict[str, Any]] = []
    skipped: list[str] = []
    problems: list[str] = []
    case_ids: dict[str, int] = {}
    for number, item in enumerate(raw_cases, start=1):
        label = f"Eval case {number}"
        if isinstance(item, dict) and _get(item, "eval_id"):
            label += f" ({_get(item, 'eval_id')})"
        try:
            fields = case_fields_clean(_case_from_eval_case(item))
        except ValueError as exc:
            problems.append(f"{label}: {exc}.")
            continue
        except ValidationError as exc:
            problems.extend(case_field_errors(label, exc))
            continue
        case_id = fields.get("case_id", "")
        if case_id in case_ids:
            problems.append(f"{label}: eval_id “{case_id}” is already used by eval case {case_ids[case_id]}.")
            continue
        if case_id:
            case_ids[case_id] = number
        cases.append(fields)
    if problems:
        raise refusal(problems)

    extension = _object(envelope.get("evalsite"))
    scoring = _object(extension.get("scoring"))
    try:
        scoring = scoring_fields_clean({key: value for key, value in scoring.items() if key in SCORING_FIELDS})
    except ValidationError as exc:
        raise refusal(
            [f"evalsite.scoring.{name}: {' '.join(msgs)}" for name, msgs in exc.message_dict.items()]
        ) from None
    name = _get(envelope, "name") or _get(envelope, "eval_set_id") or ""
    description = _get(envelope, "description") or ""
    eval_set_id = _get(envelope, "eval_set_id")
    return ParsedFile(
        cases=cases,
        name=str(name)[:120],
        description=description if isinstance(description, str) else "",
        scoring=scoring,
        eval_set_id=eval_set_id[:200] if isinstance(eval_set_id, str) else "",
        skipped=skipped,
    )

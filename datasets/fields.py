"""What a test case and a dataset's scoring settings consist of: the one list of their fields.

A leaf of the datasets app (it imports only datasets.models): services, forms,
exporters, importers and runs all take the field names, labels, cleaners and CSV cells
from here, so adding a case field means adding one `CaseField` to `CASE_FIELDS`.

`case_fields_clean` is the one place where test case fields are normalised; the form,
the JSON API, the importers, extraction and AI generation all go through it (directly,
or through `datasets.services` `case_create` / `case_bulk_create` / `case_update`).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError

from datasets.models import ALIGNMENT_MAX, RESAMPLES_MAX, TestCase

MAX_TEXT_CHARS = 200_000
MAX_TURNS = 50
MAX_TOOLS = 50
MAX_CONTEXT_CHUNKS = 50
MAX_TAGS = 20
MAX_TAG_CHARS = 50
SCENARIO_DEFAULT_TURNS = 10
SCENARIO_MAX_TURNS = 30
# A scenario case's own settings (TestCase.scenario); its starting prompt is the question.
SCENARIO_KEYS = ("goal", "plan", "persona", "max_turns", "success_criteria")

NO_EXPECTED_ANSWER = "No expected answer"  # the start of the import warning (extraction/tables.py)


# ---- cleaners: raise ValueError with a message for the person ------------------------


# "\t=1+1": the tab a spreadsheet user types so the cell is not run as a formula. It is
# part of what they typed, so it is kept (exports neutralise the cell either way).
_TAB_BEFORE_FORMULA = re.compile(r"^\t+[=+\-@]")


def clean_text(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError("Enter text.")
    value = value.replace("\r\n", "\n")
    value = value.rstrip() if _TAB_BEFORE_FORMULA.match(value) else value.strip()
    if len(value) > MAX_TEXT_CHARS:
        raise ValueError(f"Keep this under {MAX_TEXT_CHARS:,} characters (it has {len(value):,}).")
    return value


def clean_line(value: Any, max_length: int) -> str:
    value = clean_text(value).lstrip("\t")
    if "\n" in value or "\t" in value:
        raise ValueError("Use a single line.")
    if len(value) > max_length:
        raise ValueError(f"Use at most {max_length} characters (it has {len(value)}).")
    return value


def _json_list(value: Any) -> list:
    """Lists arrive as lists (API, code) or as JSON text (CSV cells)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"This is not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno}).") from None
    if not isinstance(value, list):
        raise ValueError("Enter a list.")
    return value


def clean_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "y", "on"):
        return True
    if text in ("", "0", "false", "no", "n", "off"):
        return False
    raise ValueError("Enter true or false.")


def _bounded_int(value: Any, low: int, high: int) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ValueError(f"Enter a whole number from {low} to {high}.") from None
    if not low <= number <= high:
        raise ValueError(f"Enter a whole number from {low} to {high}.")
    return number


def _turns(value: Any) -> list[dict[str, str]]:
    if value in (None, ""):
        return []
    turns = []
    for number, item in enumerate(_json_list(value), start=1):
        if isinstance(item, str):
            item = {"user": item}
        if not isinstance(item, Mapping):
            raise ValueError(f"Turn {number}: expected an object with a user message.")
        user = clean_text(item.get("user"))
        expected = clean_text(item.get("expected"))
        if not user:
            raise ValueError(f"Turn {number}: the user message is empty.")
        turns.append({"user": user, "expected": expected})
    if len(turns) > MAX_TURNS:
        raise ValueError(f"Use at most {MAX_TURNS} turns.")
    return turns


def _tool_args(raw: Any, number: int) -> dict:
    if raw in (None, ""):
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(f"Tool {number}: the arguments are not valid JSON ({exc.msg}).") from None
    if not isinstance(raw, Mapping):
        raise ValueError(f'Tool {number}: the arguments must be a JSON object, like {{"order_id": "A-1"}}.')
    return dict(raw)


def _tools(value: Any) -> list[dict[str, Any]]:
    if value in (None, ""):
        return []
    if isinstance(value, str) and not value.lstrip().startswith("["):
        # "search_kb, create_ticket": names only.
        value = [name for name in (part.strip() for part in value.replace("\n", ",").split(",")) if name]
    tools = []
    for number, item in enumerate(_json_list(value), start=1):
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, Mapping):
            raise ValueError(f"Tool {number}: expected an object with a name.")
        # Accept the ADK spellings too ({"tool_name", "tool_input"}) and OpenAI's "arguments".
        name = item.get("name", item.get("tool_name"))
        args = item.get("args", item.get("tool_input", item.get("arguments")))
        try:
            name = clean_line(name, 200)
        except ValueError as exc:
            raise ValueError(f"Tool {number}: {exc}") from None
        if not name:
            raise ValueError(f"Tool {number}: the tool name is empty.")
        tools.append({"name": name, "args": _tool_args(args, number)})
    if len(tools) > MAX_TOOLS:
        raise ValueError(f"Use at most {MAX_TOOLS} expected tools.")
    return tools


def _chunks(value: Any) -> list[str]:
    if value in (None, ""):
        return []
    if isinstance(value, str):
        value = _json_list(value) if value.lstrip().startswith("[") else [value]
    chunks = []
    for number, item in enumerate(_json_list(value), start=1):
        if not isinstance(item, str):
            raise ValueError(f"Chunk {number}: enter text.")
        text = clean_text(item)
        if text:
            chunks.append(text)
    if len(chunks) > MAX_CONTEXT_CHUNKS:
        raise ValueError(f"Use at most {MAX_CONTEXT_CHUNKS} context chunks.")
    return chunks


def _tags(value: Any) -> list[str]:
    if value in (None, ""):
        return []
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list | tuple):
        raise ValueError("Enter a list of tags.")
    tags: list[str] = []
    for item in value:
        if not isinstance(item, str):
            raise ValueError("Tags must be text.")
        tag = " ".join(item.split())
        if "," in tag:
            raise ValueError(f"Tags cannot contain commas ({tag!r}).")
        if len(tag) > MAX_TAG_CHARS:
            raise ValueError(f"Keep each tag under {MAX_TAG_CHARS} characters.")
        if tag and tag not in tags:
            tags.append(tag)
    if len(tags) > MAX_TAGS:
        raise ValueError(f"Use at most {MAX_TAGS} tags.")
    return tags


def _smoke_count(value: Any) -> int | None:
    if value in (None, ""):
        return None
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ValueError("Enter a whole number from 1 to 10, or leave it empty.") from None
    if not 1 <= number <= 10:
        raise ValueError("Enter a whole number from 1 to 10, or leave it empty.")
    return number


def _trajectory_mode(value: Any) -> str:
    if value in (None, ""):
        return TestCase.TrajectoryMode.STRICT
    mode = str(value).strip().lower()
    if mode not in TestCase.TrajectoryMode.values:
        raise ValueError(f"Choose one of: {', '.join(TestCase.TrajectoryMode.values)}.")
    return mode


def clean_scenario(value: Any) -> dict[str, Any]:
    """A user-simulator scenario: {"goal", "plan", "persona", "max_turns", "success_criteria"},
    or {} for a scripted case. It needs the user's goal or plan; max_turns is 1-30 (default 10)."""
    if value in (None, "", {}):
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"This is not valid JSON ({exc.msg}).") from None
    if not isinstance(value, Mapping):
        raise ValueError("Expected an object with the user's goal and plan.")
    unknown = sorted(str(key) for key in value if key not in SCENARIO_KEYS)
    if unknown:
        raise ValueError(f"Unknown scenario key{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}.")
    texts = {key: clean_text(value.get(key)) for key in ("goal", "plan", "persona", "success_criteria")}
    turns = value.get("max_turns")
    if turns in (None, ""):
        max_turns = SCENARIO_DEFAULT_TURNS
    else:
        try:
            max_turns = _bounded_int(turns, 1, SCENARIO_MAX_TURNS)
        except ValueError:
            raise ValueError(f"Maximum turns: enter a whole number from 1 to {SCENARIO_MAX_TURNS}.") from None
    if not texts["goal"] and not texts["plan"]:
        # A turn limit alone (the form shows the saved one) is no scenario: clearing the texts removes it.
        if texts["persona"] or texts["success_criteria"]:
            raise ValueError("Describe the simulated user's goal or plan, or clear the scenario.")
        return {}
    return {**texts, "max_turns": max_turns}


def _extra(value: Any) -> dict:
    if value in (None, ""):
        return {}
    if not isinstance(value, Mapping):
        raise ValueError("Expected an object.")
    return dict(value)


def _metadata(value: Any) -> dict[str, str]:
    """Unmapped source columns: {header: text}, both kept as text."""
    if value in (None, ""):
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"This is not valid JSON ({exc.msg}).") from None
    if not isinstance(value, Mapping):
        raise ValueError("Expected an object of column names and values.")
    return {str(k)[:100]: clean_text(item if isinstance(item, str) else json.dumps(item)) for k, item in value.items()}


def _warnings(value: Any) -> list[str]:
    if value in (None, ""):
        return []
    return [clean_text(item) for item in _json_list(value) if isinstance(item, str) and item.strip()]


# ---- CSV cells ---------------------------------------------------------------------------


def _json_cell(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if value else ""


def _text_cell(value: str) -> str:
    return value


def _tags_cell(value: list[str]) -> str:
    return ", ".join(value)


def _bool_cell(value: bool) -> str:
    return "true" if value else "false"


def _count_cell(value: int | None) -> str:
    return "" if value is None else str(value)


# ---- the case fields ---------------------------------------------------------------------


@dataclass(frozen=True)
class CaseField:
    name: str
    label: str  # as the case form shows it: messages name fields the way people see them
    clean: Callable[[Any], Any]
    # "editable": a person edits it (form, API); "provenance": written only by importers and
    # jobs; "internal": kept for round trips (TestCase.extra), never shown as a column.
    group: str
    cell: Callable[[Any], str] = _text_cell  # how the CSV export writes the value
    # The EvalSet shape has a place of its own for it (eval_id, conversation, tags); the
    # others travel in the eval case's "evalsite" object.
    in_eval_set: bool = False


def _line(max_length: int) -> Callable[[Any], str]:
    return functools.partial(clean_line, max_length=max_length)


# In CSV column order: the export writes them so, and the import reads them by header.
CASE_FIELDS: tuple[CaseField, ...] = (
    CaseField("case_id", "Case id", _line(100), "editable", in_eval_set=True),
    CaseField("question", "Question", clean_text, "editable", in_eval_set=True),
    CaseField("expected_answer", "Expected answer", clean_text, "editable", in_eval_set=True),
    CaseField("document_context", "Document context", clean_text, "editable"),
    CaseField("tags", "Tags", _tags, "editable", _tags_cell, in_eval_set=True),
    CaseField("judge_guideline", "Judge guideline", clean_text, "editable"),
    CaseField("expected_tools", "Expected tools", _tools, "editable", _json_cell, in_eval_set=True),
    CaseField("trajectory_mode", "Trajectory match", _trajectory_mode, "editable"),
    CaseField("check_tool_args", "Check tool arguments", clean_bool, "editable", _bool_cell),
    CaseField("expected_context", "Expected retrieval context", _chunks, "editable", _json_cell),
    CaseField("turns", "Earlier turns", _turns, "editable", _json_cell, in_eval_set=True),
    CaseField("smoke_count", "Smoke-test paraphrases", _smoke_count, "editable", _count_cell),
    CaseField("smoke_guidance", "Paraphrase guidance", clean_text, "editable"),
    CaseField("scenario", "Scenario (simulated user)", clean_scenario, "editable", _json_cell),
    CaseField("tests_rule", "Tests rule", _line(300), "provenance"),
    CaseField("source_file", "Source file", _line(255), "provenance"),
    CaseField("source_location", "Source location", _line(100), "provenance"),
    CaseField("source_span", "Source span", clean_text, "provenance"),
    CaseField("metadata", "Metadata", _metadata, "provenance", _json_cell),
    CaseField("import_warnings", "Import warnings", _warnings, "provenance", _json_cell),
    CaseField("extra", "Extra", _extra, "internal"),
)

CASE_FIELD_NAMES = tuple(f.name for f in CASE_FIELDS)
# Fields a person may edit (form, API); provenance is written only by importers and jobs.
CASE_EDITABLE_FIELDS = tuple(f.name for f in CASE_FIELDS if f.group == "editable")
CSV_FIELDS = tuple(f for f in CASE_FIELDS if f.group != "internal")
# Keys of the "evalsite" object on an exported eval case (what the EvalSet shape has no place for).
EVAL_SET_EXTENSION_FIELDS = tuple(f.name for f in CSV_FIELDS if not f.in_eval_set)

# Eval-set fields Evalsite keeps in TestCase.extra and writes back on export.
EVAL_SET_EXTRA_KEYS = ("session_input", "expected_node_order")
# The keys of an EvalSet conversation_scenario that map to fields; any others are kept in
# TestCase.extra["conversation_scenario"] and written back on export.
EVAL_SET_SCENARIO_KEYS = ("starting_prompt", "conversation_plan")

_BY_NAME = {f.name: f for f in CASE_FIELDS}


def case_field_label(name: str) -> str:
    field = _BY_NAME.get(name)
    return field.label if field else name.replace("_", " ").capitalize()


def case_field_errors(where: str, error: ValidationError) -> list[str]:
    """case_fields_clean's errors as lines that say where: "Row 4: Expected tools: ..."."""
    return [f"{where}: {case_field_label(name)}: {' '.join(messages)}" for name, messages in error.message_dict.items()]


def case_fields_clean(data: Mapping[str, Any], *, partial: bool = False) -> dict[str, Any]:
    """Validate and normalise test case fields from any source.

    Accepts lists as lists or as JSON text, tags as a list or "a, b", expected tools as
    [{"name", "args"}] (or ADK's {"tool_name", "tool_input"}, or bare names), and booleans
    as text. Returns the cleaned values of the keys given; with partial=False the question
    is required. Raises ValidationError({field: [message]}) naming every bad field.
    """
    cleaned: dict[str, Any] = {}
    errors: dict[str, list[str]] = {}
    for key, value in data.items():
        field = _BY_NAME.get(key)
        if field is None:
            errors[key] = ["Unknown field."]
            continue
        try:
            cleaned[key] = field.clean(value)
        except ValueError as exc:
            errors[key] = [str(exc)]
    if ("question" in data or not partial) and not cleaned.get("question") and "question" not in errors:
        errors["question"] = ["Write the question the agent should answer."]
    if errors:
        raise ValidationError(errors)
    return cleaned


def invocation_ids(eval_id: str, count: int) -> list[str]:
    """The ids Evalsite gives a case's invocations when the file it came from had none."""
    return [f"{eval_id}-turn-{index}" for index in range(1, count + 1)]


# ---- a dataset's scoring settings -----------------------------------------------------

# Each setting and its cleaner; runs copy these into Run.scoring, EvalSet files carry them.
SCORING_CLEANERS: dict[str, Callable[[Any], Any]] = {
    "acceptance_criteria": clean_text,
    "rejection_criteria": clean_text,
    "evaluation_criteria": clean_text,
    "judge_model": _line(200),
    "judge_prompt": clean_text,
    "pass_threshold": functools.partial(_bounded_int, low=0, high=10),
    "number_of_requests": functools.partial(_bounded_int, low=1, high=10),
    "judge_resamples": functools.partial(_bounded_int, low=0, high=RESAMPLES_MAX),
    "alignment_examples": functools.partial(_bounded_int, low=0, high=ALIGNMENT_MAX),
    "jaccard_enabled": clean_bool,
    "vector_enabled": clean_bool,
    "context_gates": clean_bool,
}
SCORING_FIELDS = tuple(SCORING_CLEANERS)


def scoring_fields_clean(data: Mapping[str, Any]) -> dict[str, Any]:
    """Validate scoring settings (criteria, judge model and prompt, threshold 0-10,
    repeats 1-10, similarity switches). Raises ValidationError({field: [message]})."""
    cleaned: dict[str, Any] = {}
    errors: dict[str, list[str]] = {}
    for key, value in data.items():
        cleaner = SCORING_CLEANERS.get(key)
        if cleaner is None:
            errors[key] = ["Unknown setting."]
            continue
        try:
            cleaned[key] = cleaner(value)
        except ValueError as exc:
            errors[key] = [str(exc)]
    if errors:
        raise ValidationError(errors)
    return cleaned


def dataset_name_clean(name: Any) -> str:
    name = " ".join(str(name or "").split())
    if not name:
        raise ValidationError({"name": ["Give the dataset a name."]})
    if len(name) > 120:
        raise ValidationError({"name": [f"Use at most 120 characters (it has {len(name)})."]})
    return name


# ---- spreadsheet formulas (check 15 in docs/architecture.md) ------------------------------

# A spreadsheet treats a cell starting with one of these as a formula (OWASP CSV injection).
FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r", "\n")


def neutralise(value: str) -> str:
    """Prefix "'" to a cell that a spreadsheet would run as a formula.

    A cell that already starts with "'" followed by a trigger (or another "'") gets one
    more, so `unneutralise`, which strips exactly one, gives back the original text.
    """
    if value[:1] in FORMULA_TRIGGERS and value:
        return "'" + value
    if value[:1] == "'" and len(value) > 1 and (value[1] in FORMULA_TRIGGERS or value[1] == "'"):
        return "'" + value
    return value


def unneutralise(value: str) -> str:
    """Undo `neutralise` on an imported cell, so export -> import gives back the same text."""
    if len(value) > 1 and value[0] == "'" and (value[1] in FORMULA_TRIGGERS or value[1] == "'"):
        return value[1:]
    return value

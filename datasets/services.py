"""Every write to datasets and test cases.

`case_fields_clean` is the one place where test case fields are normalised; the
form, the JSON API, the importers, extraction and AI generation all go through it
(directly, or through `case_create` / `case_bulk_create` / `case_update`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import UploadedFile
from django.db import IntegrityError, transaction
from django.db.models import Max, Q
from django.utils import timezone

from agents.models import Agent
from datasets.models import ALIGNMENT_MAX, RESAMPLES_MAX, Dataset, Document, TestCase

MAX_TEXT_CHARS = 200_000
MAX_TURNS = 50
MAX_TOOLS = 50
MAX_CONTEXT_CHUNKS = 50
MAX_TAGS = 20
MAX_TAG_CHARS = 50

# Fields a person may edit (form, API); provenance is written only by importers and jobs.
CASE_EDITABLE_FIELDS = (
    "question",
    "expected_answer",
    "document_context",
    "case_id",
    "turns",
    "expected_tools",
    "trajectory_mode",
    "check_tool_args",
    "expected_context",
    "judge_guideline",
    "tags",
    "smoke_count",
    "smoke_guidance",
)
CASE_PROVENANCE_FIELDS = (
    "tests_rule",
    "source_file",
    "source_location",
    "source_span",
    "metadata",
    "import_warnings",
)
CASE_FIELDS = CASE_EDITABLE_FIELDS + CASE_PROVENANCE_FIELDS + ("extra",)

_TEXT_FIELDS = (
    "question",
    "expected_answer",
    "document_context",
    "judge_guideline",
    "smoke_guidance",
    "source_span",
)
_SHORT_FIELDS = {"case_id": 100, "tests_rule": 300, "source_file": 255, "source_location": 100}

NO_EXPECTED_ANSWER = "No expected answer"  # the start of the import warning (extraction/tables.py)

SCORING_FIELDS = (
    "acceptance_criteria",
    "rejection_criteria",
    "evaluation_criteria",
    "judge_model",
    "judge_prompt",
    "pass_threshold",
    "number_of_requests",
    "jaccard_enabled",
    "vector_enabled",
    "judge_resamples",
    "alignment_examples",
)
# Called with the dataset after its scoring settings changed. runs registers the hook that makes
# the dataset's new judge configuration (runs.judging), since datasets may not import runs.
_scoring_changed_hooks: list[Callable[[Dataset], None]] = []


def register_scoring_changed_hook(hook: Callable[[Dataset], None]) -> None:
    if hook not in _scoring_changed_hooks:
        _scoring_changed_hooks.append(hook)


# ---- field normalisation -------------------------------------------------------


def _text(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError("Enter text.")
    value = value.replace("\r\n", "\n").strip()
    if len(value) > MAX_TEXT_CHARS:
        raise ValueError(f"Keep this under {MAX_TEXT_CHARS:,} characters (it has {len(value):,}).")
    return value


def _short(value: Any, max_length: int) -> str:
    value = _text(value)
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


def _bool(value: Any) -> bool:
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


def _turns(value: Any) -> list[dict[str, str]]:
    if value in (None, ""):
        return []
    turns = []
    for number, item in enumerate(_json_list(value), start=1):
        if isinstance(item, str):
            item = {"user": item}
        if not isinstance(item, Mapping):
            raise ValueError(f"Turn {number}: expected an object with a user message.")
        user = _text(item.get("user"))
        expected = _text(item.get("expected"))
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
            name = _short(name, 200)
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
        text = _text(item)
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
    return {str(key)[:100]: _text(item if isinstance(item, str) else json.dumps(item)) for key, item in value.items()}


def _warnings(value: Any) -> list[str]:
    if value in (None, ""):
        return []
    return [_text(item) for item in _json_list(value) if isinstance(item, str) and item.strip()]


_CLEANERS: dict[str, Callable[[Any], Any]] = {
    **{name: _text for name in _TEXT_FIELDS},
    **{name: functools.partial(_short, max_length=n) for name, n in _SHORT_FIELDS.items()},
    "turns": _turns,
    "expected_tools": _tools,
    "trajectory_mode": _trajectory_mode,
    "check_tool_args": _bool,
    "expected_context": _chunks,
    "tags": _tags,
    "smoke_count": _smoke_count,
    "extra": _extra,
    "metadata": _metadata,
    "import_warnings": _warnings,
}


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
        cleaner = _CLEANERS.get(key)
        if cleaner is None:
            errors[key] = ["Unknown field."]
            continue
        try:
            cleaned[key] = cleaner(value)
        except ValueError as exc:
            errors[key] = [str(exc)]
    if ("question" in data or not partial) and not cleaned.get("question") and "question" not in errors:
        errors["question"] = ["Write the question the agent should answer."]
    if errors:
        raise ValidationError(errors)
    return cleaned


# How the case form labels each field: messages name fields the way people see them.
CASE_FIELD_LABELS = {
    "question": "Question",
    "expected_answer": "Expected answer",
    "document_context": "Document context",
    "case_id": "Case id",
    "turns": "Earlier turns",
    "expected_tools": "Expected tools",
    "trajectory_mode": "Trajectory match",
    "check_tool_args": "Check tool arguments",
    "expected_context": "Expected retrieval context",
    "judge_guideline": "Judge guideline",
    "tags": "Tags",
    "smoke_count": "Smoke-test paraphrases",
    "smoke_guidance": "Paraphrase guidance",
}


def case_field_label(name: str) -> str:
    return CASE_FIELD_LABELS.get(name) or name.replace("_", " ").capitalize()


def dataset_name_clean(name: Any) -> str:
    name = " ".join(str(name or "").split())
    if not name:
        raise ValidationError({"name": ["Give the dataset a name."]})
    if len(name) > 120:
        raise ValidationError({"name": [f"Use at most 120 characters (it has {len(name)})."]})
    return name


def scoring_fields_clean(data: Mapping[str, Any]) -> dict[str, Any]:
    """Validate scoring settings (criteria, judge model and prompt, threshold 0-10, repeats 1-10,
    similarity switches, judge re-samples 0-4, alignment examples 0-10).
    Raises ValidationError({field: [message]})."""
    cleaned: dict[str, Any] = {}
    errors: dict[str, list[str]] = {}
    for key, value in data.items():
        try:
            if key in ("acceptance_criteria", "rejection_criteria", "evaluation_criteria", "judge_prompt"):
                cleaned[key] = _text(value)
            elif key == "judge_model":
                cleaned[key] = _short(value, 200)
            elif key == "pass_threshold":
                cleaned[key] = _bounded_int(value, 0, 10)
            elif key == "number_of_requests":
                cleaned[key] = _bounded_int(value, 1, 10)
            elif key == "judge_resamples":
                cleaned[key] = _bounded_int(value, 0, RESAMPLES_MAX)
            elif key == "alignment_examples":
                cleaned[key] = _bounded_int(value, 0, ALIGNMENT_MAX)
            elif key in ("jaccard_enabled", "vector_enabled"):
                cleaned[key] = _bool(value)
            else:
                errors[key] = ["Unknown setting."]
        except ValueError as exc:
            errors[key] = [str(exc)]
    if errors:
        raise ValidationError(errors)
    return cleaned


def _bounded_int(value: Any, low: int, high: int) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ValueError(f"Enter a whole number from {low} to {high}.") from None
    if not low <= number <= high:
        raise ValueError(f"Enter a whole number from {low} to {high}.")
    return number


# ---- datasets ------------------------------------------------------------------


_NAME_TAKEN = "This agent already has a dataset named “{name}”. Choose another name."


def _check_name_free(*, agent: Agent, name: str, exclude_pk: int | None = None) -> None:
    taken = Dataset.objects.filter(agent=agent, name__iexact=name)
    if exclude_pk is not None:
        taken = taken.exclude(pk=exclude_pk)
    if taken.exists():
        raise ValidationError({"name": [_NAME_TAKEN.format(name=name)]})


@transaction.atomic
def dataset_create(
    *,
    agent: Agent,
    user: User | None,
    name: str,
    source: str = Dataset.Source.MANUAL,
    status: str = Dataset.Status.READY,
    source_name: str = "",
    description: str = "",
    generation: dict | None = None,
    agent_reads_source: bool = False,
    eval_set_id: str = "",
    **scoring: Any,
) -> Dataset:
    """A new dataset. Refuses a 101st dataset for the agent and a name the agent already uses."""
    name = dataset_name_clean(name)
    scoring = scoring_fields_clean(scoring)
    # Lock the agent row so two concurrent creates cannot both pass the limit check.
    Agent.objects.select_for_update().filter(pk=agent.pk).first()
    limit = settings.EVALSITE_MAX_DATASETS_PER_AGENT
    if Dataset.objects.filter(agent=agent).count() >= limit:
        raise ValidationError(
            f"This agent already has {limit} datasets, the most it can have. Delete one you no longer need first."
        )
    _check_name_free(agent=agent, name=name)
    dataset = Dataset(
        agent=agent,
        name=name,
        description=_text(description),
        source=source,
        status=status,
        source_name=source_name[:255],
        generation=generation or {},
        agent_reads_source=agent_reads_source,
        eval_set_id=eval_set_id[:200],
        created_by=user if user is not None and user.is_authenticated else None,
        **scoring,
    )
    try:
        with transaction.atomic():
            dataset.save()
    except IntegrityError:
        # Lost a race with another create of the same name.
        raise ValidationError({"name": [_NAME_TAKEN.format(name=name)]}) from None
    return dataset


@transaction.atomic
def dataset_rename(*, dataset: Dataset, name: str) -> Dataset:
    name = dataset_name_clean(name)
    _check_name_free(agent=dataset.agent, name=name, exclude_pk=dataset.pk)
    dataset.name = name
    try:
        with transaction.atomic():
            dataset.save(update_fields=["name", "updated_at"])
    except IntegrityError:
        raise ValidationError({"name": [_NAME_TAKEN.format(name=name)]}) from None
    return dataset


@transaction.atomic
def dataset_update(*, dataset: Dataset, **fields: Any) -> Dataset:
    """Name, description and scoring settings in one call (the JSON API's PATCH)."""
    if "name" in fields:
        dataset_rename(dataset=dataset, name=fields.pop("name"))
    if "description" in fields:
        dataset.description = _text(fields.pop("description"))
        dataset.save(update_fields=["description", "updated_at"])
    if fields:
        dataset_update_settings(dataset=dataset, **fields)
    return dataset


def dataset_update_settings(*, dataset: Dataset, **scoring: Any) -> Dataset:
    """Scoring settings. Runs copy them when they start, so existing runs never change."""
    cleaned = scoring_fields_clean(scoring)
    for key, value in cleaned.items():
        setattr(dataset, key, value)
    dataset.save(update_fields=[*cleaned, "updated_at"])
    for hook in _scoring_changed_hooks:
        hook(dataset)
    return dataset


def dataset_delete(*, dataset: Dataset) -> None:
    """Delete the dataset, its cases and its documents (rows and files).

    Runs keep their own snapshot (RunCase rows; Run.dataset becomes NULL), so their
    results stay readable.
    """
    file_names = [name for name in Document.objects.filter(dataset=dataset).values_list("file", flat=True) if name]
    with transaction.atomic():
        dataset.delete()
        transaction.on_commit(lambda: _delete_files(file_names))


def _delete_files(names: Iterable[str]) -> None:
    from django.core.files.storage import default_storage

    for name in names:
        # A missing file is fine: the goal is that none is left behind.
        try:
            default_storage.delete(name)
        except OSError:
            pass


# ---- test cases ----------------------------------------------------------------


def _check_case_id_free(*, dataset: Dataset, case_id: str, exclude_pk: int | None = None) -> None:
    if not case_id:
        return
    taken = dataset.cases.filter(case_id=case_id)
    if exclude_pk is not None:
        taken = taken.exclude(pk=exclude_pk)
    if taken.exists():
        raise ValidationError({"case_id": [f"Another test case in this dataset already uses the id “{case_id}”."]})


def _next_position(dataset: Dataset) -> int:
    last = dataset.cases.aggregate(last=Max("position"))["last"]
    return 0 if last is None else last + 1


def _check_accepts_cases(dataset: Dataset) -> None:
    # The extraction job writes its cases in one go and, when it fails, leaves none behind;
    # cases added by hand meanwhile would be caught up in that, so they wait until it settles.
    if dataset.status == Dataset.Status.EXTRACTING:
        raise ValidationError("Test cases are still being extracted. Add or import more once the dataset is Ready.")
    if dataset.status == Dataset.Status.REVIEW:
        raise ValidationError("Confirm the column mapping of the uploaded file first: that creates its test cases.")


def _settle_with_cases(dataset: Dataset) -> None:
    """A Failed dataset that gets cases (by hand, by import) is Ready: its status follows its cases.

    The upload's failure is not forgotten: it moves to the dataset's notice, which the page shows.
    """
    if dataset.status != Dataset.Status.FAILED:
        return
    what = f"The upload of “{dataset.source_name}”" if dataset.source_name else "Building this dataset"
    reason = dataset.failure_reason or "no reason was recorded."
    history = f"{what} failed: {reason} The test cases here were added afterwards."
    dataset.notice = f"{history}\n{dataset.notice}".strip()[:4000]
    dataset.status = Dataset.Status.READY
    dataset.save(update_fields=["status", "notice", "updated_at"])


@transaction.atomic
def case_create(*, dataset: Dataset, documents: Iterable[Document] = (), **fields: Any) -> TestCase:
    """Append a test case to the dataset (not while it is Extracting)."""
    _check_accepts_cases(dataset)
    cleaned = case_fields_clean(fields)
    _check_case_id_free(dataset=dataset, case_id=cleaned.get("case_id", ""))
    case = TestCase(dataset=dataset, position=_next_position(dataset), **cleaned)
    try:
        with transaction.atomic():
            case.save()
    except IntegrityError:
        raise ValidationError({"case_id": ["Another test case in this dataset already uses this id."]}) from None
    documents = list(documents)
    if documents:
        case.documents.set(documents)
    _settle_with_cases(dataset)
    return case


@transaction.atomic
def case_bulk_create(*, dataset: Dataset, cases: list[dict[str, Any]]) -> list[TestCase]:
    """Append many cases at once (importers, extraction, generation): all or nothing.

    Each dict holds case fields and optionally "documents" (the attachments, Document
    instances) and "source_document" (the file the case was read from). Errors name the
    case's number in the list and the field's label: "Case 3: Question: ...".
    """
    new_cases: list[TestCase] = []
    documents: list[list[Document]] = []
    seen_ids: set[str] = set()
    errors: list[str] = []
    for number, raw in enumerate(cases, start=1):
        raw = dict(raw)
        documents.append(list(raw.pop("documents", [])))
        source_document = raw.pop("source_document", None)
        try:
            cleaned = case_fields_clean(raw)
        except ValidationError as exc:
            errors.extend(
                f"Case {number}: {case_field_label(field)}: {' '.join(msgs)}"
                for field, msgs in exc.message_dict.items()
            )
            continue
        case_id = cleaned.get("case_id", "")
        if case_id and case_id in seen_ids:
            errors.append(f"Case {number}: case_id: “{case_id}” is used twice.")
        seen_ids.add(case_id)
        new_cases.append(TestCase(dataset=dataset, source_document=source_document, **cleaned))
    if errors:
        raise ValidationError(errors)
    taken = set(dataset.cases.filter(case_id__in=seen_ids - {""}).values_list("case_id", flat=True))
    if taken:
        raise ValidationError([f"These case ids are already in the dataset: {', '.join(sorted(taken))}."])
    start = _next_position(dataset)
    for offset, case in enumerate(new_cases):
        case.position = start + offset
    created = TestCase.objects.bulk_create(new_cases)
    links = [
        TestCase.documents.through(testcase_id=case.pk, document_id=document.pk)
        for case, docs in zip(created, documents, strict=True)
        for document in docs
    ]
    if links:
        TestCase.documents.through.objects.bulk_create(links)
    if created:
        _settle_with_cases(dataset)
    return created


@transaction.atomic
def case_update(*, case: TestCase, **fields: Any) -> TestCase:
    """Change the given fields of a case (others stay as they are)."""
    cleaned = case_fields_clean(fields, partial=True)
    if cleaned.get("expected_answer") and case.import_warnings and "import_warnings" not in cleaned:
        # The person filled in what the import found missing: that warning no longer applies.
        cleaned["import_warnings"] = [w for w in case.import_warnings if not w.startswith(NO_EXPECTED_ANSWER)]
    if "case_id" in cleaned:
        _check_case_id_free(dataset=case.dataset, case_id=cleaned["case_id"], exclude_pk=case.pk)
    for key, value in cleaned.items():
        setattr(case, key, value)
    try:
        with transaction.atomic():
            case.save(update_fields=[*cleaned, "updated_at"])
    except IntegrityError:
        raise ValidationError({"case_id": ["Another test case in this dataset already uses this id."]}) from None
    return case


def case_delete(*, case: TestCase) -> None:
    # Runs point at their own RunCase copies (source_case is SET_NULL), so they are untouched.
    case.delete()


def case_index(*, case: TestCase) -> int:
    """The case's 0-based place in its dataset's order (position, then id)."""
    return case.dataset.cases.filter(Q(position__lt=case.position) | Q(position=case.position, id__lt=case.pk)).count()


@transaction.atomic
def case_move(*, case: TestCase, to_index: int) -> int:
    """Move the case to a 0-based place in the order (clamped); returns the place it landed.

    Positions are renumbered 0..n-1 so gaps and ties left by deletes or imports disappear.
    """
    # Lock the dataset so two moves at once cannot interleave their renumbering.
    Dataset.objects.select_for_update().filter(pk=case.dataset_id).first()
    ordered = list(
        TestCase.objects.filter(dataset_id=case.dataset_id).order_by("position", "id").only("id", "position")
    )
    ids = [item.pk for item in ordered]
    ids.remove(case.pk)
    to_index = max(0, min(to_index, len(ids)))
    ids.insert(to_index, case.pk)
    new_position = {pk: index for index, pk in enumerate(ids)}
    changed = [item for item in ordered if item.position != new_position[item.pk]]
    for item in changed:
        item.position = new_position[item.pk]
    TestCase.objects.bulk_update(changed, ["position"])
    case.position = new_position[case.pk]
    return to_index


# ---- import and export ---------------------------------------------------------


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
            count = len(self.warnings)
            text += f" {count} warning{'s' if count != 1 else ''}: see the dataset page."
        return text


def _apply_import(
    *,
    dataset: Dataset,
    cases: list[dict[str, Any]],
    ignored_columns: list[str],
    warnings: list[dict[str, str]] | None = None,
    skipped: list[str] | None = None,
    file_name: str = "",
) -> ImportResult:
    """Upsert parsed cases: a case_id already in the dataset updates that case (only the
    fields the file has), anything else is appended. The caller holds the transaction."""
    ids = [case["case_id"] for case in cases if case.get("case_id")]
    existing = {case.case_id: case for case in dataset.cases.filter(case_id__in=ids)}
    to_create: list[dict[str, Any]] = []
    to_update: list[TestCase] = []
    update_fields: set[str] = set()
    now = timezone.now()
    for fields in cases:
        current = existing.get(fields.get("case_id") or "")
        if current is None:
            to_create.append(fields)
            continue
        for key, value in fields.items():
            setattr(current, key, value)
        current.updated_at = now  # bulk_update skips auto_now
        update_fields.update(fields)
        to_update.append(current)
    if to_update:
        TestCase.objects.bulk_update(to_update, [*sorted(update_fields), "updated_at"])
    case_bulk_create(dataset=dataset, cases=to_create)
    skipped = skipped or []
    # What was skipped stays on the dataset page too, beside the other import warnings.
    kept_warnings = [*(warnings or []), *({"where": "", "message": item} for item in skipped)]
    if kept_warnings:
        named = [
            {
                "where": ", ".join(part for part in (file_name, item["where"]) if part),
                "message": item["message"],
            }
            for item in kept_warnings
        ]
        dataset.warnings = [*dataset.warnings, *named][-500:]
        dataset.save(update_fields=["warnings", "updated_at"])
    return ImportResult(
        created=len(to_create),
        updated=len(to_update),
        ignored_columns=ignored_columns,
        skipped=skipped,
        warnings=list(warnings or []),
    )


def _read_upload(file: UploadedFile) -> bytes:
    limit = settings.UPLOAD_MAX_BYTES
    if file.size is not None and file.size > limit:
        raise ValidationError(f"The file is {file.size / 1e6:.1f} MB; the limit is {limit / 1e6:.0f} MB.")
    data = file.read(limit + 1)
    if len(data) > limit:
        raise ValidationError(f"The file is larger than {limit / 1e6:.0f} MB, the limit.")
    if not data.strip():
        raise ValidationError("The submitted file is empty.")
    return data


def dataset_import_csv(*, dataset: Dataset, file: UploadedFile) -> ImportResult:
    """Import a CSV into the dataset: all rows or none."""
    from datasets.importers import parse_csv

    _check_accepts_cases(dataset)
    parsed = parse_csv(_read_upload(file))
    with transaction.atomic():
        return _apply_import(
            dataset=dataset,
            cases=parsed.cases,
            ignored_columns=parsed.ignored_columns,
            warnings=parsed.warnings,
            file_name=file.name or "",
        )


def dataset_import_json(*, dataset: Dataset, file: UploadedFile) -> ImportResult:
    """Import an ADK/10xgraph EvalSet JSON into the dataset: all cases or none."""
    from datasets.importers import parse_eval_set

    _check_accepts_cases(dataset)
    parsed = parse_eval_set(_read_upload(file))
    with transaction.atomic():
        if parsed.eval_set_id and not dataset.eval_set_id:
            Dataset.objects.filter(pk=dataset.pk).update(eval_set_id=parsed.eval_set_id)
            dataset.eval_set_id = parsed.eval_set_id
        return _apply_import(
            dataset=dataset, cases=parsed.cases, ignored_columns=[], skipped=parsed.skipped, file_name=file.name or ""
        )


def dataset_create_from_file(
    *, agent: Agent, user: User | None, name: str, file: UploadedFile
) -> tuple[Dataset, ImportResult]:
    """A new dataset filled from a CSV or EvalSet JSON file, in one transaction: a bad
    file leaves no empty dataset behind. An empty name falls back to the eval set's name
    or the file name."""
    from datasets.importers import file_kind, parse_csv, parse_eval_set

    data = _read_upload(file)
    kind = file_kind(file.name or "", data)
    parsed = parse_eval_set(data) if kind == "json" else parse_csv(data)
    scoring = parsed.scoring if kind == "json" else {}
    with transaction.atomic():
        dataset = dataset_create(
            agent=agent,
            user=user,
            # A fallback name is cut to the limit: the user never typed it, so must not be refused for it.
            name=name or (parsed.name or PurePath(file.name or "").stem or "Imported dataset")[:120],
            source=Dataset.Source.IMPORT,
            source_name=(file.name or "")[:255],
            description=parsed.description,
            eval_set_id=parsed.eval_set_id,
            **scoring,
        )
        result = _apply_import(
            dataset=dataset,
            cases=parsed.cases,
            ignored_columns=parsed.ignored_columns,
            warnings=parsed.warnings,
            skipped=parsed.skipped,
            file_name=file.name or "",
        )
    return dataset, result


def dataset_export_csv(*, dataset: Dataset) -> str:
    from datasets.exporters import cases_to_csv

    return cases_to_csv(dataset.cases.all())


def dataset_export_json(*, dataset: Dataset) -> dict[str, Any]:
    """The dataset as an EvalSet. Cases without a case_id get one first, kept on the case,
    and so does the dataset's eval_set_id: exporting again gives the same ids, and importing
    the file back into this dataset updates its cases instead of adding copies."""
    from datasets.exporters import dataset_to_eval_set

    _identities_assign(dataset)
    return dataset_to_eval_set(dataset, dataset.cases.prefetch_related("documents").order_by("position", "id"))


@transaction.atomic
def _identities_assign(dataset: Dataset) -> None:
    from django.utils.text import slugify

    if not dataset.eval_set_id:
        dataset.eval_set_id = (slugify(dataset.name) or f"dataset-{dataset.pk}")[:200]
        Dataset.objects.filter(pk=dataset.pk, eval_set_id="").update(eval_set_id=dataset.eval_set_id)
    cases = list(dataset.cases.select_for_update().order_by("position", "id").only("id", "case_id"))
    if all(case.case_id for case in cases):
        return
    used = {case.case_id for case in cases if case.case_id}
    changed = []
    for number, case in enumerate(cases, start=1):
        if case.case_id:
            continue
        # "case-N" from its place at the first export; a clash with an id someone typed gets a suffix.
        candidate, suffix = f"case-{number}", 2
        while candidate in used:
            candidate, suffix = f"case-{number}-{suffix}", suffix + 1
        used.add(candidate)
        case.case_id = candidate
        changed.append(case)
    TestCase.objects.bulk_update(changed, ["case_id"])

"""Input validation for the dataset pages. Normalisation of case fields lives in
datasets.fields.case_fields_clean; the case form parses its repeating rows and
hands everything to it, so the page and every other source agree."""

from __future__ import annotations

import json
from itertools import zip_longest
from pathlib import PurePath
from typing import Any

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files.uploadedfile import UploadedFile

from datasets.csv_import import csv_is_test_plan
from datasets.documents import upload_validate
from datasets.extraction.validation import ValidatedFile
from datasets.fields import CASE_EDITABLE_FIELDS, SCENARIO_DEFAULT_TURNS, SCENARIO_MAX_TURNS, case_fields_clean
from datasets.models import Dataset, TestCase
from evalsite.forms import optional_textarea


def _too_big_message(size: int) -> str:
    limit = settings.UPLOAD_MAX_BYTES
    return f"The file is {size / 1_000_000:.1f} MB; the limit is {limit / 1_000_000:g} MB."


class _GuardedUploadForm(forms.Form):
    """A form with a file that datasets.upload_forms.UploadSizeGuard may have cut off: then
    the file is missing, and the error says how big it was instead of "choose a file"."""

    def __init__(self, *args: Any, too_big: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.too_big = too_big

    def full_clean(self) -> None:
        super().full_clean()
        if self.too_big is not None and self.is_bound:
            self.errors.pop("file", None)
            self.add_error("file", _too_big_message(self.too_big))


NAME_ERRORS = {
    "required": "Give the dataset a name.",
    "max_length": "Use at most 120 characters (it has %(show_value)d).",
}


# Files the import reads at once (our CSV columns, EvalSet JSON), and test plans read like an upload.
IMPORT_EXTENSIONS = (".csv", ".tsv", ".txt", ".json")
DOCUMENT_EXTENSIONS = (".xlsx", ".xls", ".docx", ".pdf", ".md", ".markdown")


def _is_test_plan(file: UploadedFile) -> bool:
    head = file.read(65_536)
    file.seek(0)
    return csv_is_test_plan(head)


def _check_upload(file: UploadedFile, extensions: tuple[str, ...]) -> UploadedFile:
    suffix = PurePath(file.name or "").suffix.lower()
    if suffix not in extensions:
        raise ValidationError(f"Choose a {' or '.join(extensions)} file (this one is “{suffix or 'no extension'}”).")
    if file.size and file.size > settings.UPLOAD_MAX_BYTES:
        raise ValidationError(_too_big_message(file.size))
    if not file.size:
        raise ValidationError("The submitted file is empty.")
    return file


class DatasetCreateForm(_GuardedUploadForm):
    name = forms.CharField(
        max_length=120,
        required=False,
        widget=forms.TextInput(attrs={"autofocus": True, "autocomplete": "off"}),
        error_messages=NAME_ERRORS,
        help_text="Unique for this agent. For an imported file it defaults to the eval set's name or the file name.",
    )
    file = forms.FileField(
        required=False,
        label="Start from a file (optional)",
        help_text=(
            "A test plan (XLSX, XLS, CSV, Word, PDF or Markdown), or an ADK/10xgraph EvalSet JSON. "
            "Leave empty to add test cases by hand."
        ),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Set by clean_file for a file that goes through the upload's reading and mapping step.
        self.validated: ValidatedFile | None = None

    def clean_file(self) -> UploadedFile | None:
        """Every supported file: our CSV columns and EvalSet JSON are imported at once; test
        plans (any other table or document) are read like an upload, with the mapping step."""
        file = self.cleaned_data.get("file")
        if not file:
            return None
        file = _check_upload(file, (*IMPORT_EXTENSIONS, *DOCUMENT_EXTENSIONS))
        suffix = PurePath(file.name or "").suffix.lower()
        if suffix in DOCUMENT_EXTENSIONS or (suffix == ".csv" and _is_test_plan(file)):
            self.validated = upload_validate(file)
        return file

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data  # what Form.clean() returns, typed without its Optional
        # A name that failed its own check (too long) is reported already: one message per problem.
        unnamed = not cleaned.get("name", "").strip() and "name" not in self.errors
        if unnamed and not cleaned.get("file") and "file" not in self.errors:
            self.add_error("name", "Give the dataset a name.")
        return cleaned


class DatasetRenameForm(forms.Form):
    name = forms.CharField(
        max_length=120,
        error_messages=NAME_ERRORS,
        widget=forms.TextInput(attrs={"autofocus": True, "autocomplete": "off"}),
    )


class DatasetSettingsForm(forms.Form):
    acceptance_criteria = optional_textarea(
        3, help_text="What an answer must contain or do to pass, e.g. “States the 30-day refund window.”"
    )
    rejection_criteria = optional_textarea(
        3, help_text="What makes an answer fail whatever else it gets right, e.g. “Promises a refund after 30 days.”"
    )
    evaluation_criteria = optional_textarea(
        3, help_text="How the judge should weigh correctness, completeness and tone."
    )
    judge_model = forms.CharField(required=False, max_length=200)
    judge_prompt = optional_textarea(
        4,
        label="Judge prompt override",
        help_text="Replaces the default judge instructions. Leave empty to use the default.",
    )
    pass_threshold = forms.IntegerField(
        min_value=0, max_value=10, help_text="A case passes when the judge scores it at least this (0-10)."
    )
    number_of_requests = forms.IntegerField(
        min_value=1, max_value=10, label="Repeats per case", help_text="Runs each case this many times (1-10)."
    )
    judge_resamples = forms.IntegerField(
        min_value=0,
        max_value=4,
        required=False,
        label="Re-ask the judge near the line",
        help_text="Extra judge calls when a score sits next to the pass threshold; the median counts (0 turns it off).",
    )
    alignment_examples = forms.IntegerField(
        min_value=0,
        max_value=10,
        required=False,
        label="Reviewer examples for the judge",
        help_text="Show the judge the reviewers' latest overrides as worked examples (how many, 0-10; 0 is off).",
    )
    jaccard_enabled = forms.BooleanField(required=False, label="Jaccard similarity to the expected answer")
    vector_enabled = forms.BooleanField(required=False, label="Vector similarity to the expected answer")
    context_gates = forms.BooleanField(
        required=False,
        label="A failed retrieval-context check fails the case",
        help_text="Off: the check is shown on each card and counted on the run page, without changing the verdict.",
    )

    # Left out of a post (an older form, a script): the dataset keeps its value.
    OPTIONAL_NUMBERS = ("judge_resamples", "alignment_examples")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        for name in self.OPTIONAL_NUMBERS:
            if cleaned.get(name) is None:
                cleaned.pop(name, None)
        return cleaned

    @classmethod
    def for_dataset(cls, dataset: Dataset, data: Any = None) -> DatasetSettingsForm:
        initial = {name: getattr(dataset, name) for name in cls.base_fields}
        return cls(data, initial=initial)


class ImportForm(_GuardedUploadForm):
    file = forms.FileField(error_messages={"required": "Choose a file to import."})

    EXTENSIONS = {"csv": (".csv", ".tsv", ".txt"), "json": (".json",)}

    def __init__(self, *args: Any, kind: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kind = kind
        self.fields["file"].label = "CSV file" if kind == "csv" else "EvalSet JSON file"

    def clean_file(self) -> UploadedFile:
        return _check_upload(self.cleaned_data["file"], self.EXTENSIONS[self.kind])


def _filled_pairs(rows: list[tuple[str, str]], missing_first: str) -> list[tuple[str, str]]:
    """The rows of a two-input repeating group that hold anything; a row with only its
    second input filled raises `missing_first`, formatted with the row's 1-based number."""
    pairs = []
    for number, (first, second) in enumerate(rows, start=1):
        if not first.strip() and not second.strip():
            continue
        if not first.strip():
            raise ValidationError(missing_first.format(number=number))
        pairs.append((first, second))
    return pairs


class _RowsField(forms.Field):
    """A list edited as repeating inputs (turn_user[], tool_name[], ...); the form's
    clean_<name> method reads the rows, so this field itself takes no input."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(required=False, **kwargs)


class CaseForm(forms.Form):
    question = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, "autofocus": True}),
        error_messages={"required": "Write the question the agent should answer."},
        help_text="What the user asks. For a multi-turn case, this is the last user turn.",
    )
    expected_answer = optional_textarea(4, help_text="The answer the judge compares against.")
    document_context = optional_textarea(
        2, help_text="What the attached documents are, e.g. “Excel budget sheet for Q3”."
    )
    case_id = forms.CharField(
        required=False,
        max_length=100,
        label="Case id",
        help_text="A stable id, unique in this dataset. Imports with the same id update this case.",
    )
    turns = _RowsField(label="Earlier turns")
    expected_tools = _RowsField(label="Expected tools")
    trajectory_mode = forms.ChoiceField(
        choices=TestCase.TrajectoryMode.choices, required=False, label="Trajectory match"
    )
    check_tool_args = forms.BooleanField(required=False, label="Check tool arguments")
    expected_context = _RowsField(label="Expected retrieval context")
    judge_guideline = optional_textarea(2, help_text="Extra instructions for the judge on this case only.")
    tags = forms.CharField(required=False, help_text="Separate tags with commas, e.g. refunds, edge case.")
    smoke_count = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=10,
        error_messages={
            "min_value": "Enter a whole number from 1 to 10, or leave it empty.",
            "max_value": "Enter a whole number from 1 to 10, or leave it empty.",
        },
        label="Smoke-test paraphrases",
        help_text="Also ask 1-10 rephrasings of the question. Leave empty for none.",
    )
    smoke_guidance = optional_textarea(
        2,
        label="Paraphrase guidance",
        help_text="How to rephrase, e.g. “casual tone, typos, mention the order number”.",
    )
    scenario = _RowsField(label="Scenario (simulated user)")
    # The scenario's parts, posted as scenario_<key> and gathered into `scenario` by clean().
    scenario_goal = optional_textarea(
        2,
        label="User's goal",
        help_text="What the simulated user wants to get done, e.g. “Get a refund for order A-1001”.",
    )
    scenario_plan = optional_textarea(
        3,
        label="Conversation plan",
        help_text="How the user goes about it, step by step; the question above is their first message.",
    )
    scenario_persona = optional_textarea(2, label="Persona", help_text="Optional: who the user is and how they talk.")
    scenario_max_turns = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=SCENARIO_MAX_TURNS,
        label="Maximum turns",
        help_text=f"User messages at most (1-{SCENARIO_MAX_TURNS}); empty means {SCENARIO_DEFAULT_TURNS}.",
        error_messages={
            key: f"Enter a whole number from 1 to {SCENARIO_MAX_TURNS}, or leave it empty."
            for key in ("min_value", "max_value", "invalid")
        },
    )
    scenario_success_criteria = optional_textarea(
        2, label="Success criteria", help_text="What the judge checks in the whole conversation."
    )
    SCENARIO_INPUTS = ("goal", "plan", "persona", "max_turns", "success_criteria")
    # Inputs that are parts of one case field (scenario), not fields of their own.
    PART_FIELDS = tuple(f"scenario_{key}" for key in SCENARIO_INPUTS)

    # Behind "More options": every editable field but the three always shown (the
    # trajectory mode always has a value, so it would keep the section open).
    ADVANCED_FIELDS = (
        tuple(name for name in CASE_EDITABLE_FIELDS if name not in ("question", "expected_answer", "trajectory_mode"))
        + PART_FIELDS
    )
    # Edited as repeating rows (turn_rows, tool_rows, chunk_rows), not through `initial`.
    ROW_FIELDS = ("turns", "expected_tools", "expected_context")

    def __init__(
        self, data: Any = None, *, dataset: Dataset | None = None, case: TestCase | None = None, **kwargs: Any
    ) -> None:
        initial = self._initial(case) if case is not None else {"trajectory_mode": TestCase.TrajectoryMode.STRICT}
        super().__init__(data, initial=initial, **kwargs)
        self.dataset = dataset
        self.case = case
        if self.is_bound:
            self._turns = list(zip_longest(data.getlist("turn_user"), data.getlist("turn_expected"), fillvalue=""))
            self._tools = list(zip_longest(data.getlist("tool_name"), data.getlist("tool_args"), fillvalue=""))
            self._chunks = list(data.getlist("context_chunk"))
        elif case is not None:
            self._turns = [(turn["user"], turn.get("expected", "")) for turn in case.turns]
            self._tools = [
                (tool["name"], json.dumps(tool["args"], ensure_ascii=False) if tool.get("args") else "")
                for tool in case.expected_tools
            ]
            self._chunks = list(case.expected_context)
        else:
            self._turns, self._tools, self._chunks = [], [], []

    @classmethod
    def _initial(cls, case: TestCase) -> dict[str, Any]:
        initial = {name: getattr(case, name) for name in CASE_EDITABLE_FIELDS if name not in cls.ROW_FIELDS}
        initial["tags"] = ", ".join(case.tags)
        initial.update({f"scenario_{key}": value for key, value in case.scenario.items()})
        return initial

    # Rows for the template: what was entered (or saved), plus one blank row to add to.
    @property
    def turn_rows(self) -> list[dict[str, str]]:
        rows = [{"user": u, "expected": e} for u, e in self._turns if u.strip() or e.strip()]
        return [*rows, {"user": "", "expected": ""}]

    @property
    def tool_rows(self) -> list[dict[str, str]]:
        rows = [{"name": n, "args": a} for n, a in self._tools if n.strip() or a.strip()]
        return [*rows, {"name": "", "args": ""}]

    @property
    def chunk_rows(self) -> list[str]:
        return [*[chunk for chunk in self._chunks if chunk.strip()], ""]

    @property
    def advanced_open(self) -> bool:
        """Show the advanced fields when any holds a value or an error."""
        if any(name in self.errors for name in self.ADVANCED_FIELDS):
            return True
        if len(self.turn_rows) > 1 or len(self.tool_rows) > 1 or len(self.chunk_rows) > 1:
            return True
        source = self.data if self.is_bound else self.initial
        return any(
            source.get(name) for name in self.ADVANCED_FIELDS if name not in ("turns", "expected_tools", "scenario")
        )

    def clean_case_id(self) -> str:
        # The service checks again inside its transaction; checking here too lets the
        # person see this error together with the others.
        case_id = self.cleaned_data["case_id"].strip()
        if case_id and self.dataset is not None:
            taken = self.dataset.cases.filter(case_id=case_id)
            if self.case is not None:
                taken = taken.exclude(pk=self.case.pk)
            if taken.exists():
                raise ValidationError(f"Another test case in this dataset already uses the id “{case_id}”.")
        return case_id

    def case_fields(self) -> dict[str, Any]:
        """The cleaned case fields, as case_create and case_update take them."""
        return {name: self.cleaned_data[name] for name in CASE_EDITABLE_FIELDS}

    @property
    def error_summary(self) -> list[str]:
        """Every problem, labelled, for the alert at the top of a long form."""
        messages = [str(error) for error in self.non_field_errors()]
        for name, errors in self.errors.items():
            if name != "__all__":
                # The bound field's label: Django derives it ("Question") when none is set.
                messages += [f"{self[name].label}: {error}" for error in errors]
        return messages

    def clean_turns(self) -> list[dict[str, str]]:
        missing = "Turn {number}: write the user message, or clear its expected reply."
        return [{"user": user, "expected": expected} for user, expected in _filled_pairs(self._turns, missing)]

    def clean_expected_tools(self) -> list[dict[str, Any]]:
        missing = "Tool {number}: write the tool name, or clear its arguments."
        return [{"name": name, "args": args} for name, args in _filled_pairs(self._tools, missing)]

    def clean_expected_context(self) -> list[str]:
        return [chunk for chunk in self._chunks if chunk.strip()]

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data  # what Form.clean() returns, typed without its Optional
        parts = {key: cleaned.pop(f"scenario_{key}", None) for key in self.SCENARIO_INPUTS}
        if not any(f"scenario_{key}" in self.errors for key in self.SCENARIO_INPUTS):
            # The parts passed their own checks (max turns 1-30); case_fields_clean checks the whole.
            cleaned["scenario"] = {key: value for key, value in parts.items() if value not in (None, "")}
        # Fields that failed their own checks are already reported; normalise the rest.
        values = {name: value for name, value in cleaned.items() if name not in self.errors}
        try:
            cleaned.update(case_fields_clean(values, partial=True))
        except ValidationError as exc:
            for name, messages in exc.message_dict.items():
                for message in messages:
                    self.add_error(name if name in self.fields else None, message)
        return cleaned

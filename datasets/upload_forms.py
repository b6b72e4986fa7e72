"""Forms for uploads: they validate (size, type by content, archive sanity) and nothing more."""

from __future__ import annotations

from collections import Counter
from typing import IO, Any

from django import forms
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import HttpRequest, QueryDict
from django.utils.datastructures import MultiValueDict

from datasets.documents import upload_validate
from datasets.extraction.tables import FIELD_LABELS, result_preview
from datasets.extraction.validation import ACCEPT_ATTRIBUTE, ValidatedFile, too_big_message
from datasets.fields import dataset_name_clean

# Room for the other form fields and the multipart boundaries around the file.
MULTIPART_OVERHEAD_BYTES = 64 * 1024


class UploadSizeGuard(FileUploadHandler):
    """Stops reading an upload as soon as it is over the limit, before the temp-file handler stores it.

    Django's own upload settings choose memory or disk, not a size cap, and the usual form
    check runs only after the whole file has been written to a temporary file.
    Put it first in request.upload_handlers, before anything reads request.POST.
    """

    def __init__(self, request: HttpRequest | None = None) -> None:
        super().__init__(request)
        self.max_bytes = settings.UPLOAD_MAX_BYTES
        self.too_big: int | None = None  # the size seen when the upload was refused
        self._content_length = 0

    def handle_raw_input(
        self,
        input_data: IO[bytes],
        META: dict[str, str],
        content_length: int,
        boundary: str,
        encoding: str | None = None,
    ) -> tuple[QueryDict, MultiValueDict[str, UploadedFile[Any]]] | None:
        self._content_length = content_length
        return None

    def new_file(
        self,
        field_name: str,
        file_name: str,
        content_type: str,
        content_length: int | None,
        charset: str | None = None,
        content_type_extra: dict[str, bytes] | None = None,
    ) -> None:
        super().new_file(field_name, file_name, content_type, content_length, charset, content_type_extra)
        # Fields before the file (CSRF token, name) are parsed already and kept; the
        # parser discards the rest of the body without storing a byte of it.
        if self._content_length > self.max_bytes + MULTIPART_OVERHEAD_BYTES:
            self.too_big = self._content_length
            raise StopUpload(connection_reset=False)

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        # A body without an honest Content-Length is still cut off at the limit.
        if start + len(raw_data) > self.max_bytes:
            self.too_big = max(start + len(raw_data), self._content_length)
            raise StopUpload(connection_reset=False)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None  # the next handler builds the file


class DocumentUploadForm(forms.Form):
    file = forms.FileField(
        label="File",
        help_text=f"PDF, XLSX, XLS, Markdown, CSV or DOCX; up to {settings.UPLOAD_MAX_BYTES // 1_000_000} MB.",
        widget=forms.ClearableFileInput(attrs={"accept": ACCEPT_ATTRIBUTE}),
        error_messages={"required": "Choose a file to upload."},
    )

    def __init__(self, *args: Any, too_big: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.too_big = too_big
        self.validated: ValidatedFile | None = None

    def clean_file(self) -> UploadedFile:
        upload: UploadedFile = self.cleaned_data["file"]
        self.validated = upload_validate(upload)
        return upload

    def full_clean(self) -> None:
        super().full_clean()
        if self.too_big is not None and self.is_bound:
            # The guard dropped the file: say why instead of "choose a file".
            # Fields after the file in the body were not read either; don't blame the user for them.
            self.errors.pop("file", None)
            self.errors.pop("name", None)
            self.add_error("file", too_big_message(self.too_big, settings.UPLOAD_MAX_BYTES))


class DatasetUploadForm(DocumentUploadForm):
    name = forms.CharField(
        label="Dataset name",
        max_length=120,
        error_messages={"required": "Give the dataset a name."},
        widget=forms.TextInput(attrs={"maxlength": 120, "autocomplete": "off"}),
    )

    agent_reads_source = forms.BooleanField(
        label="Let the agent read the uploaded document",
        required=False,
        help_text=(
            "Off by default. When on, the file is attached to every case and sent to the agent, "
            "so the agent reads everything in it, expected answers included."
        ),
    )

    field_order = ["file", "name", "agent_reads_source"]

    def clean_name(self) -> str:
        return dataset_name_clean(self.cleaned_data["name"])


class MappingForm(forms.Form):
    """The mapping step: a field per column of every table, whether to include each table,
    and, over the case limit, the agreement to keep the first cases. Field names:
    t<key>_c<column> (a field), t<key>_include (a checkbox), keep_first."""

    keep_first = forms.BooleanField(required=False)
    derive_questions = forms.BooleanField(required=False)

    def __init__(self, *args: Any, tables: list[dict[str, Any]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tables = tables
        choices = list(FIELD_LABELS.items())
        for table in tables:
            self.fields[f"t{table['key']}_include"] = forms.BooleanField(
                required=False, initial=not table["skipped"], label="Create test cases from this table"
            )
            for column in table["columns"]:
                self.fields[f"t{table['key']}_c{column['index']}"] = forms.ChoiceField(
                    choices=choices, initial=column["field"], label=column["header"], required=False
                )

    def rows(self) -> list[dict[str, Any]]:
        """Each table with its bound fields and what its first rows become under the
        fields now chosen (the posted ones, else the suggestion), for the template."""
        rows = []
        for table in self.tables:
            columns = self._columns(table)
            result = result_preview(table, columns) if table["columns"] else []
            rows.append(
                {
                    "table": table,
                    "include": self[f"t{table['key']}_include"],
                    "columns": [
                        {"column": column, "field": self[f"t{table['key']}_c{column['index']}"]}
                        for column in table["columns"]
                    ],
                    "result": result,
                    "quoted_from": next(
                        (c["header"] for c in table["columns"] if columns[str(c["index"])] == "quoted_question"), ""
                    ),
                    "result_context": any(case["document_context"] for case in result),
                    # Fields fed by two or more columns: the page says their texts are joined.
                    "combined": [
                        FIELD_LABELS[name]
                        for name, count in Counter(columns.values()).items()
                        if count > 1 and name not in ("metadata", "ignore", "tags")
                    ],
                }
            )
        return rows

    def _columns(self, table: dict[str, Any]) -> dict[str, str]:
        """{column: field} as the page now shows it; a value that is not a field keeps the suggestion."""
        chosen = {}
        for column in table["columns"]:
            value = self[f"t{table['key']}_c{column['index']}"].value()
            chosen[str(column["index"])] = value if value in FIELD_LABELS else column["field"]
        return chosen

    def chosen(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "tables": {
                table["key"]: {
                    "skip": not data.get(f"t{table['key']}_include"),
                    # A column the post leaves out keeps the suggested field.
                    "columns": {
                        str(c["index"]): data.get(f"t{table['key']}_c{c['index']}") or c["field"]
                        for c in table["columns"]
                    },
                }
                for table in self.tables
                if table["columns"]
            }
        }

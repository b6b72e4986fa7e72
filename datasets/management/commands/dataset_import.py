"""`manage.py dataset_import FILE --agent AGENT`: a test plan from a repository into a
dataset, through the upload's pipeline (validation, sandboxed parse, column mapping,
warnings, the 500-case limit). Exit codes a pipeline can act on:

    0  the dataset was created (or, with --dry-run, would be)
    1  the file yields no case or is refused (the reason is printed)
    2  bad arguments: unknown agent, unreadable file, invalid --mapping, a name in use

--dry-run --json prints the detected mapping, the warnings and the cases without saving.
An EvalSet JSON file (.json) is imported as the UI's "New dataset or import" does (it has
no columns, so --mapping does not apply to it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.management.lookup import agent_from_argument
from datasets.extraction.file_import import BadMapping, FileImport, ImportRefused, dataset_file_import

EXIT_OK, EXIT_REFUSED, EXIT_BAD_ARGUMENTS = 0, 1, 2


class Command(BaseCommand):
    help = "Import a test plan (XLSX, XLS, CSV, DOCX, PDF, Markdown) or an EvalSet JSON into a new dataset of an agent."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="The file to import")
        parser.add_argument("--agent", required=True, help="Agent id or exact name")
        parser.add_argument("--dataset", default="", help="Name of the new dataset (default: the file name)")
        parser.add_argument(
            "--mapping",
            default=None,
            help='Column mapping as JSON, e.g. \'{"Test plan": {"Question": "question", "Scenario": "ignore"}, '
            '"Glossary": "skip"}\' (keys: sheet or table names, or "*" for every table no other key names; '
            "columns by header, letter or number; "
            "fields: question, quoted_question, expected_answer, document_context, tags, case_id, judge_guideline, "
            "metadata, ignore; several columns mapped to one text field are joined). Without it the suggested "
            "mapping is used.",
        )
        parser.add_argument("--keep-first", action="store_true", help="Over the case limit, keep the first cases")
        parser.add_argument("--dry-run", action="store_true", help="Read and map the file, save nothing")
        parser.add_argument("--json", action="store_true", help="Print the result as JSON on stdout")

    def handle(self, *args: Any, **options: Any) -> None:
        self.as_json = options["json"]
        agent = agent_from_argument(options["agent"])
        path = Path(options["file"])
        if not path.is_file():
            raise CommandError(f"No file “{path}”.", returncode=EXIT_BAD_ARGUMENTS)
        mapping = None
        if options["mapping"] is not None:
            try:
                mapping = json.loads(options["mapping"])
            except json.JSONDecodeError as exc:
                raise CommandError(f"--mapping is not valid JSON: {exc.msg}.", returncode=EXIT_BAD_ARGUMENTS) from exc
        try:
            result = dataset_file_import(
                agent=agent,
                user=None,
                path=path,
                name=options["dataset"],
                mapping=mapping,
                keep_first=options["keep_first"],
                dry_run=options["dry_run"],
            )
        except ImportRefused as exc:
            self.fail(exc.reason, EXIT_REFUSED)
        except BadMapping as exc:
            self.fail(f"--mapping: {exc.reason}", EXIT_BAD_ARGUMENTS)
        except ValidationError as exc:
            self.fail(" ".join(exc.messages), EXIT_BAD_ARGUMENTS)
        self.report(result, dry_run=options["dry_run"])

    def fail(self, reason: str, code: int) -> None:
        if self.as_json:
            self.stdout.write(json.dumps({"ok": False, "error": reason, "exit_code": code}, ensure_ascii=False))
        raise CommandError(reason, returncode=code)

    def report(self, result: FileImport, *, dry_run: bool) -> None:
        if self.as_json:
            self.stdout.write(json.dumps(_payload(result, dry_run=dry_run), ensure_ascii=False, indent=2))
            return
        verb = "Would create" if dry_run else "Created"
        where = f" in dataset #{result.dataset.pk} “{result.dataset.name}”" if result.dataset else ""
        self.stdout.write(f"{verb} {len(result.cases)} test cases from {result.file_name}{where}.")
        for table in result.tables:
            self.stdout.write(f"  {_table_line(table)}")
        if result.notice:
            self.stdout.write(result.notice)
        for warning in result.warnings:
            self.stderr.write(f"warning: {warning['where']}: {warning['message']}")


def _table_line(table: dict[str, Any]) -> str:
    name = f"“{table['label']}”" if table["label"] else "table"
    if table["skipped"]:
        return f"{name}: skipped: {table['skipped']}"
    fields = ", ".join(f"{column['header']} → {column['field']}" for column in table["columns"])
    return f"{name} (header on {table['unit']} {table['header_row']}): {fields}"


def _payload(result: FileImport, *, dry_run: bool) -> dict[str, Any]:
    dataset = result.dataset
    return {
        "ok": True,
        "dry_run": dry_run,
        "file": result.file_name,
        "dataset": {"id": dataset.pk, "name": dataset.name, "status": dataset.status} if dataset else None,
        "mapping": [
            {
                "table": table["label"],
                "header_row": table["header_row"],
                "columns": {column["header"]: column["field"] for column in table["columns"]},
                "cases": table["cases"],
                "skipped": table["skipped"],
            }
            for table in result.tables
        ],
        "total": result.total,
        "notice": result.notice,
        "warnings": result.warnings,
        "cases": [
            {
                "question": case["question"],
                "expected_answer": case["expected_answer"],
                "case_id": case["case_id"],
                "source": {"file": case["source_file"], "location": case["source_location"]},
                # The uploaded file is the case's source, never an input the agent receives.
                "attachments": [],
                "metadata": case["metadata"],
                # The column whose steps quoted the question ("" when the question is a whole cell).
                "question_from": case.get("extra", {}).get("question_from", ""),
                "warnings": case["import_warnings"],
            }
            for case in result.cases
        ],
    }

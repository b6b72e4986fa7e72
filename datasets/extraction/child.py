"""The sandboxed parse: `python -m datasets.extraction.child MEMORY_MB CPU_SECONDS`.

Reads one JSON request on stdin, writes one JSON answer on stdout. It limits its
own address space and CPU time before importing any parser, so a hostile file
(a decompression bomb, a pathological PDF) ends this process with a clear
answer, or gets it killed, and never takes the Celery worker or the web server
down with it. No Django here: the child neither needs nor may touch the database.
"""

from __future__ import annotations

import errno
import json
import resource
import sys
import traceback
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datasets.extraction.readers import Parsed
    from datasets.extraction.tables import Table


def _limit(memory_mb: int, cpu_seconds: int) -> None:
    memory = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # The parse reads one file and writes nothing; a library that tries to gets SIGXFSZ.
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


SPREADSHEETS = ("xlsx", "xls", "csv")


def extract(request: dict[str, Any]) -> dict[str, Any]:
    """Read the file's cases. Tables follow request["mapping"] when given (the user's choice,
    {"tables": {key: {"skip": bool, "columns": {"3": "question"}}}}), else the suggested plan;
    the answer describes every table (header, field per column, first rows) for the mapping step."""
    from datasets.extraction import readers

    parsed = readers.read(request["path"], request["file_type"])
    chosen = (request.get("mapping") or {}).get("tables") or {}
    return answer_from_parsed(parsed, request["file_type"], chosen=chosen, max_cases=request["max_cases"])


def answer_from_parsed(parsed: Parsed, file_type: str, *, chosen: dict[str, Any], max_cases: int) -> dict[str, Any]:
    """The answer from a read file (readers.Parsed): no file is opened here, so this part of the
    parse depends on the mapping alone (the seam for applying a mapping to stored tables)."""
    from datasets.extraction.dedupe import drop_exact
    from datasets.extraction.prose import labelled_cases

    found = _table_answers(parsed.tables, chosen)
    cases = found["cases"]
    methods = ["table"] if cases else []
    # The prose around the tables: PDFs keep their pages, Markdown its line numbers.
    prose: list[tuple[int | None, str]] = parsed.pages if file_type == "pdf" else [(None, parsed.text)]
    if file_type in ("md", "docx"):
        prose = parsed.pages
    unit = {"md": "line", "docx": "paragraph"}.get(file_type, "page")
    labelled, leftover = labelled_cases(prose, unit=unit) if file_type not in SPREADSHEETS else ([], prose)
    if labelled:
        cases.extend(labelled)
        methods.append("labelled")
    kept = drop_exact(cases)
    warnings = list(parsed.warnings) + found["dropped"] + _dropped_warnings(cases, kept)
    kept_cases = kept[:max_cases]
    return {
        "ok": True,
        "method": "+".join(methods),
        "cases": kept_cases,
        "total": len(kept),
        "header_found": found["header_found"],
        "header_only": found["header_only"] if not cases else [],
        # Every table, for the mapping step (the user may map one that gave no case).
        "tables": found["described"],
        "warnings": warnings + _grouped_case_warnings(kept_cases),
        # Prose no table or labelled block took: the model may still find rules to test in it.
        "pages": [(page, text) for page, text in leftover if text.strip()],
        "text": parsed.text,
    }


def _table_answers(read_tables: list[Table], chosen: dict[str, Any]) -> dict[str, Any]:
    """Every table's cases (by the user's choice for it, else the suggested plan) and description."""
    from datasets.extraction.tables import describe, plan_from_choice, plan_table, split_tables, table_cases

    result: dict[str, Any] = {"cases": [], "described": [], "header_found": False, "header_only": [], "dropped": []}
    tables = [part for table in read_tables for part in split_tables(table)]
    for number, table in enumerate(tables):
        key = str(number)
        plan = plan_table(table)
        result["header_found"] = result["header_found"] or plan.question_column is not None
        if plan.header_index is not None and plan.header_index == len(table.rows) - 1:
            # A table with no row under its header.
            result["header_only"].append(", ".join(plan.headers[column] for column in sorted(plan.headers)))
        choice = chosen.get(key)
        if choice is not None:
            plan = plan_from_choice(table, plan, {int(column): name for column, name in choice["columns"].items()})
            if choice.get("skip"):
                plan.skipped = "You chose to skip this table."
        found = table_cases(table, plan)
        if plan.dropped and plan.question_column is not None:
            result["dropped"].append(
                {
                    "where": table.rows_location(plan.dropped),
                    "message": f"{len(plan.dropped)} row(s) have no “{plan.headers[plan.question_column]}” cell, "
                    "so no test case was made from them.",
                }
            )
        result["described"].append(describe(table, plan, key, len(found)))
        # Rows whose steps quote no user message: the mapping step offers the model for them.
        result["described"][-1]["unquoted"] = sum(1 for case in found if case.get("unquoted_from"))
        result["cases"].extend(found)
    return result


def _dropped_warnings(cases: list[dict[str, Any]], kept: list[dict[str, Any]]) -> list[dict[str, str]]:
    kept_ids = {id(case) for case in kept}
    dropped = [case.get("location", "") for case in cases if id(case) not in kept_ids]
    if not dropped:
        return []
    return [
        {
            "where": ", ".join(dropped[:10]) + (f" and {len(dropped) - 10} more" if len(dropped) > 10 else ""),
            "message": f"{len(dropped)} row(s) repeat an earlier case exactly (same question and expected answer) "
            "and were left out.",
        }
    ]


def _grouped_case_warnings(cases: list[dict[str, Any]]) -> list[dict[str, str]]:
    """One dataset warning per message, naming every row it concerns (cases keep their own)."""
    grouped: dict[str, list[str]] = {}
    for case in cases:
        for message in case.get("warnings", []):
            grouped.setdefault(message, []).append(case.get("location", ""))
    return [
        {
            "where": ", ".join(places[:10]) + (f" and {len(places) - 10} more" if len(places) > 10 else ""),
            "message": message if len(places) == 1 else f"{len(places)} cases: {message}",
        }
        for message, places in grouped.items()
    ]


def preview(request: dict[str, Any]) -> dict[str, Any]:
    from datasets.extraction.preview import build

    return {"ok": True, "blocks": build(request["path"], request["file_type"])}


def _failure(exc: BaseException) -> dict[str, Any]:
    from datasets.extraction.errors import ExtractionFailed

    if isinstance(exc, ExtractionFailed):
        return {"ok": False, "reason": exc.reason}
    # openpyxl wraps parser errors in ValueError; look at the whole chain of causes.
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < 10:
        chain.append(current)
        current = current.__cause__ or current.__context__
    if any(_out_of_memory(error) for error in chain):
        return {"ok": False, "kind": "memory", "reason": "The file needs more memory to read than the limit allows."}
    names = {cls.__name__ for error in chain for cls in type(error).__mro__}
    if names & {"EntitiesForbidden", "DTDForbidden", "ExternalReferenceForbidden", "NotSupportedError"}:
        return {
            "ok": False,
            "reason": "The file contains XML entity declarations, a known attack pattern, so it was not read.",
        }
    if names & {"BadZipFile", "XMLSyntaxError", "ParseError", "KeyError", "InvalidFileException"}:
        return {"ok": False, "reason": "The file is damaged and cannot be read. Save it again and upload the new copy."}
    return {
        "ok": False,
        "reason": "The file could not be read: it may be damaged or use features Evalsite does not support.",
    }


def _out_of_memory(error: BaseException) -> bool:
    """The address-space limit, wherever it hit: a MemoryError, or a parser's extension
    module that could not be mapped while it was being imported (dlopen: ENOMEM)."""
    if isinstance(error, MemoryError):
        return True
    if isinstance(error, OSError) and error.errno == errno.ENOMEM:
        return True
    text = str(error).lower()
    return isinstance(error, ImportError) and ("cannot allocate memory" in text or "failed to map segment" in text)


def _peak_kb() -> int | None:
    """This process's peak resident memory (Linux), for logs and the benchmark."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def main() -> None:
    memory_mb, cpu_seconds = int(sys.argv[1]), int(sys.argv[2])
    _limit(memory_mb, cpu_seconds)
    out = sys.stdout
    sys.stdout = sys.stderr  # library chatter must not corrupt the JSON answer
    try:
        request = json.loads(sys.stdin.read())
        answer = preview(request) if request.get("mode") == "preview" else extract(request)
    except BaseException as exc:  # noqa: BLE001 - every failure becomes an answer, never a traceback page
        from datasets.extraction.errors import ExtractionFailed

        if not isinstance(exc, ExtractionFailed):
            traceback.print_exc(file=sys.stderr)  # for the server log; the page gets a plain reason
        answer = _failure(exc)
    answer["peak_kb"] = _peak_kb()
    out.write(json.dumps(answer))
    out.flush()


if __name__ == "__main__":
    main()

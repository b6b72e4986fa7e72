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
from typing import Any


def _limit(memory_mb: int, cpu_seconds: int) -> None:
    memory = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # The parse reads one file and writes nothing; a library that tries to gets SIGXFSZ.
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


def extract(request: dict[str, Any]) -> dict[str, Any]:
    """Read the file's cases: the reading under request["mapping"] (reading.answer), with no
    reading kept (the playground's attachments, the benchmark)."""
    from datasets.extraction import readers, reading

    parsed = readers.read(request["path"], request["file_type"])
    return reading.answer(parsed, request["file_type"], mapping=request.get("mapping"), max_cases=request["max_cases"])


def read(request: dict[str, Any]) -> dict[str, Any]:
    """What the file holds, as JSON (reading.dump): an upload is read once, and its mapping
    is applied in the extraction job, to what was read (reading.answer)."""
    from datasets.extraction import readers, reading

    return {"ok": True, "reading": reading.dump(readers.read(request["path"], request["file_type"]))}


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
        modes = {"preview": preview, "read": read}
        answer = modes.get(request.get("mode", ""), extract)(request)
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

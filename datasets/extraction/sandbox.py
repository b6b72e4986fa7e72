"""Runs a parse in a separate Python process with memory, CPU and wall-clock limits.

Why a fresh process (subprocess) rather than multiprocessing or parsing in place:
Celery's prefork children are daemonic and may not fork multiprocessing children;
a fresh interpreter inherits no database connections, threads or locks; and the
limits (RLIMIT_AS, RLIMIT_CPU) apply to the child only, so a file that exhausts
them costs one dataset, never the worker or the web server. The start-up costs
about a third of a second, which is small next to a parse.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from datasets.extraction.errors import ExtractionFailed

logger = logging.getLogger(__name__)
PROJECT_ROOT = Path(__file__).resolve().parents[2]
MAX_ANSWER_BYTES = 64_000_000


def run(request: dict[str, Any], *, timeout: float, memory_mb: int) -> dict[str, Any]:
    """The child's answer to `request`; raises ExtractionFailed with a readable reason."""
    command = [
        sys.executable,
        "-B",
        "-E",
        "-s",
        "-m",
        "datasets.extraction.child",
        str(memory_mb),
        str(int(timeout) + 1),
    ]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "OPENPYXL_DEFUSEDXML": "True"}
    try:
        completed = subprocess.run(
            command,
            input=json.dumps(request).encode(),
            capture_output=True,
            timeout=timeout,
            cwd=PROJECT_ROOT,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ExtractionFailed(
            f"Reading the file took longer than the {timeout:g} second limit. Split it into smaller files, "
            "or save it again without images and hidden sheets."
        ) from exc
    stderr = completed.stderr.decode(errors="replace")[-4000:]
    if stderr:
        logger.warning("document parse (%s) said: %s", request.get("file_type"), stderr)
    if completed.returncode != 0 or not completed.stdout:
        raise ExtractionFailed(_death_reason(completed.returncode, timeout, memory_mb))
    if len(completed.stdout) > MAX_ANSWER_BYTES:
        raise ExtractionFailed("The file holds more text than Evalsite can read at once. Split it into smaller files.")
    answer = json.loads(completed.stdout)
    if not answer.get("ok"):
        reason = answer.get("reason") or "The file could not be read."
        if answer.get("kind") == "memory":
            reason = f"{reason.rstrip('.')} ({memory_mb} MB). Split the file into smaller ones."
        raise ExtractionFailed(reason)
    return answer


def _death_reason(returncode: int, timeout: float, memory_mb: int) -> str:
    if returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return f"Reading the file took longer than the {timeout:g} second limit. Split it into smaller files."
    if returncode == -signal.SIGXFSZ:
        return "The file could not be read: the reader tried to write to disk, which is not allowed."
    # Most other deaths under RLIMIT_AS are allocation failures outside Python's MemoryError.
    return f"Reading the file needed more than the {memory_mb} MB memory limit. Split it into smaller files."

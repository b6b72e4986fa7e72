"""Document extraction speed and memory, on the production path (the sandboxed child process).

    .venv/bin/python bench/bench_extraction.py

1. A 500-row XLSX (question, expected answer, id, tags) read to cases: aim under 2 s.
2. A 200-page text PDF listing "Question: / Expected answer:" pairs read to cases
   (no model): aim under 10 s.
Each is timed from spawning the child to its answer, best of 3, and reports the
child's peak resident memory (VmHWM), which should stay bounded by the file,
not grow with a whole DOM of it.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")

import django  # noqa: E402

django.setup()

from run_all import bench_result  # noqa: E402

from datasets.extraction import sandbox  # noqa: E402
from tests.datasets import files  # noqa: E402

TARGETS = {"xlsx": 2.0, "pdf": 10.0}


def xlsx_500() -> bytes:
    rows = [["Case ID", "Question", "Expected answer", "Tags"]]
    rows += [
        [
            f"TC-{n}",
            f"Question {n}: can a customer on plan {n % 7} return item {n} after {n % 40} days?",
            f"Expected answer {n}: yes, within 30 days, with the receipt; refunds go to the original card.",
            "returns",
        ]
        for n in range(1, 501)
    ]
    return files.xlsx_bytes({"Test plan": rows})


def pdf_200_pages() -> bytes:
    pages = []
    for page in range(1, 201):
        lines = [f"Acme support test plan, page {page}"]
        for item in range(2):
            n = page * 2 + item
            lines += [
                f"Q{n}: What does the assistant answer about order {n} and its delivery window?",
                f"Expected answer: Order {n} ships in {n % 5 + 1} days; tracking arrives by email.",
                "",
            ]
        lines += [f"Filler line {k} of ordinary policy prose that a real document would carry." for k in range(30)]
        pages.append(lines)
    return files.pdf_bytes(pages)


def measure(label: str, file_type: str, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as workdir:
        path = Path(workdir) / f"bench.{file_type}"
        path.write_bytes(data)
        request = {"mode": "extract", "path": str(path), "file_type": file_type, "max_cases": 500}
        timings, answer = [], {}
        for _ in range(3):
            started = time.perf_counter()
            answer = sandbox.run(request, timeout=120, memory_mb=1024)
            timings.append(time.perf_counter() - started)
    best = min(timings)
    cases = len(answer["cases"])
    target = TARGETS[file_type]
    verdict = "OK" if best < target else "SLOWER THAN TARGET"
    print(
        f"{label}: {best:.2f} s (target {target:g} s, {verdict}), {cases} cases, "
        f"file {len(data) / 1e6:.2f} MB, child peak RSS {answer['peak_kb'] / 1024:.0f} MB",
        flush=True,
    )
    bench_result(f"{label} seconds", round(best, 3), "s", f"target {target:g} s; {cases} cases")
    bench_result(f"{label} peak memory", round(answer["peak_kb"] / 1024, 1), "MB", f"file {len(data) / 1e6:.2f} MB")


def main() -> None:
    measure("500-row XLSX", "xlsx", xlsx_500())
    measure("200-page PDF", "pdf", pdf_200_pages())


if __name__ == "__main__":
    main()

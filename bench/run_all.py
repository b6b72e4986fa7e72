"""`make bench`: run every bench/bench_*.py and print one table of their results.

Each benchmark is a script run in its own process from the project directory. It
reports each measurement on a line of its own:

    BENCH {"name": "celery round trip p50", "value": 4.2, "unit": "ms", "note": "200 tasks"}

(`from run_all import bench_result` in a bench script prints one: the script's own
directory is on its import path.) Everything else it prints is shown only when
it fails. A benchmark fails when it exits non-zero or reports nothing.

Usage: python bench/run_all.py [substring ...]   (only files whose name contains one)
"""

import json
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
PREFIX = "BENCH "
TIMEOUT = 1800


def bench_result(name: str, value: float, unit: str, note: str = "") -> None:
    """For benchmark scripts: report one measurement."""
    print(PREFIX + json.dumps({"name": name, "value": value, "unit": unit, "note": note}), flush=True)


def _run(path: Path) -> tuple[list[dict], str | None, float]:
    started = time.monotonic()
    try:
        completed = subprocess.run(
            [sys.executable, str(path)], cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT
        )
    except subprocess.TimeoutExpired:
        return [], f"timed out after {TIMEOUT} s", time.monotonic() - started
    elapsed = time.monotonic() - started
    results = [json.loads(line[len(PREFIX) :]) for line in completed.stdout.splitlines() if line.startswith(PREFIX)]
    if completed.returncode != 0:
        return (
            results,
            f"exit code {completed.returncode}\n{completed.stdout[-3000:]}\n{completed.stderr[-3000:]}",
            elapsed,
        )
    if not results:
        return results, f"reported no measurement\n{completed.stdout[-3000:]}", elapsed
    return results, None, elapsed


def _format_value(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}"


def main(filters: list[str]) -> int:
    paths = sorted(p for p in BENCH_DIR.glob("bench_*.py") if not filters or any(f in p.name for f in filters))
    if not paths:
        print("No benchmark matched." if filters else "There are no benchmarks in bench/ yet.")
        return 1 if filters else 0
    rows: list[tuple[str, str, str, str, str]] = []
    failures: list[tuple[str, str]] = []
    for path in paths:
        print(f"running {path.name} ...", flush=True)
        results, error, elapsed = _run(path)
        if error:
            failures.append((path.name, error))
        for result in results:
            value = _format_value(float(result["value"]))
            rows.append((path.stem, result["name"], value, result.get("unit", ""), result.get("note", "")))
        print(f"  {'FAILED' if error else 'done'} in {elapsed:.1f} s", flush=True)

    headers = ("benchmark", "measurement", "value", "unit", "note")
    widths = [max(len(str(row[i])) for row in [headers, *rows]) for i in range(len(headers))]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    print()
    print(line.format(*headers).rstrip())
    print(line.format(*("-" * w for w in widths)).rstrip())
    for row in rows:
        print(line.format(row[0], row[1], row[2].rjust(widths[2]), row[3], row[4]).rstrip())
    for name, error in failures:
        print(f"\n{name} FAILED: {error}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

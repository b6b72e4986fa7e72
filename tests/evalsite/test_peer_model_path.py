"""bench/peer_model_path.py: the model path alone (no database, no Celery), the floor that the
README's peer-bench figures put beside Evalsite's runs. Run as the peer harness runs it: a
process with the harness's CSV, against a real HTTP server (the fake LLM)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "peer_model_path.py"
CASES = 7


@pytest.fixture
def server(fake_llm_server):
    """The suite's fake LLM, reset before and after (a test's rules never outlive it)."""
    fake_llm_server.reset()
    yield fake_llm_server
    fake_llm_server.reset()


def _cases(folder: Path) -> Path:
    path = folder / "cases.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "question", "expected"])
        for number in range(CASES):
            writer.writerow([f"case-{number}", f"How long is the refund window on plan {number}?", "30 days."])
    return path


def _run(cases: Path, url: str, *options: str) -> tuple[int, list[dict], str]:
    # Not the suite's Redis: what the gateway learns of the bench's models stays out of it.
    env = {name: value for name, value in os.environ.items() if name != "REDIS_URL"}
    completed = subprocess.run(
        [sys.executable, str(SCRIPT), str(cases), url, "3", *options],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    prefix = "MODEL_PATH "
    figures = [json.loads(line[len(prefix) :]) for line in completed.stdout.splitlines() if line.startswith(prefix)]
    return completed.returncode, figures, completed.stderr[-2000:]


@pytest.mark.parametrize(
    ("options", "path", "processes"),
    [
        ((), "gateway", 4),  # the worker's shape: a main process and 3 forked children
        (("--raw",), "litellm", 4),
        (("--raw", "--pool", "thread"), "litellm", 1),
    ],
)
def test_each_case_makes_its_two_calls_and_the_tree_is_measured(server, tmp_path, options, path, processes):
    code, figures, stderr = _run(_cases(tmp_path), server.url, *options)

    assert code == 0, stderr
    [measured] = figures
    assert (measured["path"], measured["answered"], measured["processes"]) == (path, CASES, processes)
    # One agent and one judge call a case reached the server, the warm-up none (its own server).
    assert server.count() == 2 * CASES
    judged = [r for r in server.requests if "judge" in json.dumps(r.messages).lower()]
    assert len(judged) == CASES
    assert measured["cpu_ms_per_case"] > 0
    assert measured["peak_pss_mb"] > 100  # litellm alone is most of it
    # by_process is the peak's own sample: its processes' PSS add up to the peak (each rounded to 1 MB).
    assert abs(sum(pss for pss, _ in measured["by_process"]) - measured["peak_pss_mb"]) <= processes


@pytest.mark.parametrize("options", [(), ("--raw", "--pool", "thread")])
def test_a_case_without_its_answer_fails_the_tool(server, tmp_path, options):
    server.add_rule(status=401, error="Incorrect API key provided.")

    code, figures, _ = _run(_cases(tmp_path), server.url, *options)

    assert code != 0
    assert [measured["answered"] for measured in figures] in ([], [0])


def test_a_process_forked_while_the_tree_is_read_makes_the_sample_read_again(monkeypatch):
    """The sampler's race, made certain: a child starts after the tree is listed and before its
    figures are read. Such a sample must not stand (the parent's PSS already counts the child's
    share as gone), so it is read again with the child in it."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))  # the bench scripts' own folder, as they run
    import bench_worker_memory

    listing = bench_worker_memory.tree
    started: list[subprocess.Popen] = []

    def a_child_starts_after_the_first_listing(pid: int) -> list[int]:
        listed = listing(pid)
        if not started:
            started.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]))
        return listed

    monkeypatch.setattr(bench_worker_memory, "tree", a_child_starts_after_the_first_listing)
    try:
        snapshot = bench_worker_memory.take(os.getpid())
        [child] = started
        assert {os.getpid(), child.pid} <= set(snapshot)
    finally:
        for child in started:
            child.kill()
            child.wait()

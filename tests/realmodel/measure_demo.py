"""Measure the demo through a real model: python tests/realmodel/measure_demo.py [--fake]

Starts `llama_cpp.server` with SmolLM2 (or the fake server with --fake), loads the demo
into a throwaway SQLite database, runs the demo dataset against the demo LLM agent with
the LLM judge (each case as a worker would run it), then generates 3 cases and asks for
suggestions on the run. Prints, per prompt kind, the prompt tokens the server counted,
the HTTP attempts per case, any call that passed its bound, and what generation and
suggestions produced (or the message naming why not).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]


class _Calls(logging.Handler):
    """Collects the gateway's one-line log of every call."""

    PATTERN = re.compile(
        r"llm task=(\w+) model=\S+ prompt_tokens=(\d+) completion_tokens=(\d+) \S+ attempts=(\d+) ms=(\d+) finish=(\S+)"
    )
    FAILED = re.compile(r"llm task=(\w+) model=\S+ kind=(\w+) status=\S+ attempts=(\d+)")

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[dict] = []
        self.failures: list[dict] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if match := self.PATTERN.match(text):
            task, prompt, completion, attempts, ms, finish = match.groups()
            self.calls.append(
                {
                    "task": task,
                    "prompt": int(prompt),
                    "completion": int(completion),
                    "attempts": int(attempts),
                    "ms": int(ms),
                    "finish": finish,
                }
            )
        elif match := self.FAILED.match(text):
            task, kind, attempts = match.groups()
            self.failures.append({"task": task, "kind": kind, "attempts": int(attempts)})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fake", action="store_true", help="use the fake server instead of llama.cpp")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="evalsite-measure-"))
    os.environ.update(
        DJANGO_SETTINGS_MODULE="evalsite.settings",
        DATABASE_URL=f"sqlite:///{workdir / 'db.sqlite3'}",
        MEDIA_ROOT=str(workdir / "media"),
        EVALSITE_LLM_CONCURRENCY="1",
        EVALSITE_LLM_RETRIES="1",
        LOG_LEVEL="WARNING",
    )
    import common  # bench/common.py

    common.use_embedded_redis_unless_set()
    server, stop = _start_server(args.fake, workdir)
    os.environ.update(
        EVALSITE_LLM_MODEL="openai/smollm2",
        EVALSITE_LLM_API_BASE=server,
        EVALSITE_LLM_API_KEY="none",
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    calls = _Calls()
    gateway_log = logging.getLogger("evalsite.llm")
    gateway_log.addHandler(calls)
    gateway_log.setLevel(logging.INFO)
    gateway_log.propagate = False  # collected, not printed
    try:
        _measure(calls, args.fake)
    finally:
        stop()
        common.stop_embedded_redis()


def _start_server(fake: bool, workdir: Path):
    if fake:
        from tests.fakellm import FakeLLM

        server = FakeLLM().start()
        server.set_server("llama.cpp")
        return server.url, server.stop
    from tests.realmodel.server import LlamaServer

    llama = LlamaServer(workdir / "llama.log").start()
    return llama.url, llama.stop


def _measure(calls: _Calls, fake: bool) -> None:
    from django.conf import settings

    from agents.models import Agent
    from datasets.generation.generator import GenerationError, generate_cases
    from datasets.models import Dataset
    from evalsite import demo, llm
    from runs import services
    from runs.models import Result
    from suggestions.services import suggestion_generate

    data = demo.demo_load()
    agent = Agent.objects.get(name=demo.LLM_AGENT)
    # The demo dataset belongs to the knowledge agent; this throwaway database lends it to the LLM agent.
    dataset = Dataset.objects.get(name=demo.DATASET)
    dataset.agent = agent
    dataset.save(update_fields=["agent"])
    user = data.user
    started = time.monotonic()
    run = services.run_start(agent=agent, dataset=dataset, user=user)
    while queued := Result.objects.filter(run=run, status=Result.Status.QUEUED).order_by("id").first():
        services.run_execute_case(result_id=queued.pk, token=queued.token)
        if time.monotonic() - started > 3600:
            break
    services.run_finish(run_id=run.pk)
    run.refresh_from_db()
    run_seconds = time.monotonic() - started
    run_calls = list(calls.calls)
    print(
        f"\nRun #{run.pk}: {run.get_status_display()} in {run_seconds:.0f} s; passed {run.passed}, "
        f"failed {run.failed}, errors {run.errored} of {run.total}"
    )
    for result in Result.objects.filter(run=run).order_by("id"):
        what = f"score {result.score:g}" if result.score is not None else f"error: {result.error[:160]}"
        print(f"  case {result.case_id}: {result.status} ({what})")
    print(f"Summary: {run.summary[:200] or run.summary_note}")

    per_case = [c for c in run_calls if c["task"] in ("agent", "judge")]
    attempts = sum(c["attempts"] for c in per_case) + sum(
        f["attempts"] for f in calls.failures if f["task"] in ("agent", "judge")
    )
    print(f"HTTP attempts for the run's cases: {attempts} for {run.total} cases = {attempts / run.total:.1f} a case")
    over = [c for c in calls.calls if c["ms"] > llm.timeout_for(c["task"]) * 1000 * c["attempts"]]
    print(
        f"Calls past their bound: {len(over)}; answers cut at max_tokens: "
        f"{sum(1 for c in calls.calls if c['finish'] == 'length')}; failed calls: {len(calls.failures)} "
        f"{sorted({(f['task'], f['kind']) for f in calls.failures})}"
    )

    generation_started = time.monotonic()
    try:
        generated = generate_cases(agent=agent, count=3)
        print(
            f"\nGeneration of 3 cases: {len(generated.cases)} cases in {time.monotonic() - generation_started:.0f} s, "
            f"{generated.requests} request(s)"
        )
        for case in generated.cases:
            print(f"  Q: {case.question[:120]}\n  A: {case.expected_answer[:120]}")
    except (GenerationError, llm.LLMError) as error:
        print(f"\nGeneration of 3 cases failed after {time.monotonic() - generation_started:.0f} s: {error.message}")

    suggest_started = time.monotonic()
    try:
        suggestions = suggestion_generate(run_id=run.pk)
        print(f"\nSuggestions: {len(suggestions)} in {time.monotonic() - suggest_started:.0f} s")
        for suggestion in suggestions[:3]:
            print(f"  [{suggestion.category}] {suggestion.title[:120]}")
    except llm.LLMError as error:
        print(f"\nSuggestions failed after {time.monotonic() - suggest_started:.0f} s: {error.message}")

    print("\nPrompt tokens per kind (as the server counted them):")
    by_task: dict[str, list[dict]] = defaultdict(list)
    for call in calls.calls:
        by_task[call["task"]].append(call)
    for task, items in sorted(by_task.items()):
        prompts = [c["prompt"] for c in items]
        print(
            f"  {task:10} {len(items):3} calls  prompt median {statistics.median(prompts):6.0f}  max {max(prompts):6}"
            f"  completion median {statistics.median(c['completion'] for c in items):5.0f}"
            f"  limit {settings.EVALSITE_LLM_MAX_TOKENS.get(task)}"
        )
    if fake:
        print("(fake server: tokens are 4 characters each)")


if __name__ == "__main__":
    main()

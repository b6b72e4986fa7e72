"""Evalsite's model path alone, as a `--cmd-tool` of the peer bench: the floor a run stands on.

    python bench/peer_model_path.py CASES_CSV BASE_URL CONCURRENCY [--pool process|thread] [--raw]

Each case of the harness's CSV makes the two calls an Evalsite case makes, and nothing else:
no database, no Celery, no run engine. By default they go through Evalsite's gateway exactly
as a run's do (`evalsite.llm.complete` for the agent, `complete_json` with the judge's own
messages and schema for the judge); with `--raw`, as two bare `litellm.completion` calls
(the judge with `response_format` json_object), which is what "through litellm everywhere"
costs before any code of ours.

`--pool process` (the default) is the Celery worker's shape: a main process that imports
and warms the model path up (the worker's own warm-up), calls `gc.freeze()` and forks
CONCURRENCY children, which take cases from a queue; `--pool thread` runs CONCURRENCY
threads in one process instead. Either way, what the whole process tree used is printed at
the end as one line, `MODEL_PATH {json}`: CPU seconds of the tree (user + system) from the
first case on (start-up, warm-up and the sampler's own left out), its peak PSS and the
largest RSS at that peak (smaps_rollup, sampled every 0.25 s). Put beside the peers and an
Evalsite run in one `bench_matrix.py`, it tells how much of Evalsite's span, throughput,
CPU and memory is the model path every call goes through (litellm) and how much is the run
engine around it:

    cd /tmp/peer-bench && python3 bench_matrix.py --tools baseline,promptfoo \\
      --cmd-tool "evalsite=$REPO/.venv/bin/python $REPO/bench/peer_evalsite.py {cases_csv} {base_url} {conc}" \\
      --cmd-tool "litellm=$REPO/.venv/bin/python $REPO/bench/peer_model_path.py {cases_csv} {base_url} {conc} --raw" \\
      --configs 300:200:3,300:0:3 --reps 2

Exits 0 only when every case got an answer and a judge score.
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import multiprocessing
import os
import queue
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_worker_memory import TreeSampler  # noqa: E402  (bench/ is on the path: this script's own folder)

RAW_JUDGE_SYSTEM = (
    "You are an impartial judge. Grade the answer against the expected answer on a 0-10 scale. "
    'Respond only with a JSON object: {"score": <0-10>, "reasoning": "..."}'
)

Case = dict[str, str]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cases_csv")
    parser.add_argument("base_url")
    parser.add_argument("concurrency", type=int)
    parser.add_argument("--pool", choices=["process", "thread"], default="process")
    parser.add_argument("--raw", action="store_true", help="bare litellm.completion calls, not Evalsite's gateway")
    args = parser.parse_args()
    with open(args.cases_csv, newline="", encoding="utf-8") as handle:
        cases = list(csv.DictReader(handle))
    _setup_django(args.base_url)
    from evalsite import llm
    from evalsite.celery import _warm_up_first_case

    # What a first case loads, loaded before any fork, by the worker's own warm-up (against a
    # throwaway server on the loopback interface, so the mock counts only the cases' calls,
    # and no client is left that a forked child would share).
    llm.warm_up()
    _warm_up_first_case()
    one_case = _one_case(args.base_url, raw=args.raw)
    sampler = _Sampler(os.getpid())
    sampler.start()
    started = _cpu_seconds()
    try:
        if args.pool == "process":
            done, children_cpu = _run_processes(cases, one_case, args.concurrency)
        else:
            done, children_cpu = _run_threads(cases, one_case, args.concurrency), 0.0
    finally:
        sampler.stop()
    cpu = _cpu_seconds() - started - sampler.cpu_seconds + children_cpu
    figures = {
        "pool": args.pool,
        "path": "litellm" if args.raw else "gateway",
        "cases": len(cases),
        "answered": done,
        "cpu_s": round(cpu, 2),
        "cpu_ms_per_case": round(cpu * 1000 / max(len(cases), 1), 2),
        "peak_pss_mb": round(sampler.peak_pss / 1024),  # smaps_rollup counts kB
        "largest_rss_mb": round(max((p.get("Rss", 0) for p in sampler.at_peak.values()), default=0) / 1024),
        "processes": 1 + args.concurrency if args.pool == "process" else 1,
        # Each process of the sample with the highest PSS, the main one first: [PSS, private] MB.
        "by_process": [
            [round(p.get("Pss", 0) / 1024), round((p.get("Private_Clean", 0) + p.get("Private_Dirty", 0)) / 1024)]
            for _, p in sorted(sampler.at_peak.items(), key=lambda item: item[0] != os.getpid())
        ],
    }
    print("MODEL_PATH " + json.dumps(figures), flush=True)
    return 0 if done == len(cases) else 1


def _setup_django(base_url: str) -> None:
    """Django's settings, with the gateway's models pointed at the harness's mock."""
    os.environ.update(
        DJANGO_SETTINGS_MODULE="evalsite.settings",
        DATABASE_URL=os.environ.get("DATABASE_URL") or f"sqlite:///{tempfile.mkdtemp(prefix='evalsite-path-')}/x.db",
        EVALSITE_LLM_MODEL="openai/mock-agent",
        EVALSITE_JUDGE_MODEL="openai/mock-judge",
        EVALSITE_LLM_API_BASE=base_url,
        EVALSITE_LLM_API_KEY=os.environ.get("OPENAI_API_KEY", "sk-mock"),
        EVALSITE_LLM_CONCURRENCY="0",  # a run's default: no shared limit, so no Redis on the path
        # The gateway shares what it learns of a model's JSON mode through Redis; none here (a
        # refused connection, once a process), so the figures are the model path's alone.
        REDIS_URL=os.environ.get("REDIS_URL") or "redis://127.0.0.1:1/0",
    )
    import django

    django.setup()
    import redis.asyncio  # noqa: F401  (a worker's main process has it: Celery's transport and cache)


def _one_case(base_url: str, *, raw: bool) -> Callable[[Case], None]:
    """A function that makes one case's two calls to the server at `base_url`."""
    from evalsite import llm

    if raw:
        litellm = llm.litellm_module()

        def one_case(case: Case) -> None:
            answer = litellm.completion(
                model="openai/mock-agent",
                messages=[{"role": "user", "content": case["question"]}],
                api_base=base_url,
                api_key="sk-mock",
                temperature=0,
            )
            judged = litellm.completion(
                model="openai/mock-judge",
                messages=[
                    {"role": "system", "content": RAW_JUDGE_SYSTEM},
                    {
                        "role": "user",
                        "content": f"Question: {case['question']}\nExpected: {case['expected']}\n"
                        f"Answer: {answer.choices[0].message.content}",
                    },
                ],
                api_base=base_url,
                api_key="sk-mock",
                temperature=0,
                response_format={"type": "json_object"},
            )
            json.loads(judged.choices[0].message.content)

        return one_case

    from runs.judging.scoring import JUDGE_SCHEMA, Evaluation, judge_messages

    def gateway_case(case: Case) -> None:
        answer = llm.complete([{"role": "user", "content": case["question"]}], task="agent", temperature=0)
        evaluation = Evaluation(question=case["question"], answer=answer.text, expected_answer=case["expected"])
        judged = llm.complete_json(
            judge_messages(evaluation, {}), schema=JUDGE_SCHEMA, task="judge", purpose="judge", temperature=0
        )
        if judged.data is None:
            raise RuntimeError("the judge gave no score")

    return gateway_case


def _run_threads(cases: list[Case], one_case: Callable[[Case], None], concurrency: int) -> int:
    waiting: queue.SimpleQueue[Case] = queue.SimpleQueue()
    for case in cases:
        waiting.put(case)
    done = [0] * concurrency

    def lane(number: int) -> None:
        while True:
            try:
                case = waiting.get_nowait()
            except queue.Empty:
                return
            one_case(case)
            done[number] += 1

    threads = [threading.Thread(target=lane, args=(number,)) for number in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(done)


def _cpu_seconds() -> float:
    """This process's user + system CPU (every thread), the sampler's own included."""
    times = os.times()
    return times.user + times.system


def _run_processes(cases: list[Case], one_case: Callable[[Case], None], concurrency: int) -> tuple[int, float]:
    """(cases answered, CPU seconds the children used)."""
    context = multiprocessing.get_context("fork")
    waiting: Any = context.Queue()
    answered: Any = context.Queue()
    for case in cases:
        waiting.put(case)
    for _ in range(concurrency):
        waiting.put(None)
    gc.freeze()  # as evalsite/celery.py does before the pool forks
    children = [context.Process(target=_child, args=(waiting, answered, one_case)) for _ in range(concurrency)]
    for child in children:
        child.start()
    reports = [answered.get() for _ in children]
    for child in children:
        child.join()
    return sum(done for done, _ in reports), sum(cpu for _, cpu in reports)


def _child(waiting: Any, answered: Any, one_case: Callable[[Case], None]) -> None:
    done = 0
    try:
        while (case := waiting.get()) is not None:
            one_case(case)
            done += 1
    finally:
        answered.put((done, _cpu_seconds()))


class _Sampler(TreeSampler):
    """bench_worker_memory's sampler of the tree's smaps_rollup, which also keeps its own CPU
    time: it runs in this process, whose CPU is counted as the model path's."""

    cpu_seconds = 0.0

    def run(self) -> None:
        super().run()
        self.cpu_seconds = time.thread_time()


if __name__ == "__main__":
    sys.exit(main())

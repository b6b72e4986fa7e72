"""CPU of one model call through the gateway, next to the same request sent with bare httpx.

    .venv/bin/python bench/bench_llm_call.py [--calls 300] [--profile agent|judge]

Against the fake LLM (tests/fakellm.py in its own process) at 0 ms latency, it measures
process_time per call, in this process only, for:

- the agent's call: `evalsite.llm.complete` with the arguments agents/adapters.py gives it
  (task "agent", the agent's temperature, no tools, the run/case trace);
- the judge's call: `evalsite.llm.complete_json` as runs/judging/scoring.py's ask_judge makes it
  (task and purpose "judge", JUDGE_SCHEMA, temperature 0, the judge's real messages);
- the floor: the agent's request body posted with one reused `httpx.Client`, the answer
  parsed as JSON. What litellm and the gateway add is the difference.

Each is warmed up first (clients built, the JSON mode learnt). With --profile the chosen
call is run under cProfile and its top functions printed. SQLite and an embedded Redis
unless DATABASE_URL / REDIS_URL are set.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import FakeServer, django_in_process, stop_embedded_redis, use_embedded_redis_unless_set  # noqa: E402
from run_all import bench_result  # noqa: E402

WARM_UP_CALLS = 20
QUESTION = "How long is the refund window on the annual plan?"
EXPECTED = "Refunds are available within 30 days of purchase."
SYSTEM = "You are a helpful support agent. Answer briefly.\n\n## Knowledge\nRefunds: 30 days on every plan."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--profile", choices=["agent", "judge", "httpx"], default="")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--sort", default="tottime")
    args = parser.parse_args()
    use_embedded_redis_unless_set()
    fake = FakeServer(0.0)
    os.environ.update(fake.models)
    try:
        django_in_process("evalsite-bench-llm-")
        _bench(args, fake.url)
    finally:
        fake.stop()
        stop_embedded_redis()


def _bench(args: argparse.Namespace, url: str) -> None:
    import httpx

    from evalsite import llm
    from runs.judging.scoring import JUDGE_SCHEMA, Evaluation, judge_messages

    llm.warm_up()
    trace: dict[str, str | int] = {"run": 1, "case": 1}
    agent_messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    judged = Evaluation(question=QUESTION, answer="Refunds are available for 30 days.", expected_answer=EXPECTED)
    judge_input = judge_messages(judged, {})

    def agent() -> None:
        llm.complete(agent_messages, task="agent", temperature=0.7, tools=None, trace=trace)

    def judge() -> None:
        result = llm.complete_json(
            judge_input, schema=JUDGE_SCHEMA, task="judge", purpose="judge", temperature=0, trace=trace
        )
        assert result.data is not None and result.attempts == 1, result

    client = httpx.Client(timeout=60.0)
    body = {"model": "fake-agent", "messages": agent_messages, "temperature": 0.7, "max_tokens": 1024}
    headers = {"Authorization": "Bearer bench", "X-Evalsite-Task": "agent", "X-Evalsite-Run": "1"}

    def floor() -> None:
        response = client.post(f"{url}/chat/completions", json=body, headers=headers)
        response.raise_for_status()
        json.loads(response.content)

    calls: dict[str, Callable[[], None]] = {"agent": agent, "judge": judge, "httpx": floor}
    figures = {name: _cpu_per_call(call, args.calls) for name, call in calls.items()}
    load = os.getloadavg()[0]
    note = f"{args.calls} calls, fake LLM at 0 ms, load {load:.2f}"
    bench_result("agent call (llm.complete) CPU", figures["agent"], "ms/call", note)
    bench_result("judge call (llm.complete_json) CPU", figures["judge"], "ms/call", note)
    bench_result("bare httpx.Client.post CPU (floor)", figures["httpx"], "ms/call", note)
    for name, value in figures.items():
        print(f"{name:>6}: {value:.2f} ms CPU per call")
    if args.profile:
        # This thread's CPU, not wall time: litellm's logging thread would otherwise charge its
        # turns on the GIL to whatever the calling thread was waiting in.
        profiler = cProfile.Profile(time.thread_time)
        profiler.enable()
        for _ in range(args.calls):
            calls[args.profile]()
        profiler.disable()
        pstats.Stats(profiler).sort_stats(args.sort).print_stats(args.top)
    client.close()


def _cpu_per_call(call: Callable[[], Any], calls: int) -> float:
    """ms of this process's CPU per call, after a warm-up."""
    for _ in range(WARM_UP_CALLS):
        call()
    started = time.process_time()
    for _ in range(calls):
        call()
    return (time.process_time() - started) * 1000 / calls


if __name__ == "__main__":
    main()

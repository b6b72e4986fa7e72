"""Scale out: many runs at once over several worker processes, one of them killed mid-way.

    .venv/bin/python bench/bench_scale.py [--runs 20] [--cases 200] [--workers 4] [--no-kill]

Each worker process stands for a host of its own (its own --hostname, the shipped
WORKER_CONCURRENCY, its own worker id and heartbeat); the last one also runs beat (the
reaper). All `--runs` runs are started at once against the fake LLM (200 ms for agent and
judge calls, served in this process so it can count what it receives). When 40 % of all
results are finished, the first worker is killed with SIGKILL (main process and pool
children, as the OOM killer or a lost host would). The bench then checks and reports:
- every run completed with one result per case (nothing lost), and the fake server got
  one agent call per result, except the results the killed worker had in flight (nothing
  doubled beyond the cases that had to be asked again);
- no run ever had more than its window (3) of agent calls in flight at the fake server;
- how the results were shared between the workers;
- what the kill cost: results re-queued (attempts > 1) against the cases the killed
  worker had in flight, and how long after the kill they were finished.

PostgreSQL and Redis when DATABASE_URL / REDIS_URL are set, else a fresh SQLite file
and an embedded Redis. Exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import refund_dataset, stop_embedded_redis, use_embedded_redis_unless_set  # noqa: E402
from run_all import bench_result  # noqa: E402

WINDOW = 3
LATENCY = 0.2
KILL_AT = 0.4


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--no-kill", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{tempfile.mkdtemp(prefix='evalsite-scale-')}/scale.sqlite3")
    os.environ["CELERY_QUEUE"] = f"evalsite-scale-{os.getpid()}"
    os.environ["EVALSITE_RUN_CONCURRENCY"] = str(WINDOW)
    os.environ["EVALSITE_RUN_SUMMARY"] = "false"  # one call per result and judge only, to count them
    use_embedded_redis_unless_set()
    try:
        return _bench(args)
    finally:
        stop_embedded_redis()


def _bench(args: argparse.Namespace) -> int:  # noqa: C901  (one scenario, read top to bottom)
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.utils import timezone

    call_command("migrate", verbosity=0)
    from agents.models import Agent
    from runs.models import Result, Run
    from runs.services import run_start
    from tests.factories import AgentFactory, TeamFactory
    from tests.fakellm import FakeLLM, point_settings_at
    from tests.worker import WorkerProcess

    fake = FakeLLM("127.0.0.1", 0, LATENCY).start()
    point_settings_at(settings, fake)
    settings.EVALSITE_LLM_TIMEOUT = 30.0
    models = {"EVALSITE_RUN_SUMMARY": "false"}
    print(
        f"{args.runs} runs x {args.cases} cases, {args.workers} worker processes x concurrency "
        f"{settings.WORKER_CONCURRENCY}; load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    workers = [
        WorkerProcess(concurrency=settings.WORKER_CONCURRENCY, beat=(n == args.workers - 1), env=models)
        for n in range(args.workers)
    ]
    failures: list[str] = []
    try:
        for worker in workers:
            worker.start()
        team = TeamFactory(name="Scale")
        datasets = []
        for n in range(args.runs):
            agent = AgentFactory(team=team, kind=Agent.Kind.LLM, name=f"Scale agent {n}")
            datasets.append(refund_dataset(agent, f"Scale {n}", args.cases))
        total = args.runs * args.cases
        started = time.monotonic()
        runs = [run_start(agent=d.agent, dataset=d, user=None) for d in datasets]
        killed_at, killed_wall, in_flight_at_kill, killed_id = None, timezone.now(), [], ""
        last_print = started
        while Run.objects.filter(pk__in=[r.pk for r in runs], status__in=Run.ACTIVE_STATUSES).exists():
            finished = Result.objects.filter(run__in=runs, finished_at__isnull=False).count()
            if not args.no_kill and killed_at is None and finished >= KILL_AT * total:
                killed_id = _worker_id(workers[0])
                in_flight_at_kill = list(
                    Result.objects.filter(run__in=runs, claimed_by=killed_id, status=Result.Status.RUNNING).values_list(
                        "pk", flat=True
                    )
                )
                workers[0].kill()
                killed_at, killed_wall = time.monotonic(), timezone.now()
                print(
                    f"[{killed_at - started:5.1f}s] killed worker 1 ({killed_id}) with {len(in_flight_at_kill)} "
                    f"cases in flight, {finished}/{total} finished",
                    flush=True,
                )
            if time.monotonic() - last_print >= 10:
                active = Run.objects.filter(pk__in=[r.pk for r in runs], status__in=Run.ACTIVE_STATUSES).count()
                now = time.monotonic() - started
                print(f"[{now:5.1f}s] {finished}/{total} finished, {active} runs active", flush=True)
                last_print = time.monotonic()
            if time.monotonic() - started > 120 + total * 2:
                failures.append("the runs did not finish in time")
                break
            time.sleep(0.5)
        elapsed = time.monotonic() - started
    finally:
        for worker in workers:
            worker.stop()
        fake.stop()

    for run in runs:
        run.refresh_from_db()
        if (run.status, run.completed, run.errored) != (Run.Status.COMPLETED, args.cases, 0):
            failures.append(f"run {run.pk}: {run.status}, {run.completed}/{args.cases}, {run.errored} errors")
    asked = collections.Counter(int(r.trace.get("case", 0)) for r in fake.requests if r.task == "agent")
    results = list(
        Result.objects.filter(run__in=runs).values("pk", "attempts", "claimed_by", "queued_at", "finished_at")
    )
    again = {r["pk"] for r in results if r["attempts"] > 1}
    doubled = {pk for pk, count in asked.items() if count > 1}
    missing = [r["pk"] for r in results if asked[r["pk"]] == 0]
    if missing:
        failures.append(f"{len(missing)} results never reached the model")
    if not doubled <= set(in_flight_at_kill):
        extra = sorted(doubled - set(in_flight_at_kill))
        failures.append(f"asked twice but not in flight on the killed worker: {extra}")
    peaks = {run.pk: fake.peak_concurrency(task="agent", run=run.pk) for run in runs}
    if max(peaks.values()) > WINDOW:
        failures.append(f"a run had more than {WINDOW} agent calls in flight: {peaks}")
    shares = collections.Counter(r["claimed_by"].split(":")[1] if r["claimed_by"] else "?" for r in results)

    ideal = total * 2 * LATENCY / min(args.runs * WINDOW, args.workers * settings.WORKER_CONCURRENCY)
    print(f"{total} results in {elapsed:.1f} s (ideal with these slots {ideal:.1f} s)", flush=True)
    print(f"per-run peak of agent calls in flight: max {max(peaks.values())} (window {WINDOW})", flush=True)
    print(f"results per worker process (pid: count): {dict(shares)}", flush=True)
    print(
        f"asked again: {len(again)} results re-queued, {len(doubled)} asked twice; "
        f"{len(in_flight_at_kill)} were in flight on the killed worker",
        flush=True,
    )
    reaper = settings.CELERY_BEAT_SCHEDULE["reap-stale-work"]["schedule"]
    if killed_at is not None and in_flight_at_kill:
        lost = [r for r in results if r["pk"] in set(in_flight_at_kill)]
        requeued = max(r["queued_at"] for r in lost)
        last = max(r["finished_at"] for r in lost)
        print(
            f"the killed worker's {len(in_flight_at_kill)} cases were re-queued "
            f"{(requeued - killed_wall).total_seconds():.1f} s after the kill (heartbeat TTL "
            f"{settings.EVALSITE_WORKER_HEARTBEAT_TTL:g} s + reaper every {reaper:g} s) and finished elsewhere "
            f"{(last - killed_wall).total_seconds():.1f} s after it",
            flush=True,
        )
    bench_result(
        f"{args.runs} runs x {args.cases} cases over {args.workers} workers",
        elapsed / ideal,
        "x ideal",
        f"{elapsed:.0f} s; per-run peak {max(peaks.values())} (window {WINDOW}); "
        f"{len(doubled)} asked twice of {len(in_flight_at_kill)} in flight on the killed worker",
    )
    for failure in failures:
        print(f"FAILED: {failure}", flush=True)
    return 1 if failures else 0


def _worker_id(worker: object) -> str:
    from evalsite.models import WorkerHeartbeat

    pid = worker.process.pid  # type: ignore[attr-defined]
    return WorkerHeartbeat.objects.filter(name__contains=f":{pid}:").values_list("name", flat=True).first() or ""


if __name__ == "__main__":
    sys.exit(main())

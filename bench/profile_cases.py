"""Profile the work of one case in this process (no Celery), to find where worker CPU goes.

    .venv/bin/python bench/profile_cases.py [--cases 200] [--sort tottime] [--out var/cases.prof]
    .venv/bin/python bench/profile_cases.py --steps --latency 0.2 --cases 60   # a lane's steps, timed

Starts a run of `cases` cases against the fake LLM at 0 ms latency and executes each
queued result here with `run_execute_case`, as a pool child would, under cProfile:
the claim, the agent and judge calls through litellm, the save and refill. The
messages the refill sends go to a queue nobody reads. Prints CPU ms per case and the
top functions. `--steps` instead times, without cProfile, the steps of a lane that are not
model calls (the save's transaction, reading the next case) and the whole engine call, and
prints their medians; with `--latency 0.2` that is what a lane spends between two cases
at the peer bench's latency. SQLite and an embedded Redis unless DATABASE_URL / REDIS_URL
are set.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import FakeServer, refund_dataset, stop_embedded_redis, use_embedded_redis_unless_set  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--sort", default="tottime")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--out", default="")
    parser.add_argument("--no-profile", action="store_true", help="only time the cases (cProfile roughly doubles CPU)")
    parser.add_argument("--latency", type=float, default=0.0, help="the fake model's latency, seconds")
    parser.add_argument("--steps", action="store_true", help="time a lane's steps (median ms), no cProfile")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{tempfile.mkdtemp(prefix='evalsite-prof-')}/prof.sqlite3")
    os.environ["CELERY_QUEUE"] = f"evalsite-prof-{os.getpid()}"
    use_embedded_redis_unless_set()
    fake = FakeServer(args.latency)
    os.environ.update(fake.models)
    try:
        _profile(args)
    finally:
        fake.stop()
        stop_embedded_redis()


def _profile(args: argparse.Namespace) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.test import override_settings

    call_command("migrate", verbosity=0)
    from agents.models import Agent
    from evalsite import llm
    from evalsite.celery import _preload_litellm
    from runs.models import Result
    from runs.services import run_execute_case, run_start
    from tests.factories import AgentFactory, TeamFactory

    _preload_litellm()
    llm.warm_up()
    agent = AgentFactory(team=TeamFactory(name="Profile"), kind=Agent.Kind.LLM, name="Profile agent")
    run = run_start(agent=agent, dataset=refund_dataset(agent, "Profile", args.cases + 5), user=None)

    def next_queued() -> tuple[int, str] | None:
        return Result.objects.filter(run=run, status=Result.Status.QUEUED).values_list("id", "token").first()

    def finished() -> int:
        return Result.objects.filter(run=run, finished_at__isnull=False).count()

    # Warm up (the first calls build litellm's clients) with a lane time of 0: one case per call.
    with override_settings(EVALSITE_RUN_LANE_SECONDS=0):
        for _ in range(5):
            result_id, token = next_queued()  # type: ignore[misc]
            run_execute_case(result_id=result_id, token=token)
    # Then as a worker runs them: each queued case's task is a lane that goes on with the
    # run's next pending cases (runs/engine/execution.py), so one call may run many.
    if args.steps:
        _steps(next_queued, run_execute_case)
        return
    profiler = cProfile.Profile()
    before = finished()
    cpu, wall = time.process_time(), time.monotonic()
    while item := next_queued():
        if not args.no_profile:
            profiler.enable()
        run_execute_case(result_id=item[0], token=item[1])
        profiler.disable()
    done = finished() - before
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    print(f"{done} cases: {cpu * 1000 / done:.1f} ms CPU per case, {wall * 1000 / done:.1f} ms wall (profiled)")
    if args.no_profile:
        return
    stats = pstats.Stats(profiler).sort_stats(args.sort)
    if args.out:
        stats.dump_stats(args.out)
    stats.print_stats(args.top)


def _steps(next_queued: Callable[[], tuple[int, str] | None], run_execute_case: Callable[..., None]) -> None:
    """Wall time of each step of the lanes, wrapped where the lane calls them."""
    from runs.engine import case as engine
    from runs.engine import lane, saving

    timings: dict[str, list[float]] = collections.defaultdict(list)

    def timed(module: Any, name: str) -> None:
        step = getattr(module, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return step(*args, **kwargs)
            finally:
                timings[name].append((time.perf_counter() - started) * 1000)

        setattr(module, name, wrapper)

    timed(engine, "ask")  # the agent's calls, through the gateway and litellm
    timed(engine, "judge")  # the judge's calls
    timed(saving, "result_save")  # the save's transaction, with the next case's claim
    timed(lane, "claimed_first")  # reading the next case
    wall = time.monotonic()
    while item := next_queued():
        run_execute_case(result_id=item[0], token=item[1])
    wall = time.monotonic() - wall
    cases = len(timings["ask"])
    for name, values in timings.items():
        print(f"{name:13s} {len(values):5d} calls, median {statistics.median(values):7.2f} ms")
    print(f"{cases} cases, {wall * 1000 / cases:.1f} ms wall per case per lane (lanes run one after another here)")


if __name__ == "__main__":
    main()

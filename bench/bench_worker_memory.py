"""Memory of the whole Celery worker tree (main process and pool children) during a run.

    .venv/bin/python bench/bench_worker_memory.py [--cases 300] [--latency 0] [--concurrency 3 4]
        [--worker-env NAME=VALUE ...] [--worker-arg=--max-memory-per-child=...]

For each worker concurrency: a real `celery -A evalsite worker` (prefork pool, as `make run`
and the peer bench start it) on a fresh SQLite file and an embedded Redis, the fake model
server (tests/fakellm.py) answering agent and judge, and one run of `--cases` cases started
through the API. Every 0.25 s the sampler reads /proc/<pid>/smaps_rollup of the main process
and every child and prints, at the end:

- peak PSS of the tree (each shared page counted once, split between its sharers): the
  figure issue 20 compares with promptfoo's peak RSS (~250-275 MB in the peer bench);
- peak summed RSS (what `ps` adds up: shared pages once per process);
- the per-process breakdown at the PSS peak, idle after start (0 cases) and after the run:
  RSS, PSS, shared (clean + dirty) and private (clean + dirty) per process.

Aim (issue 20): tree PSS at most promptfoo's peak RSS in the same run.

What was found (300 cases, fake model at 0 ms, SQLite + embedded Redis, 2 shared cores at
load average 3-6; memory figures barely move with the load):

                                  concurrency 3         concurrency 4
    before (HEAD 59f20b0)         451 MB PSS            501 MB PSS
    after the first-case warm-up  384 MB PSS            424 MB PSS
    --pool threads (not shipped)  269 MB PSS            271 MB PSS

- The floor: one process with Django, Celery, litellm (and the openai SDK's ~1,000 pydantic
  modules it imports) is ~250 MB, all of it loaded before the fork and shared. Idle, the
  tree is ~310 MB at concurrency 3: main 20 MB private, each child ~12 MB private (pymalloc
  arenas written while billiard and Celery set the child up).
- Children's private memory during a run came from their *first* case, and stayed flat
  after it (1, 5, 20, 60 cases: same figures): 12 -> 57 MB each. tracemalloc in a child saw
  only ~4.6 MB newly allocated; the rest was shared pages copied on write. Of the ~36 MB:
  importing what the first case imports lazily (jsonschema with its metaschemas 15.5 MB,
  httpcore + h11 4.3 MB, litellm's provider config map with the fal_ai/edenai modules
  2-3 MB, prometheus service logger 0.8 MB) and litellm's first real HTTP call (9-11 MB).
  New objects land in free holes of the pages inherited from the main process, and every
  function a case runs has its refcount written, so a few MB allocated copy many more.
- When every child has copied a page, the original is private to the main process: that is
  why main's private memory grew from 20 to 66 MB although it ran no case.
- Fix (evalsite/celery.py): the main process does, before the fork, what a first case does:
  a real completion and a JSON-schema completion against a throwaway loopback server
  (evalsite/worker_warmup.py), the judge's jsonschema validation, litellm's cached SSL
  context and provider config map; gc.freeze() again right before each fork. Children now
  grow 12 -> ~39 MB in a run (the rest: refcount writes of the code paths a case runs,
  which CPython 3.11 cannot avoid in a forked child).
- Tried, no effect: MALLOC_ARENA_MAX=2 (384.4 vs 384.3 MB): a child's second thread (litellm's
  logging thread) allocates little. Not tried: --max-memory-per-child, since the growth is a
  one-time cost of the first case: a recycled child would pay it again.
- Only a different pool shape meets the aim: --pool threads keeps one process (269-271 MB
  PSS, and fewer CPU seconds at 0 ms: no IPC with pool children), but the GIL caps Python
  work at one core of the two, and Celery's threads pool does not enforce the soft/hard time
  limits. That is the lead's call, not this bench's.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import FakeServer, refund_dataset, stop_embedded_redis, use_embedded_redis_unless_set  # noqa: E402
from run_all import bench_result  # noqa: E402  (bench/ is on the path: this script's own folder)

FIELDS = ("Rss", "Pss", "Shared_Clean", "Shared_Dirty", "Private_Clean", "Private_Dirty", "Pss_Anon")
MB = 1024  # smaps_rollup counts kB


def smaps_rollup(pid: int) -> dict[str, int]:
    """The kB figures of /proc/<pid>/smaps_rollup (empty if the process is gone)."""
    figures: dict[str, int] = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                name, _, rest = line.partition(":")
                if name in FIELDS:
                    figures[name] = int(rest.split()[0])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return {}
    return figures


def tree(pid: int) -> list[int]:
    """The process and all its descendants, the root first."""
    import psutil

    try:
        root = psutil.Process(pid)
        return [pid, *sorted(child.pid for child in root.children(recursive=True))]
    except psutil.Error:
        return []


Snapshot = dict[int, dict[str, int]]


class TreeSampler(threading.Thread):
    """Samples the tree's smaps_rollup every `interval` s; keeps the peak and its breakdown."""

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak_pss = self.peak_rss = self.samples = 0
        self.at_peak: Snapshot = {}
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.is_set():
            snapshot = take(self.pid)
            if snapshot:
                self.samples += 1
                pss = sum(p.get("Pss", 0) for p in snapshot.values())
                self.peak_rss = max(self.peak_rss, sum(p.get("Rss", 0) for p in snapshot.values()))
                if pss > self.peak_pss:
                    self.peak_pss, self.at_peak = pss, snapshot
            self._done.wait(self.interval)

    def stop(self) -> None:
        self._done.set()
        self.join()


def take(pid: int, attempts: int = 5) -> Snapshot:
    """The figures of every process of the tree, read between two listings of it that agree.

    A process forked while its parent's figures are read shares the parent's pages from then
    on, so the parent's PSS drops by what the child now holds, and the child is not in the
    listing: such a sample counted the tree at a third of its size (seen as 85 MB against
    300). A sample whose tree changed while it was read is taken again; empty if it never
    settled in `attempts` reads (the sampler skips it). A zombie, listed but with no memory
    left to read, is left out."""
    listed = tree(pid)
    for _ in range(attempts):
        snapshot = {p: figures for p in listed if (figures := smaps_rollup(p))}
        again = tree(pid)
        if again == listed:
            return snapshot
        listed = again
    return {}


def describe(snapshot: Snapshot, main_pid: int) -> list[str]:
    lines = [f"    {'process':<12}{'RSS':>8}{'PSS':>8}{'shared':>8}{'private':>9}{'(dirty)':>9}  MB"]
    for pid, f in snapshot.items():
        role = "main" if pid == main_pid else f"child {pid}"
        shared = f.get("Shared_Clean", 0) + f.get("Shared_Dirty", 0)
        private = f.get("Private_Clean", 0) + f.get("Private_Dirty", 0)
        lines.append(
            f"    {role:<12}{f['Rss'] / MB:>8.1f}{f['Pss'] / MB:>8.1f}{shared / MB:>8.1f}"
            f"{private / MB:>9.1f}{f.get('Private_Dirty', 0) / MB:>9.1f}"
        )
    total = {name: sum(f.get(name, 0) for f in snapshot.values()) for name in FIELDS}
    lines.append(f"    {'tree':<12}{total['Rss'] / MB:>8.1f}{total['Pss'] / MB:>8.1f}")
    return lines


def _prepare_environment() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{tempfile.mkdtemp(prefix='evalsite-membench-')}/bench.sqlite3")
    os.environ["CELERY_QUEUE"] = f"evalsite-membench-{os.getpid()}"
    os.environ["EVALSITE_RUN_CONCURRENCY"] = "3"
    use_embedded_redis_unless_set()


def _setup_data(cases: int) -> tuple[object, object, str]:
    from accounts.models import ApiToken
    from agents.models import Agent
    from tests.factories import AgentFactory, MembershipFactory, TeamFactory, UserFactory

    team = TeamFactory(name=f"Membench {time.time_ns()}")
    user = MembershipFactory(team=team, user=UserFactory(username=f"membench{time.time_ns()}")).user
    raw = ApiToken.generate_raw()
    ApiToken.objects.create(user=user, name="bench", hint=raw[:8], token_hash=ApiToken.hash(raw))
    agent = AgentFactory(team=team, kind=Agent.Kind.LLM, name="Membench agent")
    dataset = refund_dataset(agent, f"Membench {cases} cases", cases)
    # The judge's preflight, before the measured run: the fake judge fails it (one score for
    # all), so the run is started anyway (allow_failed_preflight).
    from runs.judging.configs import dataset_judge_config
    from runs.services.preflight import judge_config_preflight

    judge_config_preflight(config=dataset_judge_config(dataset=dataset))
    return agent, dataset, raw


def _start_worker(concurrency: int, env: dict[str, str], args: list[str], log: Path) -> subprocess.Popen:
    from django.conf import settings

    from tests.worker import worker_env

    command = [
        sys.executable, "-m", "celery", "-A", "evalsite", "worker", "--loglevel", "INFO",
        "--concurrency", str(concurrency), "--queues", settings.CELERY_TASK_DEFAULT_QUEUE,
        "--hostname", f"membench-{os.getpid()}-{time.monotonic_ns()}@%h", "--without-gossip", "--without-mingle",
        *args,
    ]  # fmt: skip
    with open(log, "w") as out:
        process = subprocess.Popen(
            command, cwd=ROOT, env=worker_env(env), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.monotonic() + 180
    while " ready." not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"The Celery worker did not start:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.1)
    return process


def _stop_worker(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def measure(cases: int, latency: float, concurrency: int, env: dict[str, str], args: list[str]) -> dict:
    from django.conf import settings
    from django.test import Client

    from runs.models import Run

    fake = FakeServer(latency)
    models = {**fake.models, "EVALSITE_RUN_SUMMARY": "false"}
    for name, value in models.items():
        setattr(settings, name, value if name != "EVALSITE_RUN_SUMMARY" else False)
    log = Path(tempfile.mkdtemp(prefix="evalsite-membench-log-")) / "worker.log"
    process = _start_worker(concurrency, {**models, **env}, args, log)
    import psutil

    try:
        time.sleep(1.0)  # the pool children have forked and settled
        idle = take(process.pid)
        sampler = TreeSampler(process.pid)
        sampler.start()
        agent, dataset, token = _setup_data(cases)
        started = time.monotonic()
        url = f"/api/agents/{agent.pk}/eval/datasets/{dataset.pk}/runs"
        response = Client().post(
            url,
            data={"allow_failed_preflight": True},
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )
        assert response.status_code == 201, response.content
        run_id = response.json()["id"]
        while Run.objects.filter(pk=run_id, status__in=Run.ACTIVE_STATUSES).exists():
            time.sleep(0.1)
            if time.monotonic() - started > 60 + cases * 2:
                raise RuntimeError(f"The run did not finish:\n{log.read_text(errors='replace')[-4000:]}")
        elapsed = time.monotonic() - started
        time.sleep(0.5)
        sampler.stop()
        after = take(process.pid)
        cpu = sum(sum(psutil.Process(pid).cpu_times()[:2]) for pid in after)
        run = Run.objects.get(pk=run_id)
        assert (run.status, run.completed, run.errored) == (Run.Status.COMPLETED, cases, 0), (
            run.status,
            run.completed,
            run.errored,
            log.read_text(errors="replace")[-3000:],
        )
    finally:
        _stop_worker(process)
        fake.stop()
    return {
        "pid": process.pid,
        "elapsed": elapsed,
        "cpu": cpu,
        "idle": idle,
        "after": after,
        "sampler": sampler,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--latency", type=float, default=0.0, help="the fake model's latency, seconds")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[3, 4])
    parser.add_argument("--worker-env", action="append", default=[], help="NAME=VALUE for the worker")
    parser.add_argument("--worker-arg", action="append", default=[], help="an extra `celery worker` argument")
    parser.add_argument("--label", default="", help="a name for this configuration in the BENCH lines")
    options = parser.parse_args()
    env = dict(item.split("=", 1) for item in options.worker_env)
    _prepare_environment()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    try:
        for concurrency in options.concurrency:
            load = os.getloadavg()
            m = measure(options.cases, options.latency, concurrency, env, options.worker_arg)
            sampler: TreeSampler = m["sampler"]
            print(
                f"\nconcurrency {concurrency}, {options.cases} cases at {options.latency * 1000:.0f} ms "
                f"{' '.join(options.worker_env + options.worker_arg)}: {m['elapsed']:.1f} s, "
                f"worker CPU {m['cpu']:.1f} s (start-up included), load average {load[0]:.2f} before, "
                f"{os.getloadavg()[0]:.2f} after; {sampler.samples} samples",
                flush=True,
            )
            print(
                f"  peak PSS of the tree {sampler.peak_pss / MB:.1f} MB; peak summed RSS {sampler.peak_rss / MB:.1f} MB"
            )
            for title, snapshot in (("idle, 0 cases", m["idle"]), ("at the PSS peak", sampler.at_peak),
                                    (f"after {options.cases} cases", m["after"])):  # fmt: skip
                print(f"  {title}:")
                print("\n".join(describe(snapshot, m["pid"])), flush=True)
            note = f"{options.label or 'as shipped'}; load {load[0]:.1f}; aim <= promptfoo's peak RSS (~250-275 MB)"
            bench_result(f"worker tree peak PSS, concurrency {concurrency}", sampler.peak_pss / MB, "MB", note)
    finally:
        stop_embedded_redis()


if __name__ == "__main__":
    main()

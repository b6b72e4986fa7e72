"""A real Celery worker in a child process, pointed at the test database and Redis."""

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from django.conf import settings
from django.db import connection

from tests.waiting import wait_for

ROOT = Path(__file__).resolve().parent.parent


def _database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or ""
    auth = f"{user}:{db.get('PASSWORD') or ''}@" if user else ""
    return f"postgres://{auth}{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


def worker_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a child process needs to share this test's database, Redis and model."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "evalsite.settings",
        "DATABASE_URL": _database_url(),
        "CELERY_QUEUE": settings.CELERY_TASK_DEFAULT_QUEUE,
        "PYTHONUNBUFFERED": "1",
    }
    for name in (
        "EVALSITE_LLM_MODEL",
        "EVALSITE_JUDGE_MODEL",
        "EVALSITE_EMBEDDING_MODEL",
        "EVALSITE_LLM_API_BASE",
        "EVALSITE_LLM_API_KEY",
        "EVALSITE_LLM_TIMEOUT",
        "EVALSITE_LLM_RETRIES",
        "EVALSITE_LLM_BACKOFF",
        "EVALSITE_LLM_CONCURRENCY",
        "EVALSITE_LLM_QUEUE_TIMEOUT",
        "EVALSITE_LLM_JSON_MODE",
        "EVALSITE_RUN_CONCURRENCY",
        "EVALSITE_STALE_CLAIM_SECONDS",
        "MEDIA_ROOT",
    ):
        value = getattr(settings, name, None)
        if value is not None and value != "":
            env[name] = str(value)
    if settings.EVALSITE_LLM_RETRY_TIMEOUTS:
        env["EVALSITE_LLM_RETRY_TIMEOUTS"] = "true"
    env.update(extra or {})
    return env


class WorkerProcess:
    def __init__(self, *, concurrency: int = 4, beat: bool = False, env: dict[str, str] | None = None) -> None:
        self.concurrency = concurrency
        self.beat = beat
        self.extra_env = env or {}
        self.process: subprocess.Popen | None = None
        # Logs live in the temp directory, not var/, so repeated test runs leave nothing behind.
        self.log_path = (
            Path(tempfile.gettempdir()) / "evalsite-test-workers" / f"{os.getpid()}-{time.monotonic_ns()}.log"
        )

    def start(self) -> "WorkerProcess":
        self.log_path.parent.mkdir(exist_ok=True)
        command = [
            sys.executable, "-m", "celery", "-A", "evalsite", "worker",
            "--loglevel", "INFO", "--concurrency", str(self.concurrency),
            "--queues", settings.CELERY_TASK_DEFAULT_QUEUE,
            "--hostname", f"test-{os.getpid()}-{time.monotonic_ns()}@%h",
            "--without-gossip", "--without-mingle",
        ]  # fmt: skip
        if self.beat:
            command += ["--beat", "--schedule", str(self.log_path.with_suffix(".beat"))]
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=worker_env(self.extra_env), stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        self._wait_ready()
        return self

    def _wait_ready(self, timeout: float = 120) -> None:
        def ready() -> bool:
            if self.process and self.process.poll() is not None:
                raise RuntimeError(f"Celery worker exited early:\n{self.read_log()}")
            return " ready." in self.read_log()

        try:
            wait_for(ready, timeout=timeout, what="the Celery worker to be ready")
        except AssertionError:
            raise RuntimeError(f"Celery worker did not become ready:\n{self.read_log()}") from None

    def read_log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL the whole worker (main process and pool children), as an OOM killer would."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def terminate(self, timeout: float = 60) -> None:
        """SIGTERM: Celery's warm shutdown, waiting for tasks in flight."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()

    def stop(self) -> None:
        self.terminate(timeout=20)
        self.kill()
        self.log.close()

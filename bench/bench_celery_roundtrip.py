"""The floor under every background job: how long one Celery task takes from
`.delay()` to done, and how many a 4-process worker runs per second, through a real
redis-server (the embedded one `make run` uses) and a real worker process."""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from run_all import bench_result  # noqa: E402

from evalsite import embedded_redis  # noqa: E402

ROUND_TRIPS = 200
BURST = 1000
CONCURRENCY = 4


def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="evalsite-bench-"))
    socket_path = workdir / "redis.sock"
    redis_server = embedded_redis.start(socket_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = {
        **os.environ,
        "REDIS_URL": f"redis+socket://{socket_path}",
        "CELERY_QUEUE": f"bench-{uuid.uuid4().hex[:8]}",
        "DATABASE_URL": f"sqlite:///{workdir / 'bench.sqlite3'}",
        "DJANGO_SETTINGS_MODULE": "evalsite.settings",
    }
    os.environ.update(env)
    worker_log = open(workdir / "worker.log", "w")
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "evalsite", "worker", "--loglevel", "WARNING",
         "--concurrency", str(CONCURRENCY), "--queues", env["CELERY_QUEUE"], "--without-gossip", "--without-mingle"],
        cwd=ROOT, env=env, stdout=worker_log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        import django

        django.setup()
        import redis
        from django.conf import settings

        from evalsite.tasks import HEALTH_KEY_PREFIX, health_check

        client = redis.Redis.from_url(settings.REDIS_CLIENT_URL)

        def wait_all(tokens: list[str], timeout: float = 120) -> None:
            deadline = time.monotonic() + timeout
            pending = list(tokens)
            while pending:
                if time.monotonic() > deadline:
                    raise SystemExit(f"{len(pending)} tasks never ran:\n{(workdir / 'worker.log').read_text()[-3000:]}")
                found = client.exists(*(HEALTH_KEY_PREFIX + t for t in pending[:500]))
                if found == len(pending[:500]):
                    pending = pending[500:]
                else:
                    time.sleep(0.001)

        wait_all([_send(health_check) for _ in range(20)])  # warm up: worker ready, pool forked
        latencies = []
        for _ in range(ROUND_TRIPS):
            started = time.perf_counter()
            wait_all([_send(health_check)])
            latencies.append((time.perf_counter() - started) * 1000)
        latencies.sort()
        bench_result("round trip p50", statistics.median(latencies), "ms", f"{ROUND_TRIPS} tasks one at a time")
        bench_result("round trip p95", latencies[int(0.95 * len(latencies)) - 1], "ms", "")

        started = time.perf_counter()
        tokens = [_send(health_check) for _ in range(BURST)]
        wait_all(tokens)
        elapsed = time.perf_counter() - started
        bench_result("throughput", BURST / elapsed, "tasks/s", f"{BURST} tasks, worker concurrency {CONCURRENCY}")
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, 9)
        embedded_redis.stop(redis_server)
        worker_log.close()
        shutil.rmtree(workdir, ignore_errors=True)


def _send(task) -> str:
    token = uuid.uuid4().hex
    task.delay(token)
    return token


if __name__ == "__main__":
    main()

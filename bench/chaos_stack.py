"""What the chaos table (bench/chaos_table.py) runs its faults against, all its own: a private
PostgreSQL cluster, a redis-server, Evalsite's whole stack (`manage.py runstack`: gunicorn, the
worker under its supervisor, beat) and a poller that watches a run over real HTTP.

The cluster is made with the machine's own binaries (/usr/lib/postgresql/*/bin: initdb, pg_ctl)
in a temporary directory on a free port, so restarting it or cutting its sessions never
touches the machine's shared database. Every process here is started by this module and
stopped by its pid (or its own process group), never by name.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from common import ROOT, free_port

PG_USER = "postgres"  # initdb refuses to run as root: the cluster belongs to this system user


def wait_until(predicate: Callable[[], object], *, timeout: float, what: str, interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"Timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


class PrivateCluster:
    """A throwaway PostgreSQL cluster: initdb into a temporary directory, pg_ctl on a free port."""

    def __init__(self) -> None:
        binaries = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
        if not binaries:
            raise RuntimeError("No PostgreSQL binaries under /usr/lib/postgresql/*/bin")
        self.bin = Path(binaries[-1]).parent
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="evalsite-chaos-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "postgres.log"
        self.url = f"postgres://postgres@127.0.0.1:{self.port}/evalsite"

    def _as_owner(self, *command: str) -> None:
        user = PG_USER if os.geteuid() == 0 else None
        subprocess.run(command, check=True, user=user, cwd=self.dir, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def init(self) -> PrivateCluster:
        if os.geteuid() == 0:
            shutil.chown(self.dir, PG_USER)
        self._as_owner(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")
        self.start()
        self._as_owner(
            str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "evalsite"
        )
        return self

    def start(self) -> None:
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._as_owner(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start"
        )

    def restart(self) -> None:
        """pg_ctl restart -m fast: every session is ended, the server stops and comes back."""
        options = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._as_owner(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", options, "-m", "fast", "-w",
            "restart",
        )  # fmt: skip

    def terminate_sessions(self) -> int:
        """pg_terminate_backend of every client session of the database but the caller's own."""
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres") as admin:
            admin.autocommit = True
            row = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = 'evalsite' AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
            ).fetchone()
        return int(row[0]) if row else 0

    def stop(self) -> None:
        if self.data.exists():
            try:
                self._as_owner(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
            except subprocess.CalledProcessError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)


class RedisServer:
    """A redis-server on a free port with no persistence: a restart comes back empty."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> RedisServer:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        import redis

        client = redis.Redis.from_url(self.url)

        def pings() -> bool:
            try:
                return bool(client.ping())
            except redis.ConnectionError:
                return False

        wait_until(pings, timeout=30, what="redis-server")
        client.close()
        return self

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


class Stack:
    """`manage.py runstack` in its own session, on the cluster and Redis above."""

    def __init__(self, env: dict[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(tempfile.mkdtemp(prefix="evalsite-chaos-stack-")) / "runstack.log"
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "runstack", "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

    def wait_running(self, timeout: float = 300) -> None:
        def running() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(f"runstack exited:\n{self.read_log()[-4000:]}")
            log = self.read_log()
            # And its standby warm (runstack starts it as the worker gets ready), as the stack is
            # from then on: a fault meets the stack as it runs, not as it starts.
            return "Evalsite is running at" in log and ("standby started" not in log or "standby: warmed up" in log)

        wait_until(running, timeout=timeout, what="the stack to start", interval=0.5)

    def read_log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def worker_pid(self) -> int:
        """The worker's main process now (the first one, or the latest restart)."""
        found = re.findall(r"worker (?:started|restarted) \(pid (\d+)", self.read_log())
        return int(found[-1])

    def worker_restarts(self) -> int:
        return len(re.findall(r"worker restarted \(pid \d+", self.read_log()))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        self.log.close()


class Poller(threading.Thread):
    """A person watching a run: once a second, the run page's poll (as htmx asks it, signed in
    with a session cookie) and the API's run status (with a token), over real HTTP. Every
    answer's status is kept; a refused connection counts as 0."""

    def __init__(self, base_url: str, page: str, status: str, *, cookie: str, token: str) -> None:
        super().__init__(daemon=True)
        self.requests = [
            urllib.request.Request(base_url + page, headers={"Cookie": cookie, "HX-Request": "true"}),
            urllib.request.Request(base_url + status, headers={"Authorization": f"Bearer {token}"}),
        ]
        self.codes: list[int] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(1.0):
            for request in self.requests:
                self.codes.append(self._get(request))

    @staticmethod
    def _get(request: urllib.request.Request) -> int:
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                response.read()
                return response.status
        except urllib.error.HTTPError as error:
            return error.code
        except OSError:
            return 0

    def stop(self) -> list[int]:
        self._stop_event.set()
        self.join(timeout=60)
        return self.codes

"""The worker-hosts test's machinery (tests/hosts/worker_hosts_ci.py): a virtual network of
hosts on this machine, and a PostgreSQL and a Redis of its own on it.

- A Linux bridge (BRIDGE, SERVER_IP/24) in the root namespace: the "server" host, where
  PostgreSQL, Redis, beat and the fake model server listen.
- One network namespace per worker host, each with a veth pair into the bridge, an address
  of its own and, started through `unshare --uts`, a hostname of its own; its loopback is up
  (the worker's warm-up serves itself on it) but leads nowhere else.
- A host is cut off by taking its veth's bridge end down: its packets are dropped without a
  word (a pulled cable, a partitioned rack), nothing is reset or refused.

Every context manager here removes what it made on the way out, failed or not.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

BRIDGE = "evs-br0"
SUBNET = "10.77.0"
SERVER_IP = f"{SUBNET}.1"


class HostsFailure(Exception):
    pass


def sh(*args: str, check: bool = True, timeout: float = 120, **kwargs) -> str:
    completed = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kwargs)
    if check and completed.returncode != 0:
        raise HostsFailure(f"{' '.join(args)} exited with {completed.returncode}: {completed.stderr.strip()}")
    return completed.stdout


class Host:
    """A worker host: a network namespace named `name`, reached from the bridge through `veth`."""

    def __init__(self, number: int) -> None:
        self.name = f"evs-w{number}"
        self.ip = f"{SUBNET}.{10 + number}"
        self.veth = f"evs-v{number}"  # the bridge's end, in the root namespace

    def command(self, *args: str) -> list[str]:
        """`args` run on this host: in its namespace, under its own hostname."""
        script = 'hostname "$0" && exec "$@"'
        return ["ip", "netns", "exec", self.name, "unshare", "--uts", "sh", "-c", script, self.name, *args]

    def cut(self) -> None:
        sh("ip", "link", "set", self.veth, "down")

    def restore(self) -> None:
        sh("ip", "link", "set", self.veth, "up")


def _remove_network(hosts: list[Host]) -> None:
    for host in hosts:
        sh("ip", "link", "del", host.veth, check=False)
        sh("ip", "netns", "del", host.name, check=False)
    sh("ip", "link", "del", BRIDGE, check=False)


@contextlib.contextmanager
def network(count: int) -> Iterator[list[Host]]:
    hosts = [Host(number) for number in range(1, count + 1)]
    _remove_network(hosts)  # left over by a run that was killed before it could clean up
    try:
        sh("ip", "link", "add", BRIDGE, "type", "bridge", "stp_state", "0", "forward_delay", "0")
        sh("ip", "addr", "add", f"{SERVER_IP}/24", "dev", BRIDGE)
        sh("ip", "link", "set", BRIDGE, "up")
        for host in hosts:
            sh("ip", "netns", "add", host.name)
            sh("ip", "link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", host.name)
            sh("ip", "link", "set", host.veth, "master", BRIDGE)
            sh("ip", "link", "set", host.veth, "up")
            sh("ip", "-n", host.name, "addr", "add", f"{host.ip}/24", "dev", "eth0")
            sh("ip", "-n", host.name, "link", "set", "eth0", "up")
            sh("ip", "-n", host.name, "link", "set", "lo", "up")
        yield hosts
    finally:
        _remove_network(hosts)


def free_port(host: str = SERVER_IP) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def _wait_port(host: str, port: int, what: str, process: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise HostsFailure(f"{what} exited with {process.returncode} before it listened")
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1):
            return
        time.sleep(0.2)
    raise HostsFailure(f"{what} did not listen on {host}:{port} within {seconds:.0f} s")


def _stop(process: subprocess.Popen, seconds: float = 30) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@contextlib.contextmanager
def postgres() -> Iterator[str]:
    """A PostgreSQL cluster of its own, listening on the bridge only, trusting the subnet: its URL."""
    bin_dir = sorted(Path("/usr/lib/postgresql").glob("*/bin"))[-1]
    folder = Path(tempfile.mkdtemp(prefix="evalsite-hosts-pg-", dir="/var/tmp"))
    shutil.chown(folder, "postgres", "postgres")
    data = folder / "data"
    port = free_port()
    as_postgres = ["runuser", "-u", "postgres", "--"]
    process = None
    try:
        sh(*as_postgres, str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        with open(data / "pg_hba.conf", "a") as hba:
            hba.write(f"host all all {SUBNET}.0/24 trust\n")
        settings = ["-h", SERVER_IP, "-p", str(port), "-k", str(folder), "-c", "max_connections=300",
                    "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "shared_buffers=256MB"]  # fmt: skip
        log = open(folder / "postgres.log", "wb")  # noqa: SIM115 (closed in finally)
        process = subprocess.Popen([*as_postgres, str(bin_dir / "postgres"), "-D", str(data), *settings],
                                   stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        _wait_port(SERVER_IP, port, "PostgreSQL", process)
        for _ in range(60):
            if subprocess.run([str(bin_dir / "pg_isready"), "-q", "-h", SERVER_IP, "-p", str(port)]).returncode == 0:
                break
            time.sleep(0.5)
        psql = ["psql", "-h", SERVER_IP, "-p", str(port), "-U", "postgres", "-d", "postgres", "-q"]
        sh(*psql, "-c", "CREATE DATABASE evalsite")
        yield f"postgres://postgres@{SERVER_IP}:{port}/evalsite"
    finally:
        if process is not None:
            sh(*as_postgres, str(bin_dir / "pg_ctl"), "stop", "-D", str(data), "-m", "immediate", check=False)
            _stop(process)
            log.close()
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def redis() -> Iterator[str]:
    """A Redis of its own on the bridge only, nothing saved: its URL."""
    folder = Path(tempfile.mkdtemp(prefix="evalsite-hosts-redis-", dir="/var/tmp"))
    port = free_port()
    process = subprocess.Popen(
        ["redis-server", "--bind", SERVER_IP, "--port", str(port), "--save", "", "--appendonly", "no",
         "--dir", str(folder), "--logfile", str(folder / "redis.log"), "--protected-mode", "no"],
    )  # fmt: skip
    try:
        _wait_port(SERVER_IP, port, "Redis", process)
        yield f"redis://{SERVER_IP}:{port}/0"
    finally:
        _stop(process)
        shutil.rmtree(folder, ignore_errors=True)


def stop_groups(processes: list[subprocess.Popen], seconds: float = 20) -> None:
    """SIGTERM processes started in sessions of their own (a warm shutdown), then kill what is
    left of their groups after `seconds`."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    deadline = time.monotonic() + seconds
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, 9)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)

"""Smoke test of `make run` (called by .ci/run; not a pytest test).

It copies the project into a temporary directory (so it starts with an empty var/:
a fresh SQLite database and its own embedded Redis socket), then, with DATABASE_URL
and REDIS_URL unset, as on a fresh machine:

1. starts `make run`, waits for the banner, signs in over HTTP as the demo user,
   gets the agents page and a static file, and has the stack's worker execute a
   task through the embedded Redis;
2. presses Ctrl-C (SIGINT to make's process group, like a terminal) and checks
   that no process of the stack is left;
3. starts `make run` again on the same var/ (the demo load must be idempotent),
   stops it with SIGTERM to make alone (like a process manager) and checks again.

Usage: .venv/bin/python tests/smoke/smoke_run.py   (exit status 0 = passed)
"""

import http.cookiejar
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
BANNER = "Evalsite is running at"
BOOT_TIMEOUT = 300  # the first boot migrates a new database and may pip-install
STOP_TIMEOUT = 90


class SmokeFailure(Exception):
    pass


def log(message: str) -> None:
    print(f"smoke | {message}", flush=True)


def copy_project(target: Path) -> None:
    """The working tree as `git ls-files` sees it (tracked and new files), .venv linked."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, check=True, capture_output=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    (target / ".venv").symlink_to(ROOT / ".venv")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stack_env(port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_QUEUE")}
    env.update(PORT=str(port), PYTHONUNBUFFERED="1")
    return env


class Stack:
    def __init__(self, workdir: Path, port: int, name: str) -> None:
        self.workdir, self.port = workdir, port
        self.log_path = workdir / f"smoke-{name}.log"
        self.base = f"http://127.0.0.1:{port}"

    def start(self) -> "Stack":
        self.log_file = open(self.log_path, "wb")
        # A new session, like a terminal's foreground job: make and runstack share a group.
        self.process = subprocess.Popen(
            ["make", "--no-print-directory", "run"], cwd=self.workdir, env=stack_env(self.port),
            stdin=subprocess.DEVNULL, stdout=self.log_file, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + BOOT_TIMEOUT
        while BANNER not in self.output():
            if self.process.poll() is not None:
                raise SmokeFailure(f"make run exited with {self.process.returncode} before serving:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise SmokeFailure(f"make run printed no banner within {BOOT_TIMEOUT} s:\n{self.tail()}")
            time.sleep(0.5)
        return self

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.output().splitlines()[-lines:])

    def stop(self, signum: int, *, group: bool) -> int:
        if group:
            os.killpg(self.process.pid, signum)
        else:
            self.process.send_signal(signum)
        try:
            code = self.process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise SmokeFailure(f"make run did not stop within {STOP_TIMEOUT} s:\n{self.tail()}") from None
        finally:
            self.log_file.close()
        return code


def check_http(stack: Stack) -> None:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with opener.open(f"{stack.base}/agents/", timeout=30) as response:
        if "/accounts/login/" not in response.url:
            raise SmokeFailure(f"An anonymous visitor was not sent to the login page (got {response.url}).")
        page = response.read().decode()
    log("an anonymous visit to /agents/ lands on the login page")
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    if not match:
        raise SmokeFailure("The login page has no CSRF token.")
    form = urllib.parse.urlencode(
        {"csrfmiddlewaretoken": match.group(1), "username": "demo", "password": "evalsite-demo"}
    ).encode()
    request = urllib.request.Request(response.url, data=form, headers={"Referer": response.url})
    with opener.open(request, timeout=30) as response:
        landed, page = response.url, response.read().decode()
    if urllib.parse.urlparse(landed).path != "/agents/":
        raise SmokeFailure(f"Signing in as the demo user did not lead to the agents page (landed on {landed}).")
    if "Acme Cloud Support" not in page:
        raise SmokeFailure("The agents page does not list the demo agent “Acme Cloud Support”.")
    log("signed in as demo over HTTP; the agents page lists “Acme Cloud Support”")
    # The stylesheet the page links (collected, its name carries its hash: only that name is kept).
    stylesheet = re.search(r'href="(/static/css/app[.\w]*\.css)"', page)
    if not stylesheet:
        raise SmokeFailure("The agents page links no stylesheet.")
    with opener.open(f"{stack.base}{stylesheet.group(1)}", timeout=30) as response:
        if response.status != 200 or b"{" not in response.read():
            raise SmokeFailure(f"The stylesheet {stylesheet.group(1)} is not served.")
    log(f"static files are served (whitenoise): {stylesheet.group(1)}")


def check_worker(stack: Stack) -> None:
    """Send a task to the stack's broker and wait until the stack's worker has run it."""
    token = uuid.uuid4().hex
    code = (
        "import sys, time, redis\n"
        "from django.conf import settings\n"
        "from evalsite.tasks import HEALTH_KEY_PREFIX, health_check\n"
        f"health_check.delay({token!r})\n"
        "client = redis.Redis.from_url(settings.REDIS_CLIENT_URL)\n"
        "deadline = time.monotonic() + 60\n"
        f"while client.get(HEALTH_KEY_PREFIX + {token!r}) is None and time.monotonic() < deadline:\n"
        "    time.sleep(0.2)\n"
        f"value = client.get(HEALTH_KEY_PREFIX + {token!r})\n"
        "sys.exit(f'no worker ran the task') if value is None else print(value.decode())\n"
    )
    result = subprocess.run(
        [str(stack.workdir / ".venv/bin/python"), "manage.py", "shell", "-c", code],
        cwd=stack.workdir, env=stack_env(stack.port), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if result.returncode != 0:
        raise SmokeFailure(f"The worker check failed:\n{result.stdout}\n{result.stderr}")
    log(f"the stack's worker ran a task from the embedded Redis ({result.stdout.strip().splitlines()[-1]})")


def stack_processes(workdir: Path) -> list[psutil.Process]:
    """Every process started from the copy: its working directory or command line is inside it."""
    found = []
    for process in psutil.process_iter(["pid", "cmdline", "cwd"]):
        try:
            cwd = process.info["cwd"] or ""
            cmdline = " ".join(process.info["cmdline"] or [])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if process.pid != os.getpid() and (cwd.startswith(str(workdir)) or str(workdir) in cmdline):
            found.append(process)
    return found


def check_no_orphans(workdir: Path, how: str) -> None:
    # Give reparented zombies a moment to be reaped before calling them orphans.
    deadline = time.monotonic() + 5
    while (left := stack_processes(workdir)) and time.monotonic() < deadline:
        time.sleep(0.2)
    if left:
        described = "\n".join(f"  {p.pid} {' '.join(p.cmdline())}" for p in left if p.is_running())
        for process in left:
            process.kill()
        raise SmokeFailure(f"Processes were left running after {how}:\n{described}")
    log(f"no process of the stack is left after {how}")


def main() -> int:
    workdir = Path(tempfile.mkdtemp(prefix="evalsite-smoke-"))
    stack: Stack | None = None
    try:
        copy_project(workdir)
        log(f"project copied to {workdir}; DATABASE_URL and REDIS_URL unset")

        stack = Stack(workdir, free_port(), "first").start()
        log(f"make run serves {stack.base} with a new SQLite database and the embedded Redis")
        check_http(stack)
        check_worker(stack)
        code = stack.stop(signal.SIGINT, group=True)
        if "Stopped. No Evalsite process is left running." not in stack.output():
            raise SmokeFailure(f"Ctrl-C did not stop the stack cleanly (make exited {code}):\n{stack.tail()}")
        check_no_orphans(workdir, "Ctrl-C")

        stack = Stack(workdir, free_port(), "second").start()
        if "Demo data already present; nothing changed." not in stack.output():
            raise SmokeFailure(f"The second start loaded the demo again:\n{stack.tail()}")
        log("a second start on the same var/ keeps the demo data as it was")
        check_http(stack)
        stack.stop(signal.SIGTERM, group=False)
        if "Stopped. No Evalsite process is left running." not in stack.output():
            raise SmokeFailure(f"SIGTERM did not stop the stack cleanly:\n{stack.tail()}")
        check_no_orphans(workdir, "SIGTERM to make")
        stack = None
    except SmokeFailure as failure:
        log(f"FAILED: {failure}")
        return 1
    finally:
        if stack is not None and stack.process.poll() is None:
            os.killpg(stack.process.pid, signal.SIGKILL)
        for process in stack_processes(workdir):
            process.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    log("make run smoke test passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

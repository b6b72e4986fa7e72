"""`make run`'s launcher: the whole stack in the foreground of one terminal.

It starts the embedded Redis (only when REDIS_URL is unset), a Celery worker, Celery
beat and gunicorn, prefixes their output like `docker compose up`, and on Ctrl-C,
SIGTERM or SIGHUP stops them in order: web, beat, worker (warm shutdown, so tasks in
flight finish), Redis. A second Ctrl-C kills at once.

It supervises: a service that exits on its own (a killed worker, an OOM, a crash) is
restarted at once if it had got ready (a worker consuming when it was killed), else after a
backoff (1 s, doubling up to 30 s, back to 1 s once it has stayed up for a minute), and the
restart is logged with its cause. The others, web included, keep
running; only Ctrl-C or SIGTERM stops the stack.

Once the worker consumes, a standby worker is started beside it (EVALSITE_WORKER_STANDBY): the
same command, warmed up (Django, litellm and the first case's imports loaded) and then waiting
on its stdin before it connects to the broker or forks a pool (evalsite/celery.py
`_standby_wait`). When the worker dies, the standby is told to take over and consumes within a
fraction of a second, where a cold start took 6-8 s (issue 48); a new standby is started once
it is ready.

Each service runs in its own session, so the terminal's Ctrl-C reaches only this
launcher, which then stops the services in the right order, and a whole process
group (gunicorn's or Celery's pool children included) can be killed if a service
hangs. If the launcher itself is killed, the kernel sends each service SIGTERM
(PR_SET_PDEATHSIG), so even `kill -9` leaves no orphans behind.
"""

import os
import selectors
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from evalsite import embedded_redis, links, workers
from evalsite.supervision import (
    BACKOFF_FIRST,
    BACKOFF_MAX,
    BACKOFF_RESET_AFTER,
    COLORS,
    STANDBY_RETRY_AFTER,
    Service,
    die_with_parent,
)


class Command(BaseCommand):
    help = "Run Evalsite in the foreground: web, Celery worker and beat, and the embedded Redis when needed."

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.standby: Service | None = None  # the warmed-up worker waiting to take over
        self.standby_enabled = False  # set from --no-standby / EVALSITE_WORKER_STANDBY by handle()
        self.standby_next_at = 0.0
        self.worker_command: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST") or "127.0.0.1")
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT") or 8000))
        parser.add_argument("--web-workers", type=int, default=settings.WEB_CONCURRENCY)
        parser.add_argument("--worker-concurrency", type=int, default=settings.WORKER_CONCURRENCY)
        parser.add_argument(
            "--stop-timeout",
            type=float,
            default=30,
            help="Seconds the worker may take to finish tasks in flight when stopping.",
        )
        parser.add_argument(
            "--no-standby",
            dest="standby",
            action="store_false",
            default=settings.EVALSITE_WORKER_STANDBY,
            help="Keep no warmed-up standby worker: a killed worker is started again from scratch.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self.services: list[Service] = []
        self.selector = selectors.DefaultSelector()
        self.stop_requests = 0
        self.color = sys.stdout.isatty()
        self.standby_enabled = options["standby"]
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, self._request_stop)

        host, port = options["host"], options["port"]
        self._check_port_free(host, port)
        # The services inherit the address served, so their SITE_URL default (links in
        # exports and in document links for http agents) is this one, not port 8000.
        os.environ.update(HOST=str(host), PORT=str(port))
        # And the commands run from another shell (evalrun) link to it too (evalsite/links.py).
        links.served_url_record(settings.SITE_URL if settings.SITE_URL_EXPLICIT else links.served_url(host, port))
        try:
            self._start_all(options)
            self._supervise(f"http://{host}:{port}")
        finally:
            self._stop_all(options["stop_timeout"])
            links.served_url_forget()
        left = self._leftovers()
        if left:
            raise CommandError(f"Processes of the stack are still running (process groups {left}).")
        self._say("Stopped. No Evalsite process is left running.")

    # Starting.

    def _start_all(self, options: dict[str, Any]) -> None:
        base = [sys.executable, "-m"]
        if not settings.REDIS_URL:
            socket_path = settings.EMBEDDED_REDIS_SOCKET
            self._say(f"REDIS_URL is unset: starting the embedded Redis on {socket_path}")

            def spawn_redis() -> subprocess.Popen:
                return embedded_redis.start(socket_path, **self._popen_kwargs())

            try:
                process = spawn_redis()
            except embedded_redis.EmbeddedRedisError as error:
                raise CommandError(str(error)) from error
            self._track("redis", process, stop_timeout=10, spawn=spawn_redis)
        queue = settings.CELERY_TASK_DEFAULT_QUEUE
        self.worker_command = base + [
            "celery", "-A", "evalsite", "worker", "--loglevel", "INFO",
            "--concurrency", str(options["worker_concurrency"]), "--queues", queue,
            "--hostname", f"evalsite-{os.getpid()}@%h", "--without-gossip", "--without-mingle",
        ]  # fmt: skip
        self._launch("worker", self.worker_command, stop_timeout=options["stop_timeout"])
        self._launch(
            "beat",
            base + ["celery", "-A", "evalsite", "beat", "--loglevel", "INFO",
                    "--schedule", str(settings.BASE_DIR / "var" / "celerybeat-schedule")],
            stop_timeout=10,
        )  # fmt: skip
        web = base + [
            "gunicorn", "evalsite.wsgi:application",
            "--bind", f"{options['host']}:{options['port']}",
            "--workers", str(options["web_workers"]),
            "--access-logfile", "-", "--error-logfile", "-",
            "--timeout", "60", "--graceful-timeout", "10",
            # Two stacks on one machine (a developer's and the smoke test's) must not
            # fight over gunicorn's default control socket in $HOME.
            "--no-control-socket",
        ]  # fmt: skip
        if settings.DEBUG:
            web.append("--reload")  # DEBUG=true: reload on code changes while developing.
        self._launch("web", web, stop_timeout=15)

    def _popen_kwargs(self) -> dict[str, Any]:
        return {
            "cwd": settings.BASE_DIR,
            "env": {**os.environ, "PYTHONUNBUFFERED": "1"},
            "stdin": subprocess.DEVNULL,
            "stdout": subprocess.PIPE,
            "stderr": subprocess.STDOUT,
            "start_new_session": True,
            "preexec_fn": die_with_parent,
        }

    def _launch(self, name: str, command: list[str], *, stop_timeout: float) -> None:
        if self.stop_requests:
            return

        def spawn() -> subprocess.Popen:
            return subprocess.Popen(command, **self._popen_kwargs())

        self._track(name, spawn(), stop_timeout=stop_timeout, spawn=spawn)

    def _track(
        self, name: str, process: subprocess.Popen, *, stop_timeout: float, spawn: Callable[[], subprocess.Popen]
    ) -> None:
        service = Service(name=name, process=process, stop_timeout=stop_timeout, spawn=spawn)
        self._watch(service)
        self.services.append(service)
        self._say(f"{name} started (pid {process.pid})")

    def _watch(self, service: Service) -> None:
        stdout = service.process.stdout
        assert stdout is not None
        os.set_blocking(stdout.fileno(), False)
        self.selector.register(stdout, selectors.EVENT_READ, service)

    def _check_port_free(self, host: str, port: int) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError as error:
                raise CommandError(
                    f"Cannot listen on {host}:{port} ({error.strerror}). Is Evalsite already running? "
                    f"Choose another port: make run PORT={port + 1}"
                ) from error

    # Running.

    def _supervise(self, url: str) -> None:
        """Pump output and restart what dies, until a stop is requested."""
        announced = False
        worker_ready = False
        started = last_probe = time.monotonic()
        while not self.stop_requests:
            self._pump(timeout=0.25)
            worker_ready = worker_ready or any(
                " ready." in line for s in self.services if s.name == "worker" for line in s.output
            )
            for service in list(self.services):
                self._keep_up(service)
            self._standby_keep()
            # The banner waits for the web server to answer and the worker to consume,
            # so what it promises is true when it is printed.
            if not announced and worker_ready and time.monotonic() - last_probe >= 1:
                last_probe = time.monotonic()
                if self._web_answers(url):
                    self._announce(url, time.monotonic() - started)
                    announced = True

    def _keep_up(self, service: Service) -> None:
        """A service that exited on its own is restarted after its backoff, the cause logged."""
        if service.running or service.spawn is None or self.stop_requests:
            return
        now = time.monotonic()
        if service.restart_at is None:
            self._pump(timeout=0)  # its last words first
            # A worker that was consuming when it died (kill -9, out of memory) is not failing to
            # start: it comes back at once, since runs wait for it (its start-up alone takes
            # seconds, so this is no tight loop), and the backoff starts over (issue 48). A
            # service that died before it was ready backs off, doubling.
            if now - service.started_at >= BACKOFF_RESET_AFTER or service.ready:
                service.backoff = BACKOFF_FIRST
            delay = 0.0 if service.ready else service.backoff
            service.restart_at = now + delay
            when = "at once" if service.ready else f"in {delay:.0f} s"
            standby = self.standby
            if service.name == "worker" and service.ready and standby is not None and standby.running:
                when = f"from its warm standby (pid {standby.process.pid}) at once"
            self._say(
                f"{service.name} (pid {service.process.pid}) exited unexpectedly: {self._cause(service)}; "
                f"restarting it {when} (restart {service.restarts + 1})."
            )
            self._kill_group(service)  # pool children its death left behind
            if service.name == "worker":
                self._worker_ended(service.process.pid)
                if service.ready and self._standby_take_over(service):
                    return
            if not service.ready:
                service.backoff = min(service.backoff * 2, BACKOFF_MAX)
            return
        if now < service.restart_at:
            return
        try:
            process = service.spawn()
        except Exception as error:  # e.g. the embedded Redis could not start: try again later
            self._say(f"{service.name} could not be restarted ({error}); trying again in {service.backoff:.0f} s.")
            service.restart_at = now + service.backoff
            service.backoff = min(service.backoff * 2, BACKOFF_MAX)
            return
        service.process, service.buffer, service.output = process, b"", []
        service.started_at, service.restart_at, service.ready = now, None, False
        service.restarts += 1
        self._watch(service)
        self._say(f"{service.name} restarted (pid {process.pid}, restart {service.restarts}).")

    # The standby worker.

    def _standby_keep(self) -> None:
        """Keep one standby beside a worker that consumes. It is started only once the worker is
        ready, so the two never compete for the CPU while the stack (or a successor) starts."""
        if not self.standby_enabled or self.stop_requests:
            return
        worker = next((s for s in self.services if s.name == "worker"), None)
        if worker is None or not worker.running or not worker.ready:
            return
        now = time.monotonic()
        standby = self.standby
        if standby is not None:
            if standby.running:
                return
            self._pump(timeout=0)  # its last words first
            self._say(
                f"standby (pid {standby.process.pid}) exited unexpectedly: {self._cause(standby)}; "
                f"another in {STANDBY_RETRY_AFTER:.0f} s."
            )
            self._kill_group(standby)
            self.services.remove(standby)
            self.standby = None
            self.standby_next_at = now + STANDBY_RETRY_AFTER
        if now < self.standby_next_at:
            return
        kwargs = self._popen_kwargs()
        kwargs["env"] = {**kwargs["env"], "EVALSITE_WORKER_STANDBY_WAIT": "1"}
        kwargs["stdin"] = subprocess.PIPE
        try:
            process = subprocess.Popen(self.worker_command, **kwargs)
        except OSError as error:
            self._say(f"standby could not be started ({error}); trying again in {STANDBY_RETRY_AFTER:.0f} s.")
            self.standby_next_at = now + STANDBY_RETRY_AFTER
            return
        self.standby = Service(name="standby", process=process, stop_timeout=10)
        self._watch(self.standby)
        self.services.append(self.standby)
        self._say(f"standby started (pid {process.pid}): it warms up and waits to take over if the worker dies")

    def _standby_take_over(self, worker: Service) -> bool:
        """The standby becomes the worker: told to go on (a line on its stdin), its output now
        the worker's. False when there is none to take over (then the worker starts cold)."""
        standby = self.standby
        if standby is None or not standby.running or standby.process.stdin is None or standby.process.stdout is None:
            return False
        try:
            standby.process.stdin.write(b"take over\n")
            standby.process.stdin.close()
        except OSError:  # it died meanwhile
            self._say(f"standby (pid {standby.process.pid}) could not take over: starting the worker afresh.")
            return False
        self.selector.unregister(standby.process.stdout)
        self.services.remove(standby)
        self.standby = None
        worker.process, worker.buffer, worker.output = standby.process, standby.buffer, standby.output
        worker.started_at, worker.restart_at, worker.ready = time.monotonic(), None, False
        worker.restarts += 1
        self._watch(worker)
        pid = worker.process.pid
        self._say(f"worker restarted (pid {pid}, restart {worker.restarts}): its warm standby took over.")
        return True

    @staticmethod
    def _cause(service: Service) -> str:
        code = service.process.returncode
        if code is not None and code < 0:
            cause = f"killed by {signal.Signals(-code).name}"
        else:
            cause = f"exit code {code}"
        last = next((line.strip() for line in reversed(service.output) if line.strip()), "")
        return f"{cause} (last line: {last[:200]})" if last else cause

    def _pump(self, timeout: float) -> None:
        for key, _ in self.selector.select(timeout=timeout):
            service: Service = key.data
            try:
                chunk = os.read(key.fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                self.selector.unregister(key.fileobj)
                # A restarted service gets a new pipe: close the old one rather than leak it.
                close = getattr(key.fileobj, "close", None)
                if close is not None:
                    close()
                chunk = b"\n" if service.buffer else b""
            service.buffer += chunk
            *lines, service.buffer = service.buffer.split(b"\n")
            for raw in lines:
                self._print_line(service, raw.decode(errors="replace"))

    def _print_line(self, service: Service, line: str) -> None:
        # Keep a short tail for readiness checks; the full log is on the terminal.
        service.output = [*service.output[-50:], line]
        service.ready = service.ready or (service.name == "worker" and " ready." in line)
        prefix = f"{service.name:<7} |"
        if self.color:
            prefix = f"\033[{COLORS.get(service.name, '0')}m{prefix}\033[0m"
        sys.stdout.write(f"{prefix} {line}\n")
        sys.stdout.flush()

    def _web_answers(self, url: str) -> bool:
        try:
            with urllib.request.urlopen(f"{url}/accounts/login/", timeout=2) as response:
                return response.status < 500
        except urllib.error.HTTPError as error:
            return error.code < 500
        except (urllib.error.URLError, OSError):
            return False

    def _announce(self, url: str, seconds: float) -> None:
        from django.contrib.auth.models import User

        from evalsite import demo

        lines = [f"Evalsite is running at {url}/  (started in {seconds:.0f} s)"]
        user = User.objects.filter(username=demo.DEMO_USERNAME).first()
        if user is not None and user.check_password(demo.DEMO_PASSWORD):
            lines.append(
                f"Sign in as {demo.DEMO_USERNAME} / {demo.DEMO_PASSWORD}  "
                "(demo-only credentials: never expose this instance)"
            )
        elif user is not None:
            lines.append(f"The demo user “{demo.DEMO_USERNAME}” has a changed password.")
        if not settings.EVALSITE_LLM_MODEL:
            lines.append(
                "No model configured: knowledge agents and offline scoring work; "
                "set EVALSITE_LLM_MODEL for LLM agents and the judge (see README)."
            )
        db = settings.DATABASES["default"]
        database = f"SQLite ({db['NAME']})" if db["ENGINE"].endswith("sqlite3") else "PostgreSQL (DATABASE_URL)"
        broker = f"embedded Redis ({settings.EMBEDDED_REDIS_SOCKET})" if not settings.REDIS_URL else "REDIS_URL"
        lines.append(f"Database: {database}; broker: {broker}.")
        lines.append("Press Ctrl-C to stop.")
        width = max(len(line) for line in lines) + 4
        self._say("=" * width)
        for line in lines:
            self._say(f"  {line}")
        self._say("=" * width)

    def _request_stop(self, signum: int, frame: Any) -> None:
        self.stop_requests += 1
        if self.stop_requests == 1:
            self._say(f"{signal.Signals(signum).name} received: stopping (press Ctrl-C again to kill at once)...")
        else:
            self._say("Killing every service now.")
            for service in self.services:
                self._kill_group(service)

    # Stopping.

    def _stop_all(self, worker_timeout: float) -> None:
        # Web first so no new work arrives, the broker last so the worker can ack.
        order = {"web": 0, "beat": 1, "standby": 2, "worker": 2, "redis": 3}
        for service in sorted(self.services, key=lambda s: order.get(s.name, 9)):
            self._stop(service)
        for service in self.services:
            # Anything left in a service's process group (a pool child whose parent
            # died) goes too; an empty group just raises ProcessLookupError.
            self._kill_group(service)
        self._pump(timeout=0)

    def _stop(self, service: Service) -> None:
        if service.running and self.stop_requests < 2:
            if service.name == "worker":
                self._say(f"Waiting up to {service.stop_timeout:.0f} s for tasks in flight to finish...")
            service.process.send_signal(service.stop_signal)
            deadline = time.monotonic() + service.stop_timeout
            while service.running and time.monotonic() < deadline and self.stop_requests < 2:
                self._pump(timeout=0.1)
        if service.running:
            self._say(f"{service.name} did not stop in time: killing it.")
            self._kill_group(service)
        service.process.wait()

    def _leftovers(self, timeout: float = 5) -> list[int]:
        """Process groups of the stack that still have a member after the kill sweep."""
        deadline = time.monotonic() + timeout
        while True:
            left = []
            for service in self.services:
                try:
                    os.killpg(service.process.pid, 0)
                    left.append(service.process.pid)
                except ProcessLookupError:
                    pass
            if not left or time.monotonic() > deadline:
                return left
            time.sleep(0.1)

    def _worker_ended(self, pid: int) -> None:
        """Nothing of the dead worker runs now: say so, so the reaper's next pass (every few
        seconds) takes its cases back rather than waiting for its heartbeat to go stale."""
        try:
            workers.workers_end(host=socket.gethostname(), pid=pid)
        except Exception as error:  # the database is out of reach: the heartbeat's TTL still applies
            self._say(f"Could not record that worker {pid} ended ({error}); its cases wait for its heartbeat to age.")
        finally:
            connections.close_all()

    def _kill_group(self, service: Service) -> None:
        try:
            os.killpg(service.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _say(self, message: str) -> None:
        sys.stdout.write(f"evalsite | {message}\n")
        sys.stdout.flush()

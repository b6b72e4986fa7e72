"""The chaos table's faults (bench/chaos_table.py): each drives one run (Stop: one run per
time) through N hits of its fault and returns the figures of one table line.

Called after django.setup(), on the private cluster; the script's own database reads go
through `_db`, which waits out the database's own faults on a fresh connection.
"""

from __future__ import annotations

import itertools
import os
import re
import signal
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

import psutil
from chaos_stack import Poller, PrivateCluster, RedisServer, Stack, wait_until

from tests.fakellm import FakeLLM

T = TypeVar("T")
UNSAVED = ("pending", "queued", "running")
SAVED = ("pass", "fail", "error", "abstained")
SETTLE_SECONDS = 420  # the model-timeout run waits out the shipped 60 s timeout three times
REDIS_DOWN_SECONDS = 10


@dataclass
class Row:
    fault: str
    repeats: int = 0
    recoveries: list[float] = field(default_factory=list)
    startups: list[float] = field(default_factory=list)  # a restarted worker's, from the kill to " ready."
    lost: int = 0
    doubled: int = 0
    asked_fake: int = 0
    asked_recorded: int = 0
    asked_shown: int = 0
    errors: int = 0
    polls: int = 0
    poll_5xx: int = 0
    poll_refused: int = 0
    poll_errors: dict[str, int] = field(default_factory=dict)  # each 5xx status seen, and how often
    results: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def recovery_max(self) -> float:
        return max(self.recoveries, default=0.0)

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "recovery_max": round(self.recovery_max, 1)}


@dataclass
class Lab:
    cluster: PrivateCluster
    redis: RedisServer
    fake: FakeLLM
    stack: Stack
    cases: int
    # Agent calls the fake failed on purpose, per case: the gateway's retries, not repeats.
    injected: Counter = field(default_factory=Counter)
    _login: tuple[Any, Any, str, str] | None = None

    def login(self) -> tuple[Any, Any, str, str]:
        """(the team, its owner, a session cookie, an API token), made once."""
        if self._login is None:
            from django.conf import settings
            from django.test import Client

            from accounts.services import api_token_create
            from tests.factories import MembershipFactory, TeamFactory, UserFactory

            team = TeamFactory(name="Chaos QA")
            user = MembershipFactory(team=team, user=UserFactory(username="chaos"), role="owner").user
            client = Client()
            client.force_login(user)
            cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
            self._login = (team, user, cookie, api_token_create(user=user, name="chaos poller")[1])
        return self._login


def _db(query: Callable[[], T], timeout: float = 120) -> T:
    """A read of the script's own, retried on a fresh connection while the database is away."""
    from django.db import InterfaceError, OperationalError, connections

    deadline = time.monotonic() + timeout
    while True:
        try:
            return query()
        except (OperationalError, InterfaceError):
            connections.close_all()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _start_run(lab: Lab, scale: int = 1) -> Any:
    from agents.models import Agent
    from runs import services
    from tests.factories import AgentFactory, DatasetFactory, TestCaseFactory

    team, user = lab.login()[:2]
    agent = AgentFactory(team=team, kind=Agent.Kind.LLM)
    dataset = DatasetFactory(agent=agent)
    for index in range(lab.cases * scale):
        TestCaseFactory(dataset=dataset, position=index, question=f"Question {index + 1:03d}: the refund window?")
    return services.run_start(agent=agent, dataset=dataset, user=user, allow_failed_preflight=True)


def _saved(run: Any) -> int:
    from runs.models import Result

    return _db(lambda: Result.objects.filter(run=run, status__in=SAVED).count())


def _running(run: Any) -> set[int]:
    from runs.models import Result

    return set(_db(lambda: list(Result.objects.filter(run=run, status="running").values_list("pk", flat=True))))


def _wait_busy(run: Any, after: int, *, more: int = 2) -> None:
    """Until `more` results were saved since `after` and a case is in flight: the run is going."""
    from runs.models import Run

    def busy() -> bool:
        if _db(lambda: Run.objects.get(pk=run.pk).status) not in ("pending", "running"):
            raise RuntimeError(f"run {run.pk} ended before its next fault: give it more cases (--cases)")
        return _saved(run) >= after + more and bool(_running(run))

    wait_until(busy, timeout=300, what=f"run {run.pk} to be busy", interval=0.1)


def _recovered(run: Any, in_flight: set[int], saved_then: int, since: float, row: Row, lab: Lab) -> float:
    """Seconds from `since` until every case in flight at the fault is saved and one more result is.
    A killed worker's start-up (from the kill to its successor's " ready.") goes on the row too."""
    from runs.models import Result

    ready_before = lab.stack.read_log().count(" ready.")
    ready_at: list[float] = []

    def back() -> bool:
        if not ready_at and lab.stack.read_log().count(" ready.") > ready_before:
            ready_at.append(time.monotonic())
        left = _db(lambda: Result.objects.filter(pk__in=in_flight, status__in=UNSAVED).exists())
        return not left and _saved(run) > saved_then

    wait_until(back, timeout=SETTLE_SECONDS, what=f"run {run.pk} to recover", interval=0.1)
    if ready_at:
        row.startups.append(round(ready_at[0] - since, 1))
    return time.monotonic() - since


def _settle(run: Any) -> Any:
    from runs.models import Result, Run

    def settled() -> bool:
        active = _db(lambda: Run.objects.get(pk=run.pk).status) in ("pending", "running")
        return not active and not _db(lambda: Result.objects.filter(run=run, status__in=UNSAVED).exists())

    wait_until(settled, timeout=SETTLE_SECONDS, what=f"run {run.pk} to settle", interval=0.5)
    return _db(lambda: Run.objects.get(pk=run.pk))


def _shown(lab: Lab, run: Any) -> int:
    """ "Agent asked again N times" on the run page, read over HTTP as a person would."""
    cookie = lab.login()[2]
    request = urllib.request.Request(
        f"{lab.stack.url}/agents/{run.agent_id}/runs/{run.pk}/", headers={"Cookie": cookie}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        page = response.read().decode()
    found = re.search(r"Agent asked again (\d+) time", page)
    return int(found.group(1)) if found else 0


def _tally(lab: Lab, row: Row, run: Any, *, stopped: set[int] | None = None) -> None:
    """Add a settled run's figures to the row. `stopped`: the run was stopped, these were in flight."""
    from runs.models import Result

    results = _db(lambda: list(Result.objects.filter(run=run)))
    keys = Counter((r.case_id, r.repeat, r.variant) for r in results)
    saved = [r for r in results if r.status in SAVED]
    row.results += len(results)
    row.lost += sum(1 for r in results if r.status in UNSAVED)
    if stopped is None:
        row.lost += sum(1 for r in results if r.status == "skipped")
    else:  # a case whose agent was asked before Stop finishes and is kept; one claimed ahead is not run
        called = {r.trace.get("case") for r in lab.fake.requests if r.task == "agent"}
        row.lost += sum(1 for r in results if str(r.pk) in called and r.status not in SAVED)
    row.doubled += sum(n - 1 for n in keys.values()) + max(0, run.completed - len(saved))
    row.errors += sum(1 for r in results if r.status == "error")
    asked = Counter(r.trace.get("case") for r in lab.fake.requests if r.task == "agent")
    judged = Counter(r.trace.get("case") for r in lab.fake.requests if r.task == "judge")
    for result in results:
        calls = asked[str(result.pk)] - lab.injected[str(result.pk)]
        row.asked_fake += max(0, calls - 1)
        row.asked_recorded += max(0, result.attempts - 1)
        if max(calls, 1) != max(result.attempts, 1):
            causes = [entry.get("cause") for entry in result.repeats]
            row.notes.append(
                f"result {result.pk} ({result.status}): agent asked {calls} time(s), judge {judged[str(result.pk)]}, "
                f"{result.attempts} attempt(s) "
                f"recorded, repeats {causes}"
            )
    row.asked_shown += _shown(lab, run)


def _watched(lab: Lab, row: Row, run: Any) -> Poller:
    cookie, token = lab.login()[2:]
    poller = Poller(
        lab.stack.url,
        f"/agents/{run.agent_id}/runs/{run.pk}/",
        f"/api/runs/{run.pk}/status",
        cookie=cookie,
        token=token,
    )
    poller.start()
    return poller


def _count_polls(row: Row, poller: Poller) -> None:
    codes = poller.stop()
    row.polls += len(codes)
    row.poll_5xx += sum(1 for code in codes if code >= 500)
    row.poll_refused += sum(1 for code in codes if code == 0)
    for code in codes:
        if code >= 500:
            row.poll_errors[str(code)] = row.poll_errors.get(str(code), 0) + 1


# ---- the faults: each hits the run once; returns when it ended and the cases it hit, if it knows ----


def _kill_pool_child(lab: Lab, run: Any) -> tuple[float, set[int]]:
    worker = psutil.Process(lab.stack.worker_pid())
    children = worker.children()
    calling = [
        c for c in children if any(conn.raddr and conn.raddr.port == lab.fake.port for conn in c.net_connections("tcp"))
    ]
    victim = (calling or children)[0]
    victim.send_signal(signal.SIGKILL)
    return time.monotonic(), set()


def _standby_warm(lab: Lab) -> None:
    """Before a worker is killed: its standby (runstack's warmed-up successor) is warm, as it is
    from a few seconds after each worker start on."""
    log = lab.stack.read_log
    if "standby started (pid" in log():
        wait_until(
            lambda: log().count("standby: warmed up") > lab.stack.worker_restarts(),
            timeout=180,
            what="the worker's standby to be warm",
            interval=0.2,
        )


def _kill_worker(lab: Lab, run: Any) -> tuple[float, set[int]]:
    os.killpg(lab.stack.worker_pid(), signal.SIGKILL)  # the worker and its pool, as an OOM killer would
    return time.monotonic(), set()


def _restart_redis(lab: Lab, run: Any) -> tuple[float, set[int]]:
    noticed = lab.stack.read_log().count("Connection to broker lost")
    lab.redis.kill()
    wait_until(
        lambda: lab.stack.read_log().count("Connection to broker lost") > noticed,
        timeout=60, what="the worker to lose Redis",
    )  # fmt: skip
    lab.redis.start()  # same port, empty
    return time.monotonic(), set()


def _redis_down(lab: Lab, run: Any) -> tuple[float, set[int]]:
    """redis-server killed, and started again (empty) on its port 10 s later: recovery from then."""
    lab.redis.kill()
    time.sleep(REDIS_DOWN_SECONDS)
    lab.redis.start()
    return time.monotonic(), set()


def _terminate_sessions(lab: Lab, run: Any) -> tuple[float, set[int]]:
    lab.cluster.terminate_sessions()
    return time.monotonic(), set()


def _restart_database(lab: Lab, run: Any) -> tuple[float, set[int]]:
    lab.cluster.restart()
    return time.monotonic(), set()


def _model_fault(reply: dict[str, Any], cases: int, judge: bool) -> Callable[[Lab, Any], tuple[float, set[int]]]:
    """The next `cases` distinct cases' agent calls (and one judge call) answered with `reply`, once each."""

    def inject(lab: Lab, run: Any) -> tuple[float, set[int]]:
        faulted: set[str] = set()
        fired: list[float] = []
        lock = threading.Lock()
        judged = itertools.count()

        def agent(request: dict[str, Any]) -> dict[str, Any]:
            case = request["trace"].get("case", "")
            with lock:
                if len(faulted) >= cases or case in faulted:
                    return {}
                faulted.add(case)
                lab.injected[case] += 1
                fired.append(time.monotonic())
            return reply

        def judge_call(request: dict[str, Any]) -> dict[str, Any]:
            return reply if judge and next(judged) == 0 else {}

        lab.fake.clear_rules()
        lab.fake.add_rule(task="agent", handler=agent)
        lab.fake.add_rule(task="judge", handler=judge_call)
        wait_until(lambda: len(fired) >= cases, timeout=120, what="the model fault to fire")
        return fired[0], {int(case) for case in faulted}

    return inject


def _hit(
    fault: Callable[[Lab, Any], tuple[float, set[int]]],
    *,
    overlap: bool = False,
    before: Callable[[Lab], None] | None = None,
    scale: int = 1,
) -> Callable[[Lab, int], Row]:
    """`overlap`: the next hit comes once the run goes on, without waiting for the last one's
    recovery (a model timeout holds its case for the whole shipped timeout). `before`: waited
    for ahead of each hit, before the run is checked busy; `scale`: the run has that many times
    the cases, so it is still going after the waits."""

    def run_fault(lab: Lab, repeats: int) -> Row:
        from django.db import connections

        row = Row(fault=NAMES[fault])
        run = _db(lambda: _start_run(lab, scale))
        poller = _watched(lab, row, run)
        saved = 0
        waits: list[threading.Thread] = []
        for _ in range(repeats):
            if before is not None:
                before(lab)
            _wait_busy(run, saved)
            in_flight, saved = _running(run), _saved(run)
            since, hit = fault(lab, run)

            def recover(cases: set[int] = in_flight | hit, then: int = saved, at: float = since) -> None:
                try:
                    row.recoveries.append(_recovered(run, cases, then, at, row, lab))
                finally:
                    if overlap:
                        connections.close_all()  # this thread's own

            if overlap:
                waits.append(threading.Thread(target=recover, daemon=True))
                waits[-1].start()
            else:
                recover()
            row.repeats += 1
            saved = _saved(run)
        for wait in waits:
            wait.join(timeout=SETTLE_SECONDS)
        lab.fake.clear_rules()
        run = _settle(run)
        if run.status != "completed":
            row.notes.append(f"run {run.pk} ended {run.status}")
        _count_polls(row, poller)
        _tally(lab, row, run)
        return row

    return run_fault


def _stop_runs(lab: Lab, repeats: int) -> Row:
    """Stop pressed mid-run, each time on a run of its own: cases in flight finish and are kept,
    none is started after it, the run is Stopped. Recovery: until nothing is in flight."""
    from runs import services

    row = Row(fault="Stop")
    for _ in range(repeats):
        run = _db(lambda: _start_run(lab))
        poller = _watched(lab, row, run)
        _wait_busy(run, 0, more=3)
        in_flight, since = _running(run), time.monotonic()
        services.run_stop(run=run)
        asked_at_stop = {r.trace.get("case") for r in lab.fake.requests if r.task == "agent"}
        run = _settle(run)
        row.recoveries.append(time.monotonic() - since)
        row.repeats += 1
        late = {r.trace.get("case") for r in lab.fake.requests if r.task == "agent"} - asked_at_stop
        late -= {str(pk) for pk in in_flight}
        if late:
            row.notes.append(f"run {run.pk}: {len(late)} case(s) asked after Stop")
        if run.status != "stopped":
            row.notes.append(f"run {run.pk} ended {run.status}")
        _count_polls(row, poller)
        _tally(lab, row, run, stopped=in_flight)
    return row


NAMES: dict[Callable[..., tuple[float, set[int]]], str] = {
    _kill_pool_child: "pool child killed (SIGKILL)",
    _kill_worker: "worker killed (SIGKILL), restarted by runstack",
    _restart_redis: "Redis restarted (empty)",
    _redis_down: f"Redis down {REDIS_DOWN_SECONDS} s (back empty)",
    _terminate_sessions: "PostgreSQL sessions terminated",
    _restart_database: "PostgreSQL restarted",
}
_model_500 = _model_fault({"status": 500}, cases=3, judge=True)
_model_timeout = _model_fault({"hang": True}, cases=1, judge=False)
NAMES[_model_500] = "model 500s (3 cases + 1 judge call)"
NAMES[_model_timeout] = "model timeout (1 case, never answered)"

FAULTS: dict[str, Callable[[Lab, int], Row]] = {
    "pool-child": _hit(_kill_pool_child),
    "worker": _hit(_kill_worker, before=_standby_warm, scale=2),  # each standby warms up for some 8 s
    "redis": _hit(_restart_redis),
    "redis-down": _hit(_redis_down),
    "pg-sessions": _hit(_terminate_sessions),
    "pg-restart": _hit(_restart_database),
    "model-500": _hit(_model_500),
    "model-timeout": _hit(_model_timeout, overlap=True),
    "stop": _stop_runs,
}

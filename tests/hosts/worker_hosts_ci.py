"""Workers as separate hosts (issue 37, item 3; `make test-worker-hosts`; .ci/run).

Not a pytest test: it needs root (network namespaces, a bridge, a PostgreSQL cluster of its
own) and takes minutes. What it builds (tests/hosts/network.py):

- a bridge with the "server" host (10.77.0.1): a private PostgreSQL, a private Redis, Celery
  beat (the reapers' schedule, as shipped) and the project's fake model server, which records
  every call's X-Evalsite trace headers (run, case) and answers after a small latency;
- 4 worker hosts, each a network namespace with its own address (10.77.0.11-14) and hostname
  (evs-w1..4), running one Celery worker at the shipped concurrency (WORKER_CONCURRENCY),
  reaching PostgreSQL, Redis and the model over the bridge, never the loopback.

Then, three times, 20 runs of 200 cases started at once (an llm agent on the fake model):

1. baseline: nothing happens;
2. cut: mid-run, one worker host is cut off (its veth's bridge end taken down: its packets
   are dropped, nothing is killed or reset) and stays cut;
3. cut and restored: the same, the link restored after 30 s, so the cut worker's late
   answers arrive after its cases were handed to other workers.

Checked each time: every run completes with 200 results, one per case, all passed; each run's
model calls in flight at once (agent and judge, counted at the fake server) never exceed its
window of 3; no case is asked twice but those the cut worker held when it was cut; those were
finished by another worker; the claims name the worker hosts by their hostnames. Measured:
the time the cut worker's cases lost (from the cut until another worker saved them) and the
span of the 20 runs with and without the cut. Everything made is removed on the way out.

Usage (as root, from the repository): .venv/bin/python tests/hosts/worker_hosts_ci.py
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.fakellm import FakeLLM  # noqa: E402
from tests.hosts.network import SERVER_IP, Host, HostsFailure, network, postgres, redis, stop_groups  # noqa: E402

WORKERS = 4
RUNS = 20
CASES = 200
WINDOW = 3  # EVALSITE_RUN_CONCURRENCY as shipped
LATENCY = 0.05  # seconds the fake model takes to answer each call
CUT_AFTER = 0.3  # the share of all cases finished when the host is cut
RESTORE_AFTER = 30.0
HOLD_WAIT = 15.0  # how long to wait, at most, for the host to hold a case before its cut
RUNS_DEADLINE = 600.0  # seconds for the 20 runs to settle
CUT_HOST = 2


def log(message: str) -> None:
    now = time.time()
    stamp = f"{time.strftime('%H:%M:%S', time.gmtime(now))}.{int(now * 1000) % 1000:03d}"
    print(f"worker-hosts {stamp} | {message}", flush=True)


class Stack:
    """Beat on the server host and one worker per worker host, all started from here."""

    def __init__(self, hosts: list[Host], env: dict[str, str], folder: Path) -> None:
        self.hosts, self.env, self.folder = hosts, env, folder
        self.processes: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}

    def _spawn(self, name: str, command: list[str]) -> subprocess.Popen:
        self.logs[name] = self.folder / f"{name}.log"
        with open(self.logs[name], "w") as output:
            process = subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=output, stderr=subprocess.STDOUT,
                                       start_new_session=True)  # fmt: skip
        self.processes[name] = process
        return process

    def start(self) -> None:
        from django.conf import settings

        celery = [sys.executable, "-m", "celery", "-A", "evalsite"]
        for host in self.hosts:
            worker = [*celery, "worker", "--loglevel", "INFO", "--concurrency", str(settings.WORKER_CONCURRENCY),
                      "--queues", settings.CELERY_TASK_DEFAULT_QUEUE, "--hostname", f"worker@{host.name}",
                      "--without-gossip", "--without-mingle"]  # fmt: skip
            self._spawn(host.name, host.command(*worker))
        self._spawn("beat", [*celery, "beat", "--loglevel", "INFO", "--schedule", str(self.folder / "beat-schedule")])
        deadline = time.monotonic() + 180
        for host in self.hosts:
            while " ready." not in self.logs[host.name].read_text(errors="replace"):
                if self.processes[host.name].poll() is not None or time.monotonic() > deadline:
                    raise HostsFailure(f"The worker on {host.name} did not start:\n{self.tail(host.name)}")
                time.sleep(0.5)
        log(f"{len(self.hosts)} workers ready (concurrency {settings.WORKER_CONCURRENCY} each) and beat started")

    def tail(self, name: str, lines: int = 40) -> str:
        path = self.logs.get(name)
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path and path.exists() else ""

    def stop(self) -> None:
        stop_groups(list(self.processes.values()))
        self.processes.clear()


def configure(database_url: str, redis_url: str, fake: FakeLLM) -> dict[str, str]:
    """This process's Django and the workers' environment: the private services, the fake model."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "evalsite.settings",
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "EVALSITE_LLM_MODEL": "openai/fake-agent",
        "EVALSITE_JUDGE_MODEL": "openai/fake-judge",
        "EVALSITE_LLM_API_BASE": fake.url,
        "EVALSITE_LLM_API_KEY": "worker-hosts",
        "PYTHONUNBUFFERED": "1",
    }
    os.environ.update(env)
    import django

    django.setup()
    logging.disable(logging.INFO)  # a line per model call of the judge's preflight, from this process
    from django.core.management import call_command

    call_command("migrate", "--noinput", verbosity=0)
    return env


def make_datasets(fake: FakeLLM) -> tuple[Any, list[Any], Any]:
    """A team, its owner, an llm agent on the fake model and RUNS datasets of CASES cases, the judge preflighted."""
    from accounts.models import Membership, Team
    from agents.models import Agent
    from datasets.models import Dataset, TestCase
    from runs.judging import configs as judging
    from runs.models import JudgeConfig
    from runs.services.preflight import judge_config_preflight
    from tests.factories import AgentFactory, UserFactory
    from tests.runs.preflight_helpers import fit_judge

    team = Team.objects.create(name="Worker hosts")
    user = UserFactory(username="hosts")
    Membership.objects.create(team=team, user=user, role=Membership.Role.OWNER)
    agent = AgentFactory(team=team, kind=Agent.Kind.LLM, version__instructions="Answer refund questions.")
    datasets = []
    for number in range(1, RUNS + 1):
        dataset = Dataset.objects.create(agent=agent, name=f"Hosts {number}", status=Dataset.Status.READY)
        TestCase.objects.bulk_create(
            TestCase(
                dataset=dataset,
                position=index,
                question=f"Set {number}, question {index + 1}: refund window?",
                expected_answer="Refunds are available within 30 days of purchase.",
            )  # fmt: skip
            for index in range(CASES)
        )
        datasets.append(dataset)
    fit_judge(fake)
    configs = [judging.judge_config_for(dataset=d, scoring=judging.dataset_scoring(d)) for d in datasets]
    passed = judge_config_preflight(config=configs[0])
    # The same judge, prompt and threshold for every dataset: its outcome stands for all of them.
    JudgeConfig.objects.filter(pk__in=[c.pk for c in configs]).update(
        preflight_status=passed.preflight_status, preflight=passed.preflight
    )
    log(f"team, user, llm agent and {RUNS} datasets of {CASES} cases made; the judge passed its preflight")
    return agent, datasets, user


def start_runs(agent: Any, datasets: list[Any], user: Any) -> list[int]:
    from django.db import transaction

    from runs import services

    started = time.monotonic()
    # One transaction: every run's first window is sent to Redis at the same moment, on commit.
    with transaction.atomic():
        runs = [services.run_start(agent=agent, dataset=d, user=user, budget_cap=None).pk for d in datasets]
    log(f"{RUNS} runs of {CASES} cases started in {time.monotonic() - started:.1f} s")
    return runs


def finished_count(run_ids: list[int]) -> int:
    from runs.models import Result

    return Result.objects.filter(run_id__in=run_ids, status__in=Result.FINISHED_STATUSES).count()


def wait_settled(run_ids: list[int], started: float, stack: Stack) -> None:
    from runs.models import Run

    while Run.objects.filter(pk__in=run_ids, status__in=Run.ACTIVE_STATUSES).exists():
        if time.monotonic() - started > RUNS_DEADLINE:
            for name in stack.processes:
                print(f"---- {name} ----\n{stack.tail(name)}", flush=True)
            active = Run.objects.filter(pk__in=run_ids, status__in=Run.ACTIVE_STATUSES)
            stuck = list(active.values_list("pk", flat=True))
            raise HostsFailure(f"Runs {stuck} did not settle within {RUNS_DEADLINE:.0f} s: a stuck run.")
        time.sleep(1)


def explain(result_ids: list[int], requests: list[Any]) -> None:
    """What the database and the fake server say of these results (a failed check)."""
    from runs.models import Result

    fields = ("pk", "run_id", "status", "attempts", "repeats", "claimed_by", "claimed_at", "finished_at")
    for row in Result.objects.filter(pk__in=result_ids[:5]).values(*fields):
        log(f"  result {row}")
        for r in requests:
            if r.trace.get("case") == str(row["pk"]):
                log(f"    {r.task} from {r.peer} at {r.time_in:.3f}-{r.time_out or 0:.3f} {r.status}")


def explain_peak(requests: list[Any]) -> None:
    """The calls of one run in flight at its peak (a run over its window): which hosts sent them, when."""
    events = sorted([(r.seq_in, 1, r) for r in requests] + [(r.seq_out, -1, r) for r in requests if r.seq_out])
    current, in_flight, peak = 0, set(), []
    for _, step, request in events:
        current += step
        (in_flight.add if step > 0 else in_flight.discard)(id(request))
        if current > len(peak):
            peak = [r for r in requests if id(r) in in_flight]
    for r in peak:
        log(f"  at the peak: {r.task} case {r.trace.get('case')} attempt {r.trace.get('attempt', '?')} from {r.peer} "
            f"in {r.time_in:.3f} out {r.time_out or 0:.3f} status {r.status}")  # fmt: skip


def peak_in_flight(requests: list[Any]) -> int:
    """Most of these calls in flight at once, by the fake server's own ordering numbers."""
    events = sorted([(r.seq_in, 1) for r in requests] + [(r.seq_out, -1) for r in requests if r.seq_out is not None])
    peak = current = 0
    for _, step in events:
        current += step
        peak = max(peak, current)
    return peak


def scenario(name: str, stack: Stack, fake: FakeLLM, made: tuple[Any, list[Any], Any], *,
             cut: Host | None, restore: bool) -> dict[str, Any]:  # fmt: skip
    """Start the runs, cut (and restore) a host as told, check everything: what was measured."""
    from django.utils import timezone

    from runs.models import Result
    from tests.runs.preflight_helpers import fit_judge

    fake.reset()
    fit_judge(fake)
    stack.start()
    run_ids = start_runs(*made)
    started, first_start = time.monotonic(), timezone.now()  # the runs' first windows were just sent
    held: dict[int, int] = {}  # the cut worker's claims at the cut: result id -> attempts then
    asked: set[int] = set()
    cut_at, restored_at = None, None
    if cut is not None:
        while finished_count(run_ids) < CUT_AFTER * RUNS * CASES:
            time.sleep(0.2)
        claims = Result.objects.filter(run_id__in=run_ids, status=Result.Status.RUNNING)
        of_host = claims.filter(claimed_by__startswith=f"{cut.name}:")
        # Cut while the host holds cases: on 2026-12-06 the plain cut round came at a moment the
        # host held none, and so measured nothing about in-flight cases.
        deadline = time.monotonic() + HOLD_WAIT
        while not of_host.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        cut.cut()
        cut_at = timezone.now()
        held = dict(of_host.values_list("pk", "attempts"))
        if not held:
            raise HostsFailure(f"{name}: {cut.name} held no case at any moment of {HOLD_WAIT:.0f} s after "
                               f"{CUT_AFTER:.0%} of the cases were done; the cut would measure nothing.")  # fmt: skip
        time.sleep(2)  # what reached the fake server before the cut is read by now: nothing after it can
        asked = {int(r.trace["case"]) for r in fake.requests if r.task == "agent" and r.trace.get("case")}
        log(f"{cut.name} cut off at {time.monotonic() - started:.1f} s, holding {len(held)} claimed cases "
            f"({len(set(held) & asked)} already asked)")  # fmt: skip
        if restore:
            time.sleep(RESTORE_AFTER - 2)
            cut.restore()
            restored_at = time.time()
            log(f"{cut.name} restored {RESTORE_AFTER:.0f} s after the cut")
    wait_settled(run_ids, started, stack)
    span = time.monotonic() - started
    if restore:
        time.sleep(10)  # the restored worker's late answers have come in: none may count
    elif cut is not None:
        cut.restore()  # so its worker can be stopped; its cases were all reassigned
    stack.stop()
    in_flight = set(held) & asked  # asked of the model already; the others were claimed ahead, not started
    measured = check(name, run_ids, fake, held, in_flight, cut, cut_at, first_start, span)
    if restored_at is not None:
        check_restored(name, run_ids, fake, cut, held, restored_at, stack)
    return measured


def check_restored(name: str, run_ids: list[int], fake: FakeLLM, cut: Host, held: dict[int, int],
                   restored_at: float, stack: Stack) -> None:  # fmt: skip
    """Back from the cut, the host asks the model nothing more about the cases it held, which
    other hosts finished meanwhile: its lanes check their claims first (runs/engine/execution.py)."""
    from runs.models import Result

    finished_elsewhere = Result.objects.filter(pk__in=list(held)).exclude(claimed_by__startswith=f"{cut.name}:")
    handed_on = set(finished_elsewhere.values_list("pk", flat=True))
    late = [r for r in fake.requests if r.peer == cut.ip and r.time_in > restored_at and r.trace.get("run")]
    stale = [r for r in late if int(r.trace.get("case") or 0) in handed_on]
    log(f"{name}: after the restore {cut.name} sent {len(late)} model calls, {len(stale)} of them about a case "
        f"it held at the cut and another host finished")  # fmt: skip
    if stale:
        for r in stale[:5]:
            log(f"  {r.task} case {r.trace.get('case')} in {r.time_in:.3f} ({r.time_in - restored_at:.1f} s after)")
            explain([int(r.trace["case"])], fake.requests)
            lines = stack.logs[cut.name].read_text(errors="replace").splitlines()
            for line in [line for line in lines if f"'{r.trace['case']}'" in line or f"({r.trace['case']}," in line
                         or f"Result {r.trace['case']} " in line][-8:]:  # fmt: skip
                log(f"    {cut.name} log: {line[:220]}")
        raise HostsFailure(f"{name}: {cut.name} asked the model about {len(stale)} cases handed on during its cut")


def check(name: str, run_ids: list[int], fake: FakeLLM, held: dict[int, int], in_flight: set[int],
          cut: Host | None, cut_at: Any, first_start: Any, span: float) -> dict[str, Any]:  # fmt: skip
    from runs.models import Result, Run

    problems: list[str] = []
    runs = list(Run.objects.filter(pk__in=run_ids))
    if sorted(run.status for run in runs) != [Run.Status.COMPLETED] * RUNS:
        problems.append(f"run statuses {Counter(run.status for run in runs)}")
    fields = ("pk", "run_id", "case_id", "repeat", "variant", "status", "claimed_by", "finished_at", "attempts")
    results = list(Result.objects.filter(run_id__in=run_ids).values(*fields))
    per_run = Counter(r["run_id"] for r in results)
    if set(per_run.values()) != {CASES} or len(per_run) != RUNS:
        problems.append(f"results per run {sorted(set(per_run.values()))}")
    doubled = [key for key, n in Counter((r["case_id"], r["repeat"], r["variant"]) for r in results).items() if n > 1]
    if doubled:
        problems.append(f"{len(doubled)} cases with two results")
    statuses = Counter(r["status"] for r in results)
    if statuses != {Result.Status.PASS: RUNS * CASES}:
        problems.append(f"result statuses {dict(statuses)}")
    hosts = Counter(r["claimed_by"].split(":")[0] for r in results)
    if set(hosts) != {f"evs-w{n}" for n in range(1, WORKERS + 1)}:
        problems.append(f"results claimed by {dict(hosts)}, not by the worker hosts' names")
    requests = [r for r in fake.requests if r.task in ("agent", "judge") and r.trace.get("run")]
    agent_asks = Counter(int(r.trace["case"]) for r in requests if r.task == "agent")
    twice = {case for case, n in agent_asks.items() if n > 1}
    if twice - set(held):
        problems.append(f"{len(twice - set(held))} cases asked twice that the cut worker did not hold")
        explain(sorted(twice - set(held)), requests)
    if len(agent_asks) != RUNS * CASES:
        problems.append(f"{len(agent_asks)} cases asked, not {RUNS * CASES}")
    peaks = {run_id: peak_in_flight([r for r in requests if r.trace["run"] == str(run_id)]) for run_id in run_ids}
    if max(peaks.values()) > WINDOW:
        problems.append(f"runs over their window of {WINDOW}: {[(k, v) for k, v in peaks.items() if v > WINDOW]}")
        for run_id in (k for k, v in peaks.items() if v > WINDOW):
            explain_peak([r for r in requests if r.trace["run"] == str(run_id)])
    late = [r for r in results if r["pk"] in held]
    # A case taken back from the cut worker and asked again was claimed again (an attempt more)
    # before it was saved: one saved with the attempts it had at the cut was saved by the cut
    # worker's own claim, while another worker ran it too. (Asked once: never taken back.)
    stale = [
        r["pk"] for r in late if r["pk"] in in_flight and r["attempts"] <= held[r["pk"]] and agent_asks[r["pk"]] > 1
    ]
    if stale:
        problems.append(f"cases {stale} were saved by the cut worker's claim after they were handed on")
        explain(stale, requests)
    finished = max(run.finished_at for run in runs if run.finished_at)
    measured = {
        "name": name,
        "span": span,
        "span_db": (finished - first_start).total_seconds(),
        "peaks": Counter(peaks.values()),
        "held": len(held),
        "asked_twice": len(twice),
        "lost": sorted((r["finished_at"] - cut_at).total_seconds() for r in late if r["pk"] in in_flight),
        "ahead": sorted((r["finished_at"] - cut_at).total_seconds() for r in late if r["pk"] not in in_flight),
        "hosts": dict(hosts),
    }
    log(f"{name}: {RUNS} runs settled in {span:.1f} s; peak calls in flight per run {dict(measured['peaks'])}; "
        f"results per host {dict(sorted(hosts.items()))}")  # fmt: skip
    if cut is not None:
        lost, ahead = measured["lost"], measured["ahead"]
        log(f"{name}: {cut.name} held {len(held)} cases at the cut; the {len(lost)} it had asked the model about "
            f"were saved by other workers {min(lost, default=0):.1f}-{max(lost, default=0):.1f} s after the cut "
            f"({len(twice)} asked twice in all); the {len(ahead)} claimed ahead, not started, went back to pending "
            f"and were saved {min(ahead, default=0):.1f}-{max(ahead, default=0):.1f} s after it")  # fmt: skip
    if problems:
        raise HostsFailure(f"{name}: " + "; ".join(problems))
    return measured


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=("baseline", "cut", "cut-and-restored"),
                        help="run only this round (again for another); CI runs all three")  # fmt: skip
    only = parser.parse_args().only or []
    if os.geteuid() != 0:
        print("worker-hosts | needs root (network namespaces, a bridge); CI runs it as root.")
        return 2
    began = time.monotonic()
    measured: list[dict[str, Any]] = []
    try:
        with contextlib.ExitStack() as cleanup:
            hosts = cleanup.enter_context(network(WORKERS))
            log(f"bridge {SERVER_IP}/24 and {WORKERS} worker hosts " + ", ".join(f"{h.name} {h.ip}" for h in hosts))
            database_url = cleanup.enter_context(postgres())
            redis_url = cleanup.enter_context(redis())
            fake = FakeLLM(host=SERVER_IP, latency=LATENCY).start()
            cleanup.callback(fake.stop)
            log(f"PostgreSQL {database_url}, Redis {redis_url}, fake model {fake.url} ({LATENCY * 1000:.0f} ms a call)")
            env = configure(database_url, redis_url, fake)
            made = make_datasets(fake)
            folder = cleanup.enter_context(tempfile.TemporaryDirectory(prefix="evalsite-hosts-"))
            stack = Stack(hosts, env, Path(folder))
            cleanup.callback(stack.stop)
            rounds = (("baseline", None, False), ("cut", hosts[CUT_HOST - 1], False),
                      ("cut-and-restored", hosts[CUT_HOST - 1], True))  # fmt: skip
            for name, cut, restore in rounds:
                if only and name not in only:
                    continue
                measured.append(scenario(name, stack, fake, made, cut=cut, restore=restore))
                subprocess.run(["redis-cli", "-u", redis_url, "flushall"], capture_output=True)
                from evalsite.models import WorkerHeartbeat

                WorkerHeartbeat.objects.all().delete()
    except HostsFailure as failure:
        print(f"worker-hosts | FAILED: {failure}", flush=True)
        return 1
    log(f"passed in {time.monotonic() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

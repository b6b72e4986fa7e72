"""The chaos table (issue 35): each fault hits one run N times (3 by default) at the shipped
settings, while a person watches the run over HTTP; one line of figures per fault.

Everything is this script's own (bench/chaos_stack.py): a private PostgreSQL cluster (the
machine's binaries, a temporary directory, a free port), a redis-server, the fake model
server (tests/fakellm.py, in this process so it can be scripted and counted) and Evalsite's
whole stack under `manage.py runstack` (gunicorn, the worker under its supervisor, beat), at
the shipped settings: nothing but the database, Redis and model addresses is set.

Faults (--faults, comma-separated; all by default):
  pool-child   SIGKILL of the pool child calling the model (Celery's prefork pool)
  worker       SIGKILL of the worker's process group; runstack's supervisor restarts it
  redis        redis-server killed, restarted empty on its port once the worker noticed
  redis-down   redis-server killed, restarted empty on its port 10 s later
  pg-sessions  pg_terminate_backend of every session of the database (web, worker, beat)
  pg-restart   pg_ctl restart -m fast of the cluster
  model-500    the model answers 500 once to each of the next 3 cases' agent calls, and once to a judge call
  model-timeout  the model never answers one case's agent call (the shipped 60 s timeout ends it)
  stop         Stop pressed mid-run (a run of its own each time)

Per fault: recovery (from the fault, or from the service being back, to every case in flight
then being saved and one more result saved after it; the worst of the N), results lost (not
saved, or skipped though nobody stopped the run), doubled (a result saved or counted twice),
repeat calls of the agent (counted at the fake server, recorded on the results, shown on the
run page), errors, and the 5xx (and refused connections) a poller saw asking the run page's
poll and the API's run status once a second each.

    .venv/bin/python bench/chaos_table.py [--repeats 3] [--faults worker,redis] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chaos_faults import FAULTS, Lab, Row  # noqa: E402
from chaos_stack import PrivateCluster, RedisServer, Stack  # noqa: E402

from tests.fakellm import FakeLLM  # noqa: E402

COLUMNS = (
    "fault", "repeats", "recovery s (max)", "lost", "doubled", "asked again (fake / recorded / shown)",
    "errors", "5xx at poller (of polls)",
)  # fmt: skip


SHIPPED_ONLY = ("WORKER_CONCURRENCY", "WEB_CONCURRENCY", "DEBUG", "DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL")


def _environment(cluster: PrivateCluster, redis: RedisServer, fake: FakeLLM) -> dict[str, str]:
    env = {
        "DJANGO_SETTINGS_MODULE": "evalsite.settings",
        "DATABASE_URL": cluster.url,
        "REDIS_URL": redis.url,
        "EVALSITE_LLM_MODEL": "openai/fake-agent",
        "EVALSITE_JUDGE_MODEL": "openai/fake-judge",
        "EVALSITE_EMBEDDING_MODEL": "openai/fake-embed",
        "EVALSITE_LLM_API_BASE": fake.url,
        "EVALSITE_LLM_API_KEY": "chaos",
        "PYTHONUNBUFFERED": "1",
    }
    for name in list(os.environ):
        # The shipped values, whatever the calling shell (or pytest: tests/env.py's faster
        # reaper, its own queue) set: no EVALSITE_*, CELERY_* or concurrency but the above.
        if name.startswith(("EVALSITE_", "CELERY_")) or name in SHIPPED_ONLY:
            os.environ.pop(name)
    os.environ.update(env)
    return dict(os.environ)


def _recovery(row: Row) -> str:
    text = f"{row.recovery_max:.1f}"
    if row.startups:  # a killed worker: how much of it was its successor's start-up
        text += f" (worker ready after {max(row.startups):.1f})"
    return text


def _polls(row: Row) -> str:
    text = str(row.poll_5xx)
    if row.poll_errors:
        text += " (" + ", ".join(f"{n} x {code}" for code, n in sorted(row.poll_errors.items())) + ")"
    if row.poll_refused:
        text += f" + {row.poll_refused} refused"
    return f"{text} of {row.polls}"


def table(rows: list[Row]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        cells = (
            row.fault, str(row.repeats), _recovery(row), str(row.lost), str(row.doubled),
            f"{row.asked_fake} / {row.asked_recorded} / {row.asked_shown}", str(row.errors),
            _polls(row),
        )  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="times each fault hits its run")
    parser.add_argument("--faults", default=",".join(FAULTS), help=f"comma-separated, of: {', '.join(FAULTS)}")
    parser.add_argument("--cases", type=int, default=60, help="cases in each fault's run")
    parser.add_argument("--latency", type=float, default=0.5, help="the fake model's answer time, seconds")
    parser.add_argument("--json", type=Path, help="write the rows here as JSON too")
    args = parser.parse_args(argv)
    faults = [name.strip() for name in args.faults.split(",") if name.strip()]
    unknown = set(faults) - set(FAULTS)
    if unknown:
        parser.error(f"unknown fault(s): {', '.join(sorted(unknown))}")

    started = time.monotonic()
    cluster, redis, fake = PrivateCluster(), RedisServer(), FakeLLM(latency=args.latency)
    stack: Stack | None = None
    rows: list[Row] = []
    try:
        cluster.init()
        redis.start()
        fake.start()
        # A killed worker's connections reset under the fake's threads: expected here, not news.
        fake._server.handle_error = lambda request, address: None  # type: ignore[union-attr,method-assign]
        env = _environment(cluster, redis, fake)
        import django

        django.setup()
        from django.conf import settings
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        stack = Stack(env)
        stack.wait_running()
        lab = Lab(cluster=cluster, redis=redis, fake=fake, stack=stack, cases=args.cases)
        print(
            f"Chaos table: worker concurrency {settings.WORKER_CONCURRENCY}, run window "
            f"{settings.EVALSITE_RUN_CONCURRENCY}, LLM timeout {settings.EVALSITE_LLM_TIMEOUT:g} s, "
            f"retries {settings.EVALSITE_LLM_RETRIES}, "
            f"heartbeat every {settings.EVALSITE_WORKER_HEARTBEAT_INTERVAL:g} s "
            f"(TTL {settings.EVALSITE_WORKER_HEARTBEAT_TTL:g} s), "
            f"reaper every {settings.CELERY_BEAT_SCHEDULE['reap-stale-work']['schedule']:g} s, stale claim "
            f"{settings.EVALSITE_STALE_CLAIM_SECONDS} s, "
            f"{args.cases} cases a run, fake model {args.latency * 1000:.0f} ms, load {os.getloadavg()[0]:.2f}",
            flush=True,
        )
        for name in faults:
            try:
                row = FAULTS[name](lab, args.repeats)
            except Exception as error:  # one fault's failure is a line of the table, not the end of it
                row = Row(fault=name, notes=[f"did not finish: {error!r}"[:500]])
                lab.fake.clear_rules()
            rows.append(row)
            print(f"  {name}: {json.dumps(row.as_dict())}", flush=True)
    finally:
        if stack is not None:
            stack.stop()
        fake.stop()
        redis.kill()
        cluster.stop()
    print()
    print(table(rows))
    for row in rows:
        for note in row.notes:
            print(f"- {row.fault}: {note}")
    print(f"\n{len(rows)} fault(s) in {time.monotonic() - started:.0f} s; load average now {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps([row.as_dict() for row in rows], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""One run of 5,000 cases: the run page, its poll, the run list and the API's poll endpoints.

A throwaway SQLite database gets a running run of 5,000 cases (4,000 finished) beside
20 finished runs of the same agent. The Django test client (whole middleware stack and
templates, no network) measures each request below many times and reports its median and
p95 (wall and CPU time: the machine is shared) and its query count, next to the budget its
test asserts (tests/runs/test_run_detail_views.py, test_run_list_views.py,
test_run_api_endpoints.py):
- the run page (its first page of cards, runs.outcomes.CARDS_PER_PAGE: 25) and its 3 s poll
  with 3 new cards (the page's cursor covers the cases it has loaded), and the charts an
  active run's page loads after itself;
- the run list of the agent and its poll;
- the API's status endpoint (what a poller calls), and the run detail (one page of
  results, never all 5,000).
Figures only; the query counts are asserted in the tests, wall times nowhere.
"""

import argparse
import cProfile
import os
import pstats
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import django_in_process, knowledge_agent, results_run  # noqa: E402
from run_all import bench_result  # noqa: E402

CASES, FINISHED, OTHER_RUNS = 5_000, 4_000, 20
REPEATS = 60
# The budgets the tests assert for these requests (a regression there fails the suite).
BUDGETS = {"run page": 19, "run page poll": 8, "run list": None, "run list poll": None, "API status": 3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", metavar="REQUEST", help='profile one request ("run page"...), no timings')
    args = parser.parse_args()
    django_in_process("evalsite-bench-5000-")
    _measure_all(*_data(), profile=args.profile)


def _data() -> tuple[Any, Any, str]:
    from django.contrib.auth.models import User

    from accounts.models import Membership, Team
    from accounts.services import api_token_create
    from runs.models import Run

    team = Team.objects.create(name="Bench")
    user = User.objects.create_user("bench", password="bench-password-1")
    Membership.objects.create(team=team, user=user, role=Membership.Role.OWNER)
    agent, dataset = knowledge_agent(team, "Bench agent")
    for _ in range(OTHER_RUNS):
        results_run(agent, dataset, cases=20, finished=20, status=Run.Status.COMPLETED)
    running = results_run(agent, dataset, cases=CASES, finished=FINISHED, status=Run.Status.RUNNING)
    _, raw = api_token_create(user=user, name="bench")
    return user, running, raw


def _measure_all(user: Any, run: Any, token: str, profile: str | None = None) -> None:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext
    from django.urls import reverse

    from runs import selectors

    client = Client()
    client.force_login(user)
    page = reverse("runs:detail", args=[run.agent_id, run.pk])
    done = [o.position for o in selectors.case_outcome_list(run=run) if o.done]
    loaded = [position for position in done if position < selectors.CARDS_PER_PAGE]
    rng = random.Random(7)
    api = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    api_client = Client()  # a token, no session: what a CI poller sends

    def poll_params() -> dict[str, Any]:
        seen = selectors.seen_encode(set(loaded) - set(rng.sample(loaded, 3)))
        return {"seen": seen, "upto": selectors.CARDS_PER_PAGE}

    requests = {
        "run page": lambda: client.get(page),
        "run page poll": lambda: client.get(page, poll_params(), HTTP_HX_REQUEST="true"),
        "run charts": lambda: client.get(reverse("runs:charts", args=[run.agent_id, run.pk]), HTTP_HX_REQUEST="true"),
        "run list": lambda: client.get(reverse("runs:list", args=[run.agent_id])),
        "run list poll": lambda: client.get(
            reverse("runs:list_poll", args=[run.agent_id]), {"ids": str(run.pk)}, HTTP_HX_REQUEST="true"
        ),
        "API status": lambda: api_client.get(f"/api/runs/{run.pk}/status", **api),
        "API run detail": lambda: api_client.get(f"/api/runs/{run.pk}", **api),
    }
    if profile:
        for _ in range(5):
            requests[profile]()
        profiler = cProfile.Profile()
        profiler.runcall(lambda: [requests[profile]() for _ in range(REPEATS)])
        pstats.Stats(profiler).sort_stats("tottime").print_stats(45)
        return
    print(f"{CASES:,} cases, {FINISHED:,} finished; load average {os.getloadavg()[0]:.1f}", flush=True)
    for name, send in requests.items():
        for _ in range(5):
            assert send().status_code == 200, name  # warm: templates compiled, connection open
        with CaptureQueriesContext(connection) as context:
            response = send()
        queries = len(context.captured_queries)
        samples, cpu = [], []
        for _ in range(REPEATS):
            started, started_cpu = time.perf_counter(), time.process_time()
            send()
            samples.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - started_cpu) * 1000)
        samples.sort()
        cpu.sort()
        p95 = samples[int(0.95 * len(samples)) - 1]
        cpu_p95 = cpu[int(0.95 * len(cpu)) - 1]
        budget = BUDGETS.get(name)
        size = f"; {len(response.content) / 1024:.0f} KiB"
        note = f"{queries} queries" + (f" (budget {budget})" if budget else "") + size
        print(
            f"{name}: median {statistics.median(samples):.1f} ms, p95 {p95:.1f} ms"
            f" (CPU median {statistics.median(cpu):.1f}, p95 {cpu_p95:.1f}), {note}",
            flush=True,
        )
        bench_result(f"5,000 cases: {name} p95", p95, "ms", f"{note}; aim < 50 ms")


if __name__ == "__main__":
    main()

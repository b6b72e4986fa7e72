"""The run page with 1,000 results: its live poll's latency and the page's weight.

A throwaway SQLite database gets a run of 1,200 cases, 1,000 of them finished. The
Django test client (the whole middleware stack and template rendering, no network)
then measures:
- the poll while the run is going, as the page sends it every 3 s: the summary, the
  filter counts and the cards of the 3 cases finished since the page's cursor;
- the same poll when nothing new finished;
- the full page (first 100 cards), and its size raw and gzipped;
- the full page of a completed run of 1,000 cases, and its size.
Figures only; nothing is asserted (the query counts are asserted in the tests).
"""

import gzip
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import django_in_process, knowledge_agent, results_run  # noqa: E402
from run_all import bench_result  # noqa: E402

POLLS = 200
PAGES = 20
CASES, FINISHED = 1_200, 1_000


def main() -> None:
    django_in_process("evalsite-bench-page-")
    running, completed, user = _runs()

    from django.test import Client
    from django.urls import reverse

    from runs import selectors

    client = Client()
    client.force_login(user)
    url = reverse("runs:detail", args=[running.agent_id, running.pk])
    done = [o.position for o in selectors.case_outcome_list(run=running) if o.done]
    loaded = [position for position in done if position < selectors.CARDS_PER_PAGE]
    rng = random.Random(7)

    def poll(fresh: int) -> float:
        # The page knows every finished case but `fresh` of them, as after a 3 s wait.
        unseen = set(rng.sample(loaded, fresh)) if fresh else set()
        seen = selectors.seen_encode(set(done) - unseen)
        started = time.perf_counter()
        response = client.get(url, {"seen": seen, "upto": selectors.CARDS_PER_PAGE}, HTTP_HX_REQUEST="true")
        elapsed = (time.perf_counter() - started) * 1000
        assert response.status_code == 200, response.status_code
        assert response.content.count(b'class="result-card ') == fresh
        return elapsed

    for _ in range(10):
        poll(3)  # warm up: templates compiled, connections open
    with_cards = sorted(poll(3) for _ in range(POLLS))
    nothing_new = sorted(poll(0) for _ in range(POLLS))
    _report("poll, 3 new cards", with_cards, f"{FINISHED:,} of {CASES:,} results finished")
    _report("poll, nothing new", nothing_new, "summary and filter counts only")

    page_times, body = [], b""
    for _ in range(PAGES):
        started = time.perf_counter()
        body = client.get(url).content
        page_times.append((time.perf_counter() - started) * 1000)
    bench_result("run page median", statistics.median(page_times), "ms", f"{PAGES} loads, first 100 cards")
    bench_result("run page weight", len(body) / 1024, "KiB", f"{len(gzip.compress(body)) / 1024:.0f} KiB gzipped")

    done_url = reverse("runs:detail", args=[completed.agent_id, completed.pk])
    done_body = client.get(done_url).content
    bench_result(
        "completed run page weight",
        len(done_body) / 1024,
        "KiB",
        f"1,000 cases, first 100 cards; {len(gzip.compress(done_body)) / 1024:.0f} KiB gzipped",
    )


def _report(name: str, samples: list[float], note: str) -> None:
    bench_result(f"{name} median", statistics.median(samples), "ms", note)
    bench_result(f"{name} p95", samples[int(0.95 * len(samples)) - 1], "ms", f"{len(samples)} polls; aim < 50 ms")


def _runs():  # type: ignore[no-untyped-def]
    """A running run (1,000 of 1,200 finished) and a completed one of 1,000 cases."""
    from django.contrib.auth.models import User

    from accounts.models import Membership, Team
    from runs.models import Run

    team = Team.objects.create(name="Bench")
    user = User.objects.create_user("bench", password="bench-password-1")
    Membership.objects.create(team=team, user=user, role=Membership.Role.OWNER)
    agent, dataset = knowledge_agent(team, "Bench agent")
    running = results_run(agent, dataset, cases=CASES, finished=FINISHED, status=Run.Status.RUNNING)
    completed = results_run(agent, dataset, cases=1_000, finished=1_000, status=Run.Status.COMPLETED)
    return running, completed, user


if __name__ == "__main__":
    main()

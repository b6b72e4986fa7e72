"""A run's live page in Chromium, driven by a real Celery worker: start it from the dataset
page, watch the cards arrive and the progress bar move, see the poll stop once the run has
settled, and stop a second run half way.

No model is configured: answers are scored by the offline reference scorer. The agent is an
HTTP agent served by this test, answering after a fixed delay, so the run lasts long enough
to be watched on any machine (a knowledge agent answers in microseconds and a small run
would be over before the page's first poll).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from playwright.sync_api import Page, Request, expect

from agents.models import Agent
from runs.models import Result, Run
from tests.factories import AgentFactory, DatasetFactory, TestCaseFactory
from tests.runs.conftest import wait_settled
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.worker]

AGENT_DELAY = 1.2  # seconds per answer: 18 cases at 3 at a time last about 7 s
REFUNDS = "Refunds are available within 30 days of purchase."


class _SlowAgent(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        time.sleep(AGENT_DELAY)
        answer = REFUNDS if "refund" in body["question"].lower() else "I don't know."
        payload = json.dumps({"answer": answer, "trace_id": f"trace-{body['case_id']}"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def slow_agent_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowAgent)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/agent"
    server.shutdown()
    server.server_close()


@pytest.fixture
def agent(team, slow_agent_url):
    return AgentFactory(team=team, name="Support API", kind=Agent.Kind.HTTP, version__http_url=slow_agent_url)


def _dataset(agent, name: str, cases: int, failing: int = 0):
    dataset = DatasetFactory(agent=agent, name=name)
    for n in range(cases):
        question = f"What is the SLA credit? ({n})" if n >= cases - failing else f"How do refunds work? ({n})"
        expected = "The SLA credit is 10% of the monthly fee." if n >= cases - failing else REFUNDS
        TestCaseFactory(dataset=dataset, position=n, question=question, expected_answer=expected)
    return dataset


def _start_from_dataset_page(page: Page, live_server, dataset) -> Run:
    page.goto(f"{live_server.url}/agents/{dataset.agent_id}/datasets/{dataset.pk}/")
    page.wait_for_load_state("networkidle")  # htmx loaded: the button opens the start dialog
    page.get_by_role("button", name="Run Evaluation").click()
    page.get_by_role("dialog").get_by_role("button", name="Start run").click()  # the start dialog
    page.wait_for_url("**/runs/*/")
    return Run.objects.get(dataset=dataset)


def test_a_run_streams_its_results_and_stops_polling(page, login, live_server, celery_worker, alice, agent, no_llm):
    dataset = _dataset(agent, "Refund policy", cases=18, failing=3)
    worker = celery_worker(concurrency=3)
    login(page, alice)
    polls: list[float] = []

    def record(request: Request) -> None:
        if request.headers.get("hx-request") == "true" and request.url.split("?")[0].endswith(f"/runs/{run_id[0]}/"):
            polls.append(time.monotonic())

    run_id = [0]
    page.on("request", record)
    run = _start_from_dataset_page(page, live_server, dataset)
    run_id[0] = run.pk
    expect(page.locator("#toasts")).to_contain_text("Evaluation run started")
    expect(page.get_by_text("Offline reference scorer (no judge model)")).to_be_visible()

    # Watch the page, not the database: the cards and the progress bar as the user sees them.
    cards, progress = page.locator("#result-cards .result-card"), page.locator("#run-live .run-progress")
    seen_cards, seen_progress = set(), set()

    def all_cards_seen() -> bool:
        seen_cards.add(cards.count())
        seen_progress.add(int(progress.get_attribute("aria-valuenow") or 0))
        return 18 in seen_cards

    try:
        wait_for(all_cards_seen, what="18 result cards", pause=lambda seconds: page.wait_for_timeout(seconds * 1000))
    except AssertionError as error:
        raise AssertionError(f"{error}\n{worker.read_log()[-3000:]}") from None
    assert any(0 < count < 18 for count in seen_cards), f"cards arrived all at once: {sorted(seen_cards)}"
    assert any(0 < value < 18 for value in seen_progress), f"the bar never moved: {sorted(seen_progress)}"
    assert max(seen_progress) <= 18

    # The final state: counts, badges, a failing card's contents, and the charts.
    live = page.locator("#run-live")
    expect(live.locator(".badge-completed")).to_have_text("Completed", timeout=30_000)
    expect(live).to_contain_text("18 of 18 finished")
    expect(page.locator("#result-cards .result-card.is-pass")).to_have_count(15)
    failing = page.locator("#result-cards .result-card.is-fail").first
    expect(failing).to_contain_text("Score: 0/10")
    expect(failing).to_contain_text("I don't know.")
    expect(failing).to_contain_text("Missed:")
    expect(page.locator("#result-filters .filter-failed .filter-count")).to_have_text("3")
    expect(live.get_by_role("button", name="Re-run failed and errored cases")).to_be_visible()

    # Polling stops by itself: no trigger left, and no poll request for the next 7 seconds.
    expect(live).not_to_have_attribute("hx-trigger", "every 3s", timeout=30_000)
    settled_polls = len(polls)
    assert settled_polls >= 2
    page.wait_for_timeout(7_000)
    assert len(polls) == settled_polls, "the page kept polling after the run ended"
    # The charts are a tab away.
    page.locator("#run-tab-charts").click()
    expect(page).to_have_url(f"{live_server.url}/agents/{agent.pk}/runs/{run.pk}/?tab=charts")
    expect(page.locator("#run-charts svg[role=img]").first).to_be_visible()
    page.locator("#run-tab-results").click()

    # A filter swaps the list without a reload.
    page.locator("#result-filters").get_by_role("link", name="Failed").click()
    expect(page.locator("#result-cards .result-card")).to_have_count(3)
    expect(page).to_have_url(f"{live_server.url}/agents/{agent.pk}/runs/{run.pk}/?filter=failed")


def test_stop_keeps_the_finished_results(page, login, live_server, celery_worker, alice, agent, no_llm):
    dataset = _dataset(agent, "Long regression", cases=60)
    worker = celery_worker(concurrency=3)
    login(page, alice)
    run = _start_from_dataset_page(page, live_server, dataset)
    expect(page.locator("#result-cards .result-card").first).to_be_visible(timeout=30_000)

    page.locator("#run-live").get_by_role("button", name="Stop run").click()
    dialog = page.locator("dialog#stop-dialog")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Cases already running finish and are kept")
    dialog.get_by_role("button", name="Stop run").click()

    live = page.locator("#run-live")
    expect(live.locator(".badge-stopped")).to_have_text("Stopped")
    expect(page.locator("#toasts")).to_contain_text("Run stopped. Finished results are kept.")
    expect(live.get_by_role("button", name="Stop run")).to_have_count(0)
    run = wait_settled(run, worker=worker)
    assert run.status == Run.Status.STOPPED
    finished = Result.objects.filter(run=run, status=Result.Status.PASS).count()
    assert 1 <= finished < 60  # stopped part way: some cases kept, the rest skipped
    # Nothing entered the window after Stop: every kept result was queued before it.
    assert run.stop_requested_at is not None
    assert not Result.objects.filter(run=run, status=Result.Status.PASS, queued_at__gt=run.stop_requested_at).exists()
    assert Result.objects.filter(run=run, status=Result.Status.SKIPPED).count() == 60 - finished
    # Cases in flight at Stop finish after it: reload to see every kept result.
    page.reload()
    expect(page.locator("#result-cards .result-card.is-pass")).to_have_count(finished)
    expect(page.locator("#run-live")).to_contain_text(f"{finished} of")
    wait_for(lambda: not Result.objects.filter(run=run, status__in=Result.IN_FLIGHT_STATUSES).exists(), what="idle")

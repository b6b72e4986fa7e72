"""A run that stalled and repeated calls, in a real browser at 1280 and 390 px (issue 35): the
stall note with its cause and the repeat calls with theirs are read in full, nothing scrolls sideways."""

import os
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from runs import services
from runs.models import Result, Run
from tests.e2e.conftest import DESKTOP, PHONE
from tests.runs.conftest import make_dataset  # noqa: F401  (fixture)

pytestmark = pytest.mark.e2e
SHOTS = Path(os.environ.get("EVALSITE_SHOTS", "/tmp/evalsite-shots"))


@pytest.fixture
def stalled_run(transactional_db, make_dataset, alice, no_llm):  # noqa: F811
    dataset = make_dataset(6)
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    results = list(Result.objects.filter(run=run).order_by("id"))
    done, running = results[0], results[1]
    Result.objects.filter(pk=done.pk).update(
        status=Result.Status.PASS,
        score=9,
        finished_at=timezone.now() - timedelta(seconds=95),
        attempts=2,
        repeats=[{"cause": "broker_lost", "attempt": 2}],
    )
    Result.objects.filter(pk=running.pk).update(status=Result.Status.RUNNING, claimed_at=timezone.now(), attempts=1)
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING,
        created_at=timezone.now() - timedelta(seconds=120),
        started_at=timezone.now() - timedelta(seconds=118),
        completed=1,
        passed=1,
    )
    return run


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_stall_note_and_the_repeat_calls_read_at_both_widths(
    page, login, live_server, alice, stalled_run, viewport
):
    name = "desktop" if viewport == DESKTOP else "phone"
    page.set_viewport_size(viewport)
    login(page, alice, next_url=f"/agents/{stalled_run.agent_id}/runs/{stalled_run.pk}/")

    note = page.locator(".run-stall")
    expect(note).to_contain_text(re.compile(r"No case has finished for \d+ s\."))
    expect(note).to_contain_text("no worker is running")
    expect(page.locator(".run-reexecuted")).to_have_text(
        "Agent asked again 1 time: 1 after a worker's lost connection to Redis"
    )
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"], f"{name} scrolls sideways"
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"h8-run-stalled-{name}.png"), full_page=False)

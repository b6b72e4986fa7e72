"""The documentation's screenshots, taken from the real pages: the demo's loop walked in
Chromium at 1280 px on a real worker, with no model (agents list, dataset page, the finished
run and its Human review and Suggested changes tabs, Apply's review step, the comparison
with the verification run, Settings). Each page is checked before it is shot.

With EVALSITE_DOC_SCREENSHOTS=1 the pictures are written to docs/screenshots/, which the
docs pages and the README embed (`make doc-screenshots`); otherwise to a temporary folder,
so the walk is still tested without changing the committed pictures."""

import os
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse
from PIL import Image
from playwright.sync_api import Locator, Page, expect

from agents.models import Agent
from datasets.models import Dataset
from evalsite.demo import CASES, DEMO_PASSWORD, DEMO_USERNAME, KNOWLEDGE_AGENT, demo_load
from runs.models import Run
from suggestions.models import SuggestionGeneration
from tests.runs.conftest import wait_settled
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.worker]

DOCS_SHOTS = Path(settings.BASE_DIR) / "docs" / "screenshots"
VIEWPORT = {"width": 1280, "height": 800}
# Every picture the docs embed; tests/test_docs.py checks that each one the docs name is here.
SHOTS = (
    "agents-list",
    "dataset-page",
    "run-page",
    "review-tab",
    "suggestions-tab",
    "apply-review",
    "compare",
    "settings",
)


@pytest.fixture
def shots(tmp_path) -> Path:
    folder = DOCS_SHOTS if os.environ.get("EVALSITE_DOC_SCREENSHOTS") == "1" else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _shoot(page: Page, folder: Path, name: str, top: Locator | None = None, height: int = 800) -> None:
    """The window, settled, scrolled so that `top` is at its top edge, as a 256-colour PNG
    (a fifth of the size, the same to the eye)."""
    page.set_viewport_size({**VIEWPORT, "height": height})
    expect(page.locator(".htmx-request")).to_have_count(0)
    expect(page.locator(".htmx-settling")).to_have_count(0)
    if top is not None:
        y = top.evaluate("e => e.getBoundingClientRect().top + window.scrollY - 12")
        page.evaluate("y => window.scrollTo(0, y)", y)
    path = folder / f"{name}.png"
    page.screenshot(path=path, animations="disabled", caret="hide")
    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def _generated(run: Run) -> bool:
    return SuggestionGeneration.objects.filter(run=run, status=SuggestionGeneration.Status.DONE).exists()


def test_the_docs_screenshots_walk_the_demo_loop(page, live_server, celery_worker, no_llm, shots):
    demo = demo_load()
    agent = Agent.objects.get(name=KNOWLEDGE_AGENT)
    dataset = Dataset.objects.get(agent=agent)
    worker = celery_worker(concurrency=2)
    client = Client()
    client.force_login(demo.user)
    base = live_server.url
    page.set_viewport_size(VIEWPORT)

    page.goto(f"{base}/accounts/login/?next=/agents/")
    page.get_by_label("Username").fill(DEMO_USERNAME)
    page.get_by_label("Password").fill(DEMO_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name=KNOWLEDGE_AGENT, exact=True)).to_be_visible()
    _shoot(page, shots, "agents-list")

    page.goto(f"{base}{reverse('datasets:detail', args=[agent.pk, dataset.pk])}")
    expect(page.get_by_text(CASES[0][2]).first).to_be_visible()
    _shoot(page, shots, "dataset-page", top=page.get_by_role("link", name="← All datasets"), height=900)

    started = client.post(reverse("runs:start", args=[agent.pk, dataset.pk]), {"request_key": "docs"})
    assert started.status_code == 302
    run = wait_settled(Run.objects.get(agent=agent), worker=worker)
    assert (run.total, run.passed, run.failed, run.errored) == (len(CASES), 7, 3, 0)
    wait_for(lambda: _generated(run), what="the suggestions of the demo run")
    run_url = f"{base}{reverse('runs:detail', args=[agent.pk, run.pk])}"

    page.goto(run_url)
    expect(page.locator(".result-card details[open], details.result-card[open]").first).to_be_visible()
    _shoot(page, shots, "run-page", top=page.get_by_role("link", name="← All runs"), height=1400)

    page.goto(f"{run_url}?tab=review")
    expect(page.get_by_text("Review queue").first).to_be_visible()
    _shoot(page, shots, "review-tab", top=page.locator("#run-tab-panel"), height=900)

    page.goto(f"{run_url}?tab=suggestions")
    panel = page.locator("#suggestions")
    expect(panel.locator(".suggestion")).to_have_count(3)
    _shoot(page, shots, "suggestions-tab", top=page.locator("#run-tab-panel"), height=900)

    panel.get_by_role("link", name="Apply to agent").click()
    dialog = page.locator("dialog#apply-dialog")
    expect(dialog.get_by_role("checkbox")).to_have_count(3)
    expect(page.locator(".htmx-settling")).to_have_count(0)
    dialog.get_by_role("button", name="Continue: review the change").click()
    expect(dialog.get_by_text("Step 2 of 2")).to_be_visible()
    expect(dialog.get_by_text("3 other cases would answer differently with this knowledge")).to_be_visible()
    _shoot(page, shots, "apply-review")
    dialog.get_by_role("button", name="Apply: save as version 2").click()
    expect(page.locator("#toasts").get_by_text("Saved as version 2.")).to_be_visible()

    agent.refresh_from_db()
    verify = reverse("suggestions:verify", args=[agent.pk, run.pk])
    answer = client.post(verify, {"version": agent.current_version_id, "scope": "all", "request_key": "docs-verify"})
    assert answer.status_code == 302
    child = wait_settled(Run.objects.get(parent=run, purpose=Run.Purpose.VERIFY), worker=worker)
    assert (child.total, child.passed) == (10, 10)

    page.goto(f"{base}{reverse('runs:compare', args=[agent.pk])}?a={run.pk}&b={child.pk}")
    expect(page.get_by_text("fixes 3").first).to_be_visible()
    _shoot(page, shots, "compare", top=page.get_by_text("Directly comparable").first, height=900)

    page.goto(f"{base}{reverse('accounts:settings')}#model")
    expect(page.get_by_role("region", name="Model").get_by_role("heading", name="Model")).to_be_in_viewport()
    _shoot(page, shots, "settings")

    for name in SHOTS:
        with Image.open(shots / f"{name}.png") as image:
            assert image.width == VIEWPORT["width"], name

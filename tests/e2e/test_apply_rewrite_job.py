"""The Apply dialog with a model, in Chromium, driven by a real Celery worker: step 1 starts
the rewrite, the dialog polls its progress per field, a failed field is kept as it was, step
2 saves the new version; and Cancel stops the job with no model call after it.

The fake model holds the first field's rewrite until the test has seen the progress step,
so the order of events is fixed without any clock.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from playwright.sync_api import expect

from runs.models import Result, Run, RunCase
from suggestions.models import RewriteJob, Suggestion
from tests.e2e.conftest import DESKTOP, PHONE
from tests.factories import AgentFactory
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.worker]

SHOTS = Path("/work/shots/c17-apply-task")


@pytest.fixture
def run_with_suggestions(transactional_db, team, alice):
    agent = AgentFactory(team=team, name="Support bot", version__guardrails="Never share account data.")
    run = Run.objects.create(
        agent=agent, agent_version=agent.current_version, dataset_name="Support policy", status=Run.Status.COMPLETED,
        total=3, completed=3, passed=1, failed=2, average_score=4.0, scoring={"pass_threshold": 7},
    )  # fmt: skip
    cases = [
        RunCase.objects.create(run=run, position=i, question=f"Question {i}?", expected_answer="…") for i in range(3)
    ]
    for case, status in zip(cases, ["pass", "fail", "fail"], strict=True):
        Result.objects.create(run=run, case=case, status=status, score=9 if status == "pass" else 2)
    for position, (category, title) in enumerate(
        [("other", "Answer in two sentences"), ("knowledge", "Add the hotline"), ("guardrails", "Never guess")]
    ):
        Suggestion.objects.create(
            run=run, position=position, title=title, category=category, description=f"{title}: the cases show why.",
        )  # fmt: skip
    return run


@pytest.fixture
def gate():
    """Holds the fake model's first rewrite until the test opens it (and always at the end)."""
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
def model(fake_llm, settings, gate):
    settings.EVALSITE_LLM_RETRIES = 0  # the guardrails' 500 fails at once
    settings.EVALSITE_LLM_TIMEOUT = 30.0  # the held call must not time out (x3 for rewrites)

    def held(request: dict) -> dict:
        gate.wait(60)
        return {"json": {"text": "You are the support assistant for Acme Cloud. Answer in two sentences."}}

    fake_llm.add_rule(task="rewrite", contains="Current instructions", handler=held)
    fake_llm.add_rule(
        task="rewrite", contains="Current knowledge",
        json={"text": "Refunds are available within 30 days of purchase.\n\nSupport is open 9-17 CET on weekdays."
                      "\n\nHotline: +1 555 0100."},
    )  # fmt: skip
    fake_llm.add_rule(task="rewrite", contains="Current guardrails", status=500)
    return fake_llm


def _open_and_continue(page, login, alice, run):
    login(page, alice, f"/agents/{run.agent_id}/runs/{run.pk}/?tab=suggestions")
    page.locator("#suggestions").get_by_role("link", name="Apply to agent").click()
    dialog = page.locator("dialog#apply-dialog")
    expect(dialog.get_by_role("checkbox")).to_have_count(3)
    expect(page.locator(".htmx-settling")).to_have_count(0)
    dialog.get_by_role("button", name="Continue: review the change").click()
    return dialog


def _pause(page):
    return lambda seconds: page.wait_for_timeout(seconds * 1000)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_dialog_follows_the_rewrite_then_reviews_it(
    page, login, live_server, celery_worker, alice, run_with_suggestions, model, gate, viewport
):
    run, width = run_with_suggestions, viewport["width"]
    worker = celery_worker(concurrency=1)
    page.set_viewport_size(viewport)
    SHOTS.mkdir(parents=True, exist_ok=True)
    dialog = _open_and_continue(page, login, alice, run)

    # The first field is with the model: the dialog says so and polls.
    progress = dialog.locator("#apply-progress")
    expect(progress.get_by_text("Rewriting the instructions… 0 of 3 done")).to_be_visible()
    expect(progress).to_have_attribute("hx-trigger", "every 3s")
    wait_for(lambda: model.in_flight == 1, what="the first rewrite at the model", pause=_pause(page))
    # The next poll shows the field at the model (the page polls every 3 s while the job is active).
    expect(progress.locator(".rewrite-field.is-running")).to_contain_text("Instructions", timeout=30_000)
    expect(progress.get_by_text("Rewriting the instructions… 0 of 3 done")).to_be_visible()
    dialog.screenshot(path=str(SHOTS / f"apply-progress-{width}.png"))
    gate.set()

    # Instructions and knowledge rewritten, the guardrails failed: its message and the choice.
    try:
        expect(progress.locator(".rewrite-field.is-failed .rewrite-field-error")).to_contain_text(
            "The model could not rewrite the guardrails: The model provider failed with a server error (500)",
            timeout=60_000,
        )
    except AssertionError as error:
        raise AssertionError(f"{error}\n{worker.read_log()[-3000:]}") from None
    expect(progress).not_to_have_attribute("hx-trigger", "every 3s")
    expect(progress.locator(".rewrite-field.is-done")).to_have_count(2)
    dialog.screenshot(path=str(SHOTS / f"apply-field-failed-{width}.png"))
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    dialog.get_by_role("button", name="Keep the original guardrails").click()

    # Step 2 as before: the two rewritten fields, then a new version.
    expect(dialog.get_by_text("Step 2 of 2")).to_be_visible()
    expect(dialog.locator("#apply-diff-knowledge .add", has_text="Hotline: +1 555 0100.")).to_be_visible()
    expect(dialog.locator("#apply-diff-instructions .add", has_text="Answer in two sentences.")).to_be_visible()
    expect(dialog.get_by_label("Final guardrails")).to_have_count(0)
    expect(dialog.get_by_text("Applying 2 suggestions changes the instructions and the knowledge")).to_be_visible()
    dialog.screenshot(path=str(SHOTS / f"apply-review-after-job-{width}.png"))
    dialog.get_by_role("button", name="Apply: save as version 2").click()

    expect(page.locator("#toasts").get_by_text("Saved as version 2.")).to_be_visible()
    agent = run.agent
    agent.refresh_from_db()
    assert agent.current_version.knowledge.endswith("Hotline: +1 555 0100.")
    assert agent.current_version.guardrails == "Never share account data."  # kept
    assert model.count(task="rewrite") == 3
    kept = Suggestion.objects.get(title="Never guess")
    assert kept.state == Suggestion.State.PROPOSED  # its field kept its text: not applied


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_cancel_stops_the_rewrite_and_no_model_call_follows(
    page, login, live_server, celery_worker, alice, run_with_suggestions, model, gate, viewport
):
    run, width = run_with_suggestions, viewport["width"]
    worker = celery_worker(concurrency=1)
    page.set_viewport_size(viewport)
    SHOTS.mkdir(parents=True, exist_ok=True)
    dialog = _open_and_continue(page, login, alice, run)
    wait_for(lambda: model.in_flight == 1, what="the first rewrite at the model", pause=_pause(page))

    dialog.get_by_role("button", name="Cancel the rewrite").click()

    expect(dialog.get_by_text("The rewrite was cancelled. Nothing was changed.")).to_be_visible()
    dialog.screenshot(path=str(SHOTS / f"apply-cancelled-{width}.png"))
    gate.set()  # the call in flight comes back; its answer is dropped
    wait_for(lambda: " succeeded in " in worker.read_log(), what="the field's task to end", pause=_pause(page))
    assert model.count(task="rewrite") == 1  # nothing after Cancel
    job = RewriteJob.objects.get(run=run)
    assert job.status == RewriteJob.Status.CANCELLED
    assert [entry["text"] for entry in job.fields] == ["", "", ""]
    expect(dialog.locator(".rewrite-field.is-stopped")).to_have_count(3)
    expect(dialog.locator("#apply-progress")).not_to_have_attribute("hx-trigger", "every 3s")

    # Back to step 1, with the same suggestions ticked.
    dialog.get_by_role("link", name="← Back").click()
    expect(dialog.get_by_role("button", name="Continue: review the change")).to_be_visible()
    expect(dialog.get_by_role("checkbox", checked=True)).to_have_count(3)

"""The judge on a result card and the re-score flow, in Chromium with a real Celery worker.

A run of an llm agent on the fake model server: case 1's judge score sits on the line (7, then 6
and 8 when asked again), so its card shows the samples and "Unstable" with the judge's label.
Then the dataset's criteria change and Re-score judges the same answers again as a new run,
labelled with the new judge: the fake server sees judge requests only for it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from agents.models import Agent
from datasets import services as dataset_services
from runs import services
from runs.models import Run
from tests.e2e.conftest import DESKTOP, PHONE
from tests.factories import AgentFactory, DatasetFactory, TestCaseFactory
from tests.runs.conftest import wait_settled

pytestmark = [pytest.mark.e2e, pytest.mark.worker]

SHOTS = Path("/work/shots/e18-judge")


def _dataset(team):
    agent = AgentFactory(team=team, name="Support bot", kind=Agent.Kind.LLM)
    dataset = DatasetFactory(agent=agent, name="Refund policy")
    questions = ["Can I return a gift card?", "How long is the refund window?", "Do you refund shipping?"]
    for position, question in enumerate(questions):
        TestCaseFactory(dataset=dataset, position=position, question=question, expected_answer="Within 30 days.")
    return dataset


def _shoot(page: Page, name: str, width: int, *, full_page: bool = True) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=full_page)
    assert page.evaluate("document.documentElement.scrollWidth") <= width, f"{name} scrolls sideways at {width} px"


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_card_shows_the_judge_and_rescore_judges_again(
    page, login, live_server, alice, team, fake_llm, celery_worker, viewport
):
    for score in (7, 6):
        fake_llm.add_rule(task="judge", contains="gift card", json={"score": score, "reasoning": "Close."}, times=1)
    fake_llm.add_rule(task="judge", contains="gift card", json={"score": 8, "reasoning": "Mostly right."})
    fake_llm.add_rule(task="agent", reply="Gift cards can be returned within 30 days.")
    worker = celery_worker()
    dataset = _dataset(team)
    run = wait_settled(services.run_start(agent=dataset.agent, dataset=dataset, user=alice), worker=worker)
    width = viewport["width"]
    page.set_viewport_size(viewport)

    login(page, alice, f"/agents/{run.agent_id}/runs/{run.pk}/")
    card = page.locator("#case-0")
    card.locator("summary").click()
    expect(card.get_by_text("Near the pass line")).to_be_visible()
    expect(card.locator(".badge-unstable")).to_have_text("Unstable")
    expect(card.locator(".judge-sample")).to_have_text(["7", "6", "8"])
    expect(card.locator(".result-judge-by")).to_contain_text(run.judge_config.label)
    expect(page.locator(".run-meta .chip-judge")).to_have_text(run.judge_config.label)
    _shoot(page, "card-judge-stability", width)
    card.locator(".result-stability").screenshot(path=str(SHOTS / f"card-stability-detail-{width}.png"))

    dataset_services.dataset_update_settings(dataset=dataset, acceptance_criteria="Names the 30-day window.")
    page.get_by_role("button", name="Re-score").click()
    dialog = page.locator("#rescore-dialog")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_label("Judge")).to_have_value("")  # the dataset's current settings
    _shoot(page, "rescore-dialog", width, full_page=False)
    dialog.get_by_role("button", name="Start re-score").click()
    page.wait_for_url(lambda url: "/runs/" in url and not url.endswith(f"/runs/{run.pk}/"))
    child = wait_settled(Run.objects.get(parent=run, purpose=Run.Purpose.RESCORE), worker=worker)
    page.reload()

    expect(page.locator(".run-lineage").first).to_contain_text(f"Re-score of run #{run.pk}")
    expect(page.locator(".run-meta .chip-judge")).to_have_text(child.judge_config.label)
    assert child.judge_config.number == 2 and "custom criteria" in child.judge_config.label
    assert fake_llm.count("agent", run=child.pk) == 0
    assert fake_llm.count(run=child.pk) == fake_llm.count("judge", run=child.pk) >= 3
    _shoot(page, "rescore-run", width)

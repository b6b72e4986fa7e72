"""The run page opens on its results (issue 34, item 8): at 1280x800 the first result card starts
within the first screen, the first failing card is open, and a tab is one click away with its
state in the address."""

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import PHONE
from tests.factories import AgentFactory, DatasetFactory
from tests.runs.review_helpers import CaseSpec, build_run

pytestmark = pytest.mark.e2e

FIRST_SCREEN = {"width": 1280, "height": 800}


def test_the_first_screen_shows_the_first_result_cards(page, login, live_server, alice, team, no_llm):
    agent = AgentFactory(team=team, name="Support bot")
    dataset = DatasetFactory(agent=agent, name="Refund questions")
    cases = [
        CaseSpec(question=f"Question {i}", repeats=[("fail", 3.0) if i == 2 else ("pass", 9.0)], tags=["refunds"])
        for i in range(8)
    ]
    run = build_run(agent=agent, dataset=dataset, cases=cases)
    page.set_viewport_size(FIRST_SCREEN)
    login(page, alice, f"/agents/{agent.pk}/runs/{run.pk}/")
    first = page.locator("#case-0")
    expect(first).to_be_visible()
    assert first.bounding_box()["y"] < FIRST_SCREEN["height"]
    expect(page.locator("#case-2 details")).to_have_attribute("open", "")

    page.get_by_role("link", name="Charts").click()
    expect(page).to_have_url(f"{live_server.url}/agents/{agent.pk}/runs/{run.pk}/?tab=charts")
    expect(page.locator("#run-charts")).to_contain_text("Score distribution")

    # On a phone the five tabs fit one line, inside the screen.
    page.set_viewport_size(PHONE)
    tabs = page.locator("nav.run-tabs a")
    boxes = [tabs.nth(n).bounding_box() for n in range(tabs.count())]
    assert len({round(box["y"]) for box in boxes}) == 1, boxes
    assert boxes[-1]["x"] + boxes[-1]["width"] <= PHONE["width"], boxes[-1]

"""The llm agent's own answer timeout (issue 16 sec. 2): it sits with the other model settings,
saves from the edit page, and an HTTP agent never shows it."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from agents.models import Agent
from tests.e2e.conftest import DESKTOP, PHONE
from tests.factories import AgentFactory

pytestmark = pytest.mark.e2e

SHOTS = Path("/tmp/shots-i16b")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_an_llm_agents_timeout_is_set_in_the_model_section(
    page, login, live_server, transactional_db, alice, team, viewport
):
    agent = AgentFactory(team=team, name="Refund helper", kind=Agent.Kind.LLM)
    page.set_viewport_size(viewport)
    login(page, alice, f"/agents/{agent.pk}/edit/")
    model_card = page.locator("section[aria-labelledby=model-title]")
    timeout = model_card.get_by_label("Timeout (seconds)")
    expect(timeout).to_be_visible()
    expect(model_card).to_contain_text("not retried unless the server sets EVALSITE_LLM_RETRY_TIMEOUTS")
    # The field is as wide as its neighbours' column, not stretched or squeezed off the card.
    box, card = timeout.bounding_box(), model_card.bounding_box()
    assert box and card and box["x"] >= card["x"] and box["x"] + box["width"] <= card["x"] + card["width"]
    SHOTS.mkdir(exist_ok=True)
    model_card.screenshot(path=str(SHOTS / f"llm-agent-model-card-{viewport['width']}.png"))

    timeout.fill("45")
    page.get_by_role("button", name="Save changes").click()
    page.wait_for_url(f"**/agents/{agent.pk}/")
    agent.refresh_from_db()
    assert agent.current_version.llm_timeout == 45
    config = page.locator("section[aria-labelledby=cfg-model]")
    expect(config).to_contain_text("45 seconds")
    config.screenshot(path=str(SHOTS / f"llm-agent-config-{viewport['width']}.png"))


def test_an_http_agent_does_not_show_the_llm_timeout(page, login, transactional_db, alice, team):
    agent = AgentFactory(
        team=team, kind=Agent.Kind.HTTP, version__http_url="https://agent.example.com/answer", version__knowledge=""
    )
    page.set_viewport_size(DESKTOP)
    login(page, alice, f"/agents/{agent.pk}/edit/")
    expect(page.locator("#id_llm_timeout")).to_be_hidden()
    expect(page.locator("#id_http_timeout")).to_be_visible()

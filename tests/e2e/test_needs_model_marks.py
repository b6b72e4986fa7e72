"""Model-only fields are marked where they are set, in the browser (issue 14 item 24)."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import DESKTOP, PHONE
from tests.factories import AgentFactory, DatasetFactory, TestCaseFactory

pytestmark = pytest.mark.e2e

SHOTS = Path("/tmp/shots-i14b")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_smoke_tests_and_judge_settings_say_they_need_a_model(
    page, login, live_server, alice, team, transactional_db, no_llm, viewport
):
    agent = AgentFactory(team=team, name="Support bot")
    dataset = DatasetFactory(agent=agent, name="Refunds")
    TestCaseFactory(dataset=dataset)
    page.set_viewport_size(viewport)
    SHOTS.mkdir(exist_ok=True)

    login(page, alice, f"/agents/{agent.pk}/datasets/{dataset.pk}/settings/")
    criteria = page.locator("label", has_text="Acceptance criteria")
    expect(criteria.locator(".needs-model")).to_have_text("Needs a model")
    expect(page.locator("label", has_text="Vector similarity").locator(".needs-model")).to_be_visible()
    page.screenshot(path=str(SHOTS / f"settings-needs-model-{viewport['width']}.png"), full_page=True)

    page.goto(f"{live_server.url}/agents/{agent.pk}/datasets/{dataset.pk}/")
    page.get_by_role("link", name="+ Add test case").first.click()
    dialog = page.locator("dialog[open]")
    dialog.get_by_text("Advanced: context, conversation, scenario, tools, judging, smoke tests").click()
    smoke = dialog.locator("label", has_text="Smoke-test paraphrases").locator(".needs-model")
    smoke.scroll_into_view_if_needed()
    expect(smoke).to_be_visible()
    expect(dialog.get_by_text("No model is configured to paraphrase questions")).to_be_visible()
    page.screenshot(path=str(SHOTS / f"case-form-needs-model-{viewport['width']}.png"))

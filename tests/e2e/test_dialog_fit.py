"""Dialogs fit their content and the screen (issue 14 item 19).

The rollback dialog sat in a `white-space: nowrap` table cell and cut its text off at
"...Nothing is dele"; the add-case dialog pushed its buttons below its own edge on a
phone once Advanced was open.
"""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from agents.services import agent_update
from tests.e2e.conftest import DESKTOP, PHONE
from tests.factories import AgentFactory, DatasetFactory, TestCaseFactory

pytestmark = pytest.mark.e2e

SHOTS = Path("/tmp/shots-i14b")

# The element's box lies inside the dialog's and the viewport's, and nothing in it overflows.
INSIDE = """([element, dialog]) => {
  const e = element.getBoundingClientRect(), d = dialog.getBoundingClientRect();
  return {
    inDialog: e.left >= d.left - 0.5 && e.right <= d.right + 0.5 && e.top >= d.top - 0.5 && e.bottom <= d.bottom + 0.5,
    inViewport: e.bottom <= window.innerHeight + 0.5 && e.right <= window.innerWidth + 0.5,
    clipped: element.scrollWidth > element.clientWidth + 1,
  };
}"""


def _fits(page, element, dialog) -> dict:
    return page.evaluate(INSIDE, [element.element_handle(), dialog.element_handle()])


def _shot(page, name, viewport):
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}-{viewport['width']}.png"))


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_rollback_dialog_shows_all_its_text(page, login, live_server, alice, team, transactional_db, viewport):
    agent = AgentFactory(team=team, name="Support bot")
    agent_update(agent=agent, user=None, instructions="Answer in one sentence.")
    page.set_viewport_size(viewport)
    login(page, alice, f"/agents/{agent.pk}/versions/")

    page.get_by_role("button", name="Roll back").first.click()
    dialog = page.locator("dialog[open]")
    expect(dialog).to_be_visible()
    text = dialog.locator(".dialog-body p")
    expect(text).to_contain_text("Nothing is deleted")
    assert _fits(page, text, dialog) == {"inDialog": True, "inViewport": True, "clipped": False}
    assert _fits(page, dialog.get_by_role("button", name="Roll back"), dialog)["inDialog"]
    _shot(page, "rollback-dialog", viewport)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_add_case_dialog_keeps_its_buttons_on_screen(
    page, login, live_server, alice, team, transactional_db, viewport
):
    agent = AgentFactory(team=team, name="Support bot")
    dataset = DatasetFactory(agent=agent, name="Refunds")
    TestCaseFactory(dataset=dataset)
    page.set_viewport_size(viewport)
    login(page, alice, f"/agents/{agent.pk}/datasets/{dataset.pk}/")

    page.get_by_role("link", name="+ Add test case").first.click()
    dialog = page.locator("dialog[open]")
    expect(dialog).to_be_visible()
    dialog.get_by_text("Advanced: context, conversation, scenario, tools, judging, smoke tests").click()
    expect(dialog.get_by_text("Smoke tests", exact=True)).to_be_attached()

    button = dialog.get_by_role("button", name="Add test case")
    fit = _fits(page, button, dialog)
    assert fit["inDialog"] and fit["inViewport"], fit
    _shot(page, "add-case-advanced", viewport)
    # The body scrolls instead: its last field can be reached and the button stays put.
    dialog.get_by_label("Paraphrase guidance").scroll_into_view_if_needed()
    expect(dialog.get_by_label("Paraphrase guidance")).to_be_in_viewport()
    fit = _fits(page, button, dialog)
    assert fit["inDialog"] and fit["inViewport"], fit

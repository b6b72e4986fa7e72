"""Sign-in and token pages as a user sees them (issue 14 item 20)."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import DESKTOP, PHONE

pytestmark = pytest.mark.e2e

SHOTS = Path("/tmp/shots-i14b")
# What a click at the element's centre would hit is the element itself (nothing covers it).
UNCOVERED = """element => {
  const r = element.getBoundingClientRect();
  const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
  return hit === element || element.contains(hit);
}"""


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_login_shows_the_brand_once(page, live_server, transactional_db, viewport):
    page.set_viewport_size(viewport)
    page.goto(f"{live_server.url}/accounts/login/")
    expect(page.locator(".brand")).to_have_count(1)
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / f"login-{viewport['width']}.png"))


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_new_token_copy_button_is_not_covered(page, login, live_server, alice, viewport):
    page.set_viewport_size(viewport)
    login(page, alice, "/accounts/settings/#tokens")
    page.get_by_label("New token").fill("CI pipeline")
    page.get_by_role("button", name="Create token").click()
    copy = page.get_by_role("button", name="Copy", exact=True)
    expect(copy).to_be_visible()
    copy.scroll_into_view_if_needed()
    assert copy.evaluate(UNCOVERED)
    expect(page.locator("#new-token-value")).to_be_focused()
    page.screenshot(path=str(SHOTS / f"token-created-{viewport['width']}.png"))

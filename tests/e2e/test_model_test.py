"""Settings → Model → Test connection in a real browser, at desktop and phone width."""

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import DESKTOP, PHONE

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_test_connection_shows_what_each_model_can_do(page, login, live_server, alice, fake_llm, viewport):
    fake_llm.set_server("llama.cpp")
    fake_llm.add_rule(task="probe", json={"answer": "OK"})
    page.set_viewport_size(viewport)
    login(page, alice, "/accounts/settings/#model")
    section = page.locator("#model")
    expect(section.get_by_text("Not tested", exact=True)).to_be_visible()

    section.get_by_role("button", name="Test connection").click()

    expect(section.get_by_text("Needs attention", exact=True)).to_be_visible(timeout=30_000)
    expect(section.get_by_text("JSON: yes, JSON schema (llama.cpp json_object + schema)").first).to_be_visible()
    expect(section.get_by_text("must be created with embedding=True")).to_be_visible()
    section.screenshot(path=f"/tmp/shots-i16/model-test-{viewport['width']}.png")
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]

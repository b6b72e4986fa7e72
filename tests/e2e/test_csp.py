"""The console under its Content-Security-Policy: the main pages work in Chromium with zero
CSP violations (no inline script, no on*= handler, no injected <style>, no eval)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.conftest import DESKTOP, PHONE
from tests.test_permissions import url_objects  # noqa: F401  (fixture)

pytestmark = pytest.mark.e2e

RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", function (event) {
  window.__cspViolations.push(event.violatedDirective + " " + (event.blockedURI || "inline") + " "
    + (event.sourceFile || "") + ":" + event.lineNumber);
});
"""


def _watch(page: Page) -> list[str]:
    console: list[str] = []
    page.add_init_script(RECORD_VIOLATIONS)
    page.on("console", lambda msg: console.append(msg.text) if "Content Security Policy" in msg.text else None)
    return console


def _violations(page: Page, console: list[str]) -> list[str]:
    return [*page.evaluate("window.__cspViolations || []"), *console]


def test_the_main_pages_work_with_no_csp_violation(page, login, live_server, alice, url_objects):  # noqa: F811
    console = _watch(page)
    page.set_viewport_size(DESKTOP)
    login(page, alice)
    o = url_objects
    agent, dataset, run = o["agent_id"], o["dataset_id"], o["run_id"]
    seen: dict[str, list[str]] = {}

    def visit(path: str, name: str) -> None:
        page.goto(f"{live_server.url}{path}")
        page.wait_for_load_state("networkidle")
        seen[path] = _violations(page, console)
        page.screenshot(path=f"/tmp/shots-i15/csp-{name}.png")

    visit("/agents/", "agents")
    visit(f"/agents/{agent}/", "agent")
    visit(f"/agents/{agent}/datasets/", "datasets")
    visit(f"/agents/{agent}/datasets/{dataset}/", "dataset")
    # The Import menu (a <details>) opens, and closes on Escape: behaviour moved out of the template.
    menu = page.locator("details.ds-menu").first
    menu.locator("summary").click()
    expect(menu).to_have_attribute("open", "")
    page.keyboard.press("Escape")
    expect(menu).not_to_have_attribute("open", "")
    seen["dataset menus"] = _violations(page, console)

    visit(f"/agents/{agent}/runs/", "runs")
    visit(f"/agents/{agent}/runs/{run}/", "run")
    export = page.locator("details.run-export")
    export.locator("summary").click()
    expect(export).to_have_attribute("open", "")
    page.locator("h2.run-title").click()  # a click elsewhere closes it
    expect(export).not_to_have_attribute("open", "")
    seen["run menus"] = _violations(page, console)

    visit("/accounts/settings/", "settings")
    visit("/healthz", "healthz")
    visit("/api/docs", "api-docs")
    expect(page.locator(".swagger-ui")).to_be_visible()  # served locally, and it ran under the policy

    page.set_viewport_size(PHONE)
    visit(f"/agents/{agent}/datasets/{dataset}/", "dataset-phone")

    assert {path: found for path, found in seen.items() if found} == {}

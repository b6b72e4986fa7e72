"""An agent's pages fit a phone's width, in Chromium at 390 px: a long line (a tool's JSON
schema or canned result) scrolls inside its own box, and the page never scrolls sideways."""

from pathlib import Path

import pytest

from agents.models import Agent
from evalsite import demo
from tests.e2e.conftest import PHONE
from tests.factories import AgentFactory

pytestmark = pytest.mark.e2e

SHOTS = Path("/tmp/shots-fit")
CANNED = demo.TOOLS[0]["result"]
# What sticks out past the window's right edge, unless a box on its way up scrolls or clips it.
STICKING_OUT = """() => {
  const width = window.innerWidth, out = [];
  for (const element of document.querySelectorAll('body *')) {
    const box = element.getBoundingClientRect();
    if (box.width === 0 || box.right <= width + 1) continue;
    let parent = element.parentElement, clipped = false;
    for (; parent; parent = parent.parentElement) {
      if (/auto|scroll|hidden/.test(getComputedStyle(parent).overflowX)) { clipped = true; break; }
    }
    if (!clipped) out.push(`${element.tagName.toLowerCase()}.${element.className} ends at ${Math.round(box.right)} px`);
  }
  return out.slice(0, 5);
}"""


@pytest.fixture
def tool_agent(transactional_db, team):
    return AgentFactory(
        team=team,
        name="Support bot",
        kind=Agent.Kind.LLM,
        version__tools=demo.TOOLS,  # the demo agent's tool, whose canned result showed it
    )


@pytest.mark.parametrize("where", ["agent", "version"])
def test_a_tools_json_scrolls_in_its_box_on_a_phone(page, login, live_server, alice, tool_agent, where):
    page.set_viewport_size(PHONE)
    url = f"/agents/{tool_agent.pk}/"
    if where == "version":
        url += f"versions/{tool_agent.current_version_id}/"
    login(page, alice, url)
    canned = page.locator(".tool-view pre.code").nth(1)
    assert canned.inner_text() == CANNED  # shown whole, in its own scrolling box
    assert page.evaluate(STICKING_OUT) == []
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    box = canned.bounding_box()
    assert box is not None and box["x"] + box["width"] <= PHONE["width"]
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{where}-tools-390.png"), full_page=True)

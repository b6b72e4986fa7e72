"""The HTTP agent's pages (issue 14 item 21): the JSON samples of the request/response
contract are shown whole, and the agent can be described for Generate with AI."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from agents.models import Agent
from tests.e2e.conftest import DESKTOP, PHONE
from tests.factories import AgentFactory

pytestmark = pytest.mark.e2e

SHOTS = Path("/tmp/shots-i14b")
# Every line of the sample fits: nothing is hidden behind a horizontal scroll.
WHOLE = "pre => pre.scrollWidth <= pre.clientWidth + 1"


@pytest.fixture
def http_agent(transactional_db, team):
    return AgentFactory(
        team=team,
        name="Deployed bot",
        kind=Agent.Kind.HTTP,
        version__instructions="",
        version__knowledge="",
        version__http_url="https://agent.example.com/answer",
    )


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_contract_samples_are_not_cut(page, login, live_server, alice, http_agent, viewport):
    page.set_viewport_size(viewport)
    login(page, alice, f"/agents/{http_agent.pk}/")
    samples = page.locator(".contract pre.code")
    expect(samples).to_have_count(2)
    for index in range(2):
        assert samples.nth(index).evaluate(WHOLE), f"sample {index + 1} is cut"
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / f"http-agent-{viewport['width']}.png"), full_page=True)

    page.goto(f"{live_server.url}/agents/{http_agent.pk}/edit/")
    page.get_by_text("Request and response format").click()
    samples = page.locator(".contract pre.code")
    for index in range(2):
        assert samples.nth(index).evaluate(WHOLE), f"edit page sample {index + 1} is cut"


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_an_http_agent_can_be_described_for_generation(page, login, live_server, alice, http_agent, fake_llm, viewport):
    page.set_viewport_size(viewport)
    login(page, alice, f"/agents/{http_agent.pk}/datasets/new/?tab=generate")
    notice = page.locator("#generate-unavailable")
    expect(notice).to_contain_text("Describe what it does")
    expect(notice).not_to_contain_text("instructions, skills, knowledge or guardrails")
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / f"http-generate-tab-{viewport['width']}.png"), full_page=True)

    page.goto(f"{live_server.url}/agents/{http_agent.pk}/edit/")
    expect(page.get_by_text("Used only to write test cases with Generate with AI")).to_be_visible()
    page.screenshot(path=str(SHOTS / f"http-agent-edit-{viewport['width']}.png"), full_page=True)
    page.get_by_label("What the agent does").fill("Answers billing questions for Acme Cloud customers.")
    page.get_by_role("button", name="Save changes").click()
    page.wait_for_url(f"**/agents/{http_agent.pk}/")
    http_agent.refresh_from_db()
    assert http_agent.current_version.instructions == "Answers billing questions for Acme Cloud customers."
    assert http_agent.current_version.http_url == "https://agent.example.com/answer"
    expect(page.get_by_role("heading", name="Description for test generation")).to_be_visible()
    page.screenshot(path=str(SHOTS / f"http-agent-described-{viewport['width']}.png"), full_page=True)

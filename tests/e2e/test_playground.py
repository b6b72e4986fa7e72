"""The playground in a real browser: send a message, watch the answer arrive, look at an http
agent's raw response, and save a turn as a test case, at desktop and phone widths."""

import os

import pytest
from playwright.sync_api import expect

from agents.models import Agent
from datasets.models import TestCase
from tests.agents.test_adapters import FakeAgentServer
from tests.e2e.conftest import DESKTOP, PHONE
from tests.factories import AgentFactory, DatasetFactory

pytestmark = pytest.mark.e2e
SHOTS = os.environ.get("EVALSITE_SCREENSHOTS", "")


def _shot(page, name: str) -> None:
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, f"{name}.png"), full_page=True)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_chat_then_save_as_test_case(page, login, live_server, transactional_db, team, alice, tasks_run_here, viewport):
    agent = AgentFactory(
        team=team,
        name="Support bot",
        kind=Agent.Kind.KNOWLEDGE,
        version__knowledge="# Refunds\nRefunds are possible within 30 days of purchase.\n\n# Support\nWeekdays 9-17.",
    )
    dataset = DatasetFactory(agent=agent, name="Support questions")
    page.set_viewport_size(viewport)
    login(page, alice, f"/agents/{agent.pk}/playground/")

    expect(page.get_by_role("heading", name="Try the agent")).to_be_visible()
    page.get_by_label("Message").fill("Can I get a refund after two weeks?")
    page.get_by_role("button", name="Send").click()
    turn = page.locator(".chat-turn").first
    expect(turn.locator(".bubble-agent")).to_contain_text("within 30 days")
    expect(turn.get_by_text("Retrieved context (1)")).to_be_visible()
    expect(page.get_by_label("Message")).to_have_value("")  # a fresh box for the next message
    _shot(page, f"playground-chat-{viewport['width']}")

    turn.get_by_role("link", name="Save as test case").click()
    dialog = page.locator("dialog#save-case-dialog")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_label("Expected answer")).to_have_value(
        "Refunds: Refunds are possible within 30 days of purchase."
    )
    dialog.get_by_label("Expected answer").fill("Yes: refunds are possible within 30 days of purchase.")
    _shot(page, f"playground-save-dialog-{viewport['width']}")
    dialog.get_by_role("button", name="Save test case").click()

    expect(page.locator("#toasts, .messages").get_by_text("Saved as test case #1")).to_be_visible()
    expect(page.get_by_role("link", name="Saved as a test case of “Support questions”")).to_be_visible()
    case = TestCase.objects.get(dataset=dataset)
    assert case.expected_answer == "Yes: refunds are possible within 30 days of purchase."


def test_an_http_agent_error_shows_the_raw_response(
    page, login, live_server, transactional_db, team, alice, tasks_run_here, settings
):
    settings.EVALSITE_LLM_RETRIES = 0  # one attempt, so the 500 is the answer
    server = FakeAgentServer()
    try:
        agent = AgentFactory(
            team=team,
            name="Deployed bot",
            kind=Agent.Kind.HTTP,
            version__http_url=server.url,
            version__http_headers={"Authorization": "Bearer sk-never-shown"},
        )
        server.replies.append((500, '{"detail": "model backend unavailable"}', 0))
        page.set_viewport_size(DESKTOP)
        login(page, alice, f"/agents/{agent.pk}/playground/")
        page.get_by_label("Message").fill("Ping")
        page.get_by_role("button", name="Send").click()
        agent_bubble = page.locator(".chat-turn .bubble-agent").first
        expect(agent_bubble).to_contain_text("The agent could not answer.")
        expect(agent_bubble.locator("details[open]")).to_contain_text("model backend unavailable")
        expect(agent_bubble).to_contain_text("Authorization: ••••••••")
        expect(agent_bubble).not_to_contain_text("sk-never-shown")
        _shot(page, "playground-http-error-1280")
    finally:
        server.stop()

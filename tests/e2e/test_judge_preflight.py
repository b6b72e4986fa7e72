"""The judge's preflight in a real browser, at desktop and phone width: the start dialog shows
what a failed judge did on each calibration answer and starts a marked run only when asked,
and Settings shows the console judge's preflight."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from agents.models import Agent
from runs.judging import configs as judging
from runs.models import Run
from runs.services.preflight import judge_config_preflight
from tests.e2e.conftest import DESKTOP, PHONE
from tests.factories import AgentFactory, DatasetFactory, TestCaseFactory
from tests.runs.preflight_helpers import fit_judge

pytestmark = pytest.mark.e2e

SHOTS = Path("/tmp/shots-h5")
FITS = "document.documentElement.scrollWidth <= window.innerWidth"


def _shot(target, name, viewport):
    SHOTS.mkdir(exist_ok=True)
    target.screenshot(path=str(SHOTS / f"h5-{name}-{viewport['width']}.png"))


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_start_dialog_shows_a_failed_preflight_and_starts_a_marked_run_when_asked(
    page, login, live_server, alice, team, fake_llm, transactional_db, viewport
):
    agent = AgentFactory(team=team, name="Support bot", kind=Agent.Kind.LLM)
    dataset = DatasetFactory(agent=agent, name="Refund policy")
    TestCaseFactory(dataset=dataset, position=0)
    fake_llm.set_model_identity("fake-judge", reported="SmolLM2-135M-Instruct-Q8_0.gguf")
    judge_config_preflight(config=judging.dataset_judge_config(dataset=dataset))  # the fake scores all 8
    page.set_viewport_size(viewport)
    login(page, alice, f"/agents/{agent.pk}/datasets/{dataset.pk}/")

    page.get_by_role("button", name="Run Evaluation").click()
    dialog = page.locator("dialog[open]")
    panel = dialog.locator("#judge-preflight")
    expect(panel.get_by_text("The judge failed its preflight")).to_be_visible()
    expect(panel.locator("li.preflight-item")).to_have_count(15)
    panel.evaluate("element => element.scrollIntoView({block: 'start'})")
    _shot(page, "dialog-failed", viewport)
    assert page.evaluate(FITS)

    dialog.get_by_role("button", name="Start run").click()
    expect(dialog.locator("#start-errors")).to_contain_text("failed its preflight")
    assert not Run.objects.exists()

    dialog.get_by_label("Start anyway").check()
    dialog.get_by_role("button", name="Start run").click()
    page.wait_for_url(f"**/agents/{agent.pk}/runs/*/")
    assert Run.objects.get().judge_failed_preflight


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_settings_shows_the_judges_preflight(page, login, live_server, alice, fake_llm, transactional_db, viewport):
    fit_judge(fake_llm, scores={"partial": 9})  # a lenient judge: a partly right answer passes
    judge_config_preflight(config=judging.console_judge_config())
    page.set_viewport_size(viewport)
    login(page, alice, "/accounts/settings/#model")

    panel = page.locator("#judge-preflight-settings")
    expect(panel.get_by_text("Failed: its scores cannot be trusted.")).to_be_visible()
    expect(panel.get_by_text("It put 3 of 15 answers out of place.")).to_be_visible()
    expect(panel.get_by_role("button", name="Preflight the judge")).to_be_visible()
    panel.scroll_into_view_if_needed()
    _shot(panel, "settings-failed", viewport)
    assert page.evaluate(FITS)

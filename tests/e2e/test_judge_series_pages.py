"""Issue 34 in Chromium at 1280 and 390 px: the history chart draws one line per judge
configuration and names the stopped runs it left out; the Run Evaluation dialog's estimate says
what each kind of call is estimated from. Neither scrolls sideways on a phone."""

import os
from pathlib import Path

import pytest
from django.urls import reverse
from playwright.sync_api import expect

from agents.models import Agent, AgentVersion
from runs.models import JudgeConfig, Run
from tests.e2e.conftest import DESKTOP, PHONE
from tests.factories import AgentFactory, DatasetFactory, TestCaseFactory
from tests.runs.review_helpers import CaseSpec, build_run

pytestmark = pytest.mark.e2e

SHOTS = Path(os.environ.get("EVALSITE_SHOTS", "/tmp/evalsite-shots"))
WIDE = "() => document.documentElement.scrollWidth > window.innerWidth + 1"


def _outcomes(passed, failed):
    return [CaseSpec(repeats=[("pass", 9.0)])] * passed + [CaseSpec(repeats=[("fail", 3.0)])] * failed


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_history_draws_one_series_per_judge(page, login, live_server, alice, team, no_llm, viewport):
    agent = AgentFactory(team=team, name="Support bot")
    dataset = DatasetFactory(agent=agent, name="Refunds")
    v1 = agent.current_version
    v2 = AgentVersion.objects.create(agent=agent, number=2, note="Shorter answers")
    offline = JudgeConfig.objects.create(dataset=dataset, number=1, fingerprint="a" * 64)
    model = JudgeConfig.objects.create(
        dataset=dataset, number=2, fingerprint="b" * 64, judge_model="openai/gpt-4o-mini"
    )
    for version, config, outcome in ((v1, offline, (3, 2)), (v2, offline, (4, 1)), (v2, model, (2, 3))):
        run = build_run(agent=agent, dataset=dataset, version=version, cases=_outcomes(*outcome))
        Run.objects.filter(pk=run.pk).update(judge_config=config)
    build_run(agent=agent, dataset=dataset, version=v2, cases=_outcomes(1, 0), status=Run.Status.STOPPED)
    page.set_viewport_size(viewport)

    login(page, alice, f"/agents/{agent.pk}/runs/history/")

    expect(page.locator(".history-legend")).to_contain_text("judge v1: offline reference scorer")
    expect(page.locator(".history-legend")).to_contain_text("judge v2: gpt-4o-mini")
    expect(page.locator(".history-left-out")).to_contain_text("stopped before its last case")
    assert page.locator("g.history-series").count() == 2
    assert not page.evaluate(WIDE)
    page.screenshot(path=SHOTS / f"h7-history-{viewport['width']}.png", full_page=True)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_the_estimate_states_its_basis(page, login, live_server, alice, team, fake_llm, settings, viewport):
    settings.EVALSITE_LLM_MODEL = settings.EVALSITE_JUDGE_MODEL = "openai/gpt-4o-mini"
    agent = AgentFactory(team=team, name="Support bot", kind=Agent.Kind.LLM)
    dataset = DatasetFactory(agent=agent, name="Refund policy")
    for n in range(5):
        TestCaseFactory(dataset=dataset, position=n)
    page.set_viewport_size(viewport)

    # The start dialog as a page (no worker runs here, so the dataset page's button is disabled).
    login(page, alice, reverse("runs:start_dialog", args=[agent.pk, dataset.pk]))

    estimate = page.locator(".estimate")
    expect(estimate).to_contain_text("No earlier run scored by judge v1")
    expect(estimate).to_contain_text("Up to 2 per result near the line")
    assert not page.evaluate(WIDE)
    page.screenshot(path=SHOTS / f"h7-estimate-{viewport['width']}.png", full_page=True)

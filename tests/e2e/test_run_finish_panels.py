"""The run page in Chromium when its run finishes under it (issue 34, item 5): the Human review
panel reloads with the final counts, an open "Stop this run?" dialog closes, and the "Cards
appear in case order" spinner goes, without a reload. The run is built in the database and
finished by the test, as a worker would, so no worker is needed."""

import pytest
from playwright.sync_api import expect

from runs.models import Result, Run
from tests.e2e.conftest import DESKTOP
from tests.factories import AgentFactory
from tests.runs.review_helpers import CaseSpec, build_run, finish_case

pytestmark = pytest.mark.e2e


def test_the_panels_follow_the_run_when_it_finishes(page, login, live_server, alice, team, no_llm):
    agent = AgentFactory(team=team, name="Support bot")
    cases = [CaseSpec(repeats=[("pass", 9.0)])] + [CaseSpec(repeats=[("pending", None)])] * 2
    run = build_run(agent=agent, cases=cases, status=Run.Status.RUNNING)
    page.set_viewport_size(DESKTOP)
    login(page, alice, f"/agents/{agent.pk}/runs/{run.pk}/?tab=review")
    expect(page.locator("#review-figures")).to_contain_text("Judge 1/1 passed")
    expect(page.locator("#results-live-note")).to_be_visible()
    page.locator("#run-stop-button").click()
    expect(page.locator("#stop-dialog")).to_be_visible()

    finish_case(run, 1, Result.Status.PASS, 9.0)
    finish_case(run, 2, Result.Status.FAIL, 3.0)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED, summary_note="No summary.")

    expect(page.locator("#stop-dialog")).to_be_hidden(timeout=10_000)
    expect(page.locator("#review-figures")).to_contain_text("Judge 2/3 passed")
    expect(page.locator("#results-live-note")).to_have_count(0)
    expect(page.locator(".run-stat").first).to_contain_text("2")

"""The run page at 1280 and 390 px when a model's summary contradicts the run and a retrieval-context
check failed without changing the verdict: the summary is flagged and labelled as a model's prose,
the card's check says it left the verdict alone, and the page counts it."""

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from runs.judging.scoring import context_row
from runs.models import Result, Run
from tests.e2e.conftest import DESKTOP, PHONE
from tests.factories import DatasetFactory
from tests.runs.review_helpers import CaseSpec, build_run

pytestmark = pytest.mark.e2e
SHOTS = Path(os.environ.get("EVALSITE_SHOTS", "/tmp/evalsite-shots"))
PASSAGE = "Refunds: a new subscription can be refunded in full within 30 days of the first payment."


@pytest.fixture
def checked_run(transactional_db, agent):
    dataset = DatasetFactory(agent=agent, name="Refund policy")
    run = build_run(
        agent=agent,
        dataset=dataset,
        scorer=Run.Scorer.LLM,
        judge_model="gpt-4o-mini",
        cases=[
            CaseSpec(question="Can I get my money back after 3 weeks?", repeats=[("pass", 9.0)]),
            CaseSpec(question="Do refunds cover shipping?", repeats=[("fail", 3.0)]),
        ],
    )
    row = context_row(["Shipping to Mars takes 9 months."], [PASSAGE]).as_dict()
    Result.objects.filter(run=run, case__position=0).update(scorers=[row])
    Run.objects.filter(pk=run.pk).update(
        summary="10 of 10 cases passed with an average of 9.9; no failures.",
        summary_model="openai/gpt-4o-mini",
        summary_disagreements=[
            "The summary says 10 of 10 passed; the run has 1 of 2 passed.",
            "The summary says there were no failures; the run has 1 failed.",
        ],
        ungated_checks_failed=1,
    )
    return run


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_contradicting_summary_and_an_unheeded_check_are_said_on_the_page(
    page, login, live_server, alice, checked_run, viewport
):
    name = "1280" if viewport == DESKTOP else "390"
    page.set_viewport_size(viewport)
    login(page, alice, f"/agents/{checked_run.agent_id}/runs/{checked_run.pk}/")

    flag = page.locator(".summary-flag")
    expect(flag).to_contain_text("This summary disagrees with the run's own figures.")
    expect(flag).to_contain_text("the run has 1 of 2 passed")
    expect(page.locator(".summary-author")).to_contain_text("Written by a model (openai/gpt-4o-mini)")
    expect(page.locator(".ungated-checks")).to_contain_text("did not change the verdict")
    if SHOTS.is_dir():
        page.locator(".run-summary").screenshot(path=str(SHOTS / f"lead-summary-flag-{name}.png"))
    card = page.locator("#case-0")
    if card.locator("details.result-details").get_attribute("open") is None:
        card.locator("summary.result-head").click()
    expect(card.locator(".scorer-ungated")).to_have_text("no match · verdict unchanged")
    expect(card).to_contain_text("0 of 1 expected passage(s) found")
    if SHOTS.is_dir():
        card.screenshot(path=str(SHOTS / f"lead-ungated-check-{name}.png"))
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

"""The run page's trust marks in a real browser, at 1280 and 390 px: the cases that need a judge
model (a neutral badge, a tile and a note that says how to score them), an answer cut at its token
limit, an unusable judge answer with its reason, and a judge that failed preflight."""

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from runs.models import Run
from tests.e2e.conftest import DESKTOP, PHONE
from tests.factories import DatasetFactory
from tests.runs.review_helpers import CaseSpec, build_run

pytestmark = pytest.mark.e2e
SHOTS = Path(os.environ.get("EVALSITE_SHOTS", "/tmp/evalsite-shots"))
PLAN = (
    "Agent explains monthly plans are refundable within 14 days, so the customer is eligible; "
    "directs them to Billing > Refund"
)


@pytest.fixture
def trust_run(transactional_db, agent):
    dataset = DatasetFactory(agent=agent, name="Refund UAT plan")
    cut = [{"call": "agent", "limit": 256}]
    run = build_run(
        agent=agent,
        dataset=dataset,
        scorer=Run.Scorer.LLM,
        judge_model="local",
        judge_failed_preflight=True,
        cases=[
            CaseSpec(
                question="How long do I have to get a refund on a monthly plan?",
                expected=PLAN,
                repeats=[("abstained", None)],
                answer="Monthly plans can be refunded within 14 days: open Billing > Refund.",
            ),
            CaseSpec(
                question="Can I get a refund after 40 days?",
                expected="Agent politely declines: the 30-day window has passed.",
                repeats=[("abstained", None)],
                answer="Sorry, refunds are only possible within 30 days of payment.",
            ),
            CaseSpec(
                question="What does the Team plan cost?",
                expected="The Team plan costs $79 per month; annual billing saves 20%.",
                repeats=[("fail", 4.0)],
                answer="The Team plan costs $79 per month. If you pay for a whole year instead of monthly, the",
                cut=cut,
            ),
            CaseSpec(
                question="Is there a free trial?",
                expected="Yes: a 14-day free trial of the Team plan, and no credit card is required.",
                repeats=[("error", None)],
                answer="Yes, there is a 14-day free trial of the Team plan and no credit card is required.",
                error_kind="judge_unusable",
                error="The judge's reasoning is the schema's placeholder text "
                "(“<2-4 short sentences: what was right, what was missing or wrong>”), not a judgement.",
            ),
            CaseSpec(question="When is support available?", expected="Monday to Friday, 08:00 to 20:00 CET."),
        ],
    )
    run.results.filter(case__position=2).update(
        reasoning="The answer gives the $79 monthly price but stops mid-sentence before the 20% annual saving."
    )
    return run


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_run_page_names_what_its_figures_leave_out(page, login, live_server, alice, trust_run, viewport):
    name = "1280" if viewport == DESKTOP else "390"
    page.set_viewport_size(viewport)
    login(page, alice, f"/agents/{trust_run.agent_id}/runs/{trust_run.pk}/")

    expect(page.get_by_text("The judge failed preflight: its scores are not trustworthy.")).to_be_visible()
    expect(page.locator(".run-stat-abstained dd")).to_have_text("2")
    expect(page.locator(".trust-abstained")).to_contain_text("EVALSITE_JUDGE_MODEL")
    expect(page.locator(".trust-cut")).to_contain_text("1 agent answer was cut at 256 tokens")
    expect(page.locator(".trust-unusable")).to_contain_text("1 judge answer unusable")
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    page.screenshot(path=str(SHOTS / f"h1-run-summary-{name}.png"), full_page=False)

    for position in (0, 2, 3):  # the first failing card is open already
        if page.locator(f"#case-{position} details").get_attribute("open") is None:
            page.locator(f"#case-{position} summary").click()
    expect(page.locator("#case-0 .badge-abstained").first).to_have_text("Needs a judge model")
    expect(page.locator("#case-2 .result-cut")).to_be_visible()
    expect(page.locator("#case-3 .result-unusable")).to_contain_text("placeholder text")
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    page.locator(".run-summary").screenshot(path=str(SHOTS / f"h1-run-notes-{name}.png"))
    page.locator("#results").screenshot(path=str(SHOTS / f"h1-run-cards-{name}.png"))

"""Keyboard-first review in Chromium, at 1280 and 390 px: j / k move between result cards
(opening them), a agrees with the judge, o opens the override form, the focus is visible,
the run's review figures follow, and the queue and agreement pages fit a phone.
Screenshots go to /work/shots/d18-review/ for a person to look at."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from reviews.models import Review
from runs.models import Result
from tests.e2e.conftest import DESKTOP, PHONE
from tests.factories import DatasetFactory, TestCaseFactory
from tests.runs.review_helpers import CaseSpec, build_run

pytestmark = pytest.mark.e2e

SHOTS = Path("/work/shots/d18-review")
OUTCOMES = [("pass", 9.0), ("pass", 7.5), ("fail", 3.0), ("pass", 10.0), ("fail", 6.5), ("pass", 9.0)]


@pytest.fixture
def run(agent):
    dataset = DatasetFactory(agent=agent, name="Support policy")
    specs = []
    for index, outcome in enumerate(OUTCOMES):
        case = TestCaseFactory(dataset=dataset, position=index, question=f"Question {index + 1}: the refund window?")
        specs.append(
            CaseSpec(
                question=case.question,
                expected=case.expected_answer,
                repeats=[outcome],
                answer="Refunds are possible within 30 days of the purchase date, for every plan.",
                tags=["refunds"] if index % 2 else ["billing"],
                source_case_id=case.pk,
            )
        )
    return build_run(agent=agent, dataset=dataset, cases=specs)


def _no_sideways_scroll(page: Page, width: int) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= width


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_a_reviewer_goes_through_the_cards_with_the_keyboard(page, login, live_server, alice, run, no_llm, viewport):
    SHOTS.mkdir(parents=True, exist_ok=True)
    width = viewport["width"]
    page.set_viewport_size(viewport)
    # The review tab: its figures above the cards the keys work on.
    url = f"{live_server.url}/agents/{run.agent_id}/runs/{run.pk}/?tab=review"
    login(page, alice, next_url=url)
    page.wait_for_url(url)
    cards = page.locator("#result-cards > li.result-card")
    expect(cards).to_have_count(6)
    expect(page.locator("#review-figures")).to_contain_text("0 reviewed")

    page.keyboard.press("j")
    expect(cards.nth(0)).to_have_class("result-card is-pass is-review-focus")
    expect(cards.nth(0).locator("details.result-details")).to_have_attribute("open", "")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline == "solid"  # the focus is visible

    page.keyboard.press("a")  # agree, and on to the next card
    expect(cards.nth(0).locator("[data-review-control]")).to_contain_text("alice agrees")
    expect(cards.nth(1)).to_have_class("result-card is-pass is-review-focus")
    # The card the keys opened before is closed again.
    expect(cards.nth(0).locator("details.result-details")).not_to_have_attribute("open", "")

    page.keyboard.press("o")
    override = cards.nth(1).locator("form[data-review-override]")
    expect(override).to_be_visible()
    expect(cards.nth(1).locator("[data-review-toggle][aria-expanded=true]")).to_have_count(1)
    expect(override.locator("input[value=pass]")).to_be_focused()
    page.keyboard.press("ArrowRight")  # the radio group: Fail
    expect(override.locator("input[value=fail]")).to_be_checked()
    page.keyboard.press("Tab")
    page.keyboard.type("4")
    page.keyboard.press("Tab")
    page.keyboard.type("Misses the 14-day rule for annual plans.")
    page.screenshot(path=SHOTS / f"card-override-{width}.png")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    control = cards.nth(1).locator("[data-review-control]")
    expect(control).to_contain_text("Misses the 14-day rule")
    expect(control).to_contain_text("Your override")
    expect(page.locator("#review-figures")).to_contain_text("2 reviewed")
    expect(page.locator("#review-figures")).to_contain_text("Reviewed 3/6 passed")
    expect(page.locator("#review-figures")).to_contain_text("Judge 4/6 passed")

    # The other cards' forms are folded behind their buttons.
    expect(cards.nth(2).locator("form[data-review-override]")).to_be_hidden()
    page.keyboard.press("Escape")
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("k")
    expect(cards.nth(5)).to_have_class("result-card is-pass is-review-focus")  # from nothing, k starts at the end

    reviews = {r.result.case.position: r for r in Review.objects.select_related("result__case")}
    assert reviews[0].agrees and reviews[0].passed
    assert (reviews[1].agrees, reviews[1].passed, reviews[1].score) == (False, False, 4.0)
    assert Result.objects.get(pk=reviews[1].result_id).status == "pass"  # the judge's verdict is kept
    _no_sideways_scroll(page, width)
    cards.nth(1).scroll_into_view_if_needed()
    page.screenshot(path=SHOTS / f"run-page-reviewed-{width}.png", full_page=True)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_the_queue_and_the_agreement_pages_at_phone_and_desktop_width(
    page, login, live_server, alice, bob, run, no_llm, viewport
):
    SHOTS.mkdir(parents=True, exist_ok=True)
    width = viewport["width"]
    results = list(Result.objects.filter(run=run).order_by("case__position"))
    Review.objects.create(result=results[0], reviewer=bob, agrees=True, passed=True)
    Review.objects.create(result=results[3], reviewer=bob, agrees=False, passed=False, score=2, note="Invents a fee.")
    Review.objects.create(result=results[2], reviewer=bob, agrees=False, passed=True, score=8)
    page.set_viewport_size(viewport)
    queue_url = f"{live_server.url}/agents/{run.agent_id}/runs/{run.pk}/review/"
    login(page, alice, next_url=queue_url)
    page.wait_for_url(queue_url)
    items = page.locator("[data-review-item]")
    expect(items.first).to_contain_text("Within 1 point of the pass line")
    page.screenshot(path=SHOTS / f"queue-{width}.png", full_page=True)
    _no_sideways_scroll(page, width)

    page.get_by_role("link", name="Start with the first").click()
    expect(items.first).to_be_focused()
    count = items.count()
    page.keyboard.press("a")
    expect(items.first.locator("[data-review-control]")).to_contain_text("alice agrees")
    expect(items.nth(1)).to_be_focused()
    page.reload()
    expect(items).to_have_count(count - 1)  # "next": the reviewed one has left the queue

    page.goto(f"{live_server.url}/agents/{run.agent_id}/review/agreement/")
    expect(page.locator(".review-group")).to_contain_text("Disagreements (2)")
    expect(page.locator(".review-confusion")).to_be_visible()
    page.screenshot(path=SHOTS / f"agreement-{width}.png", full_page=True)
    _no_sideways_scroll(page, width)

    page.goto(f"{live_server.url}/agents/{run.agent_id}/")
    expect(page.locator(".review-panel")).to_contain_text("Judge agreement")
    page.locator(".review-panel").screenshot(path=SHOTS / f"agent-panel-{width}.png")

"""The run page for reviewing, in Chromium at 1280 and 390 px: cards collapsed to one line,
Expand all and the filters (Not run included) kept in the address, the compare page, and on
a phone a compact header, tabs on one scrolling line and a no-model banner that can be hidden
for good. Screenshots go to /tmp/shots-i14a/ for a person to look at."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from agents.models import Agent
from runs.models import Result, Run
from tests.e2e.conftest import DESKTOP, PHONE
from tests.factories import AgentFactory, DatasetFactory
from tests.runs.review_helpers import CaseSpec, build_run

pytestmark = pytest.mark.e2e

SHOTS = Path("/tmp/shots-i14a")
QUESTIONS = [
    "How long is the refund window for annual plans?",
    "What is the support phone number for Enterprise customers?",
    "What credit do Enterprise customers get when uptime falls below 99.95%?",
    "Is there a discount for registered non-profit organisations?",
    "Which plans include single sign-on (SSO) and SCIM provisioning?",
    "How do I export my data before closing the account?",
    "Can I change the billing currency after the first invoice?",
    "What happens to my data 30 days after cancellation?",
    "Does the Starter plan include phone support on weekends?",
    "How many seats does the Team plan include before per-seat pricing starts?",
]
TRAJECTORY = [
    {
        "name": "trajectory",
        "label": "Trajectory (strict)",
        "score": 0.0,
        "passed": False,
        "detail": "Expected lookup_order then issue_refund, in this order; the agent called issue_refund(amount=79).",
    }
]


@pytest.fixture
def runs(team):
    agent = AgentFactory(team=team, name="Acme Cloud Support", kind=Agent.Kind.KNOWLEDGE)
    dataset = DatasetFactory(agent=agent, name="Support policy smoke test")
    outcomes = [("pass", 9.0), ("fail", 2.0), ("fail", 3.0), ("fail", 10.0), ("pass", 8.0), ("error", None)]
    outcomes += [("pass", 9.0), ("pass", 10.0), ("skipped", None), ("skipped", None)]
    cases = [
        CaseSpec(question=question, repeats=[outcome], answer="Answer " * 30, tags=["policy"] if n % 3 == 0 else [])
        for n, (question, outcome) in enumerate(zip(QUESTIONS, outcomes, strict=True))
    ]
    before = build_run(agent=agent, dataset=dataset, cases=[CaseSpec(question=q) for q in QUESTIONS])
    run = build_run(agent=agent, dataset=dataset, cases=cases, status=Run.Status.STOPPED)
    Result.objects.filter(run=run, case__position=3).update(scorers=TRAJECTORY, verdict="All key points")
    return before, run


def _open_run(page: Page, login, live_server, alice, run: Run, viewport: dict) -> str:
    page.set_viewport_size(viewport)
    url = f"{live_server.url}/agents/{run.agent_id}/runs/{run.pk}/"
    login(page, alice, next_url=url)
    page.wait_for_url(url)
    return url


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_cards_are_one_line_with_expand_all_and_filters_kept_in_the_address(
    page, login, live_server, alice, runs, no_llm, viewport
):
    before, run = runs
    width = viewport["width"]
    url = _open_run(page, login, live_server, alice, run, viewport)
    cards = page.locator("#result-cards > li.result-card")
    expect(cards).to_have_count(10)
    # Only the first failing card is open on load.
    expect(page.locator("details.result-details[open]")).to_have_count(1)
    first_failing = page.locator("#result-cards > li.is-fail, #result-cards > li.is-error").first
    expect(first_failing.locator("details")).to_have_attribute("open", "")
    page.screenshot(path=SHOTS / f"run-collapsed-{width}.png", full_page=True)
    # One line per closed card on a desktop; on a phone the question takes a second line.
    heights = [card.locator("summary").bounding_box()["height"] for card in cards.all()]
    tallest = max(heights)
    assert tallest < (60 if width == 1280 else 95), tallest
    failed = cards.nth(3).locator("summary")
    expect(failed.locator(".badge-fail")).to_have_text("Fail")
    expect(failed.locator(".badge-check")).to_contain_text(
        "Trajectory (strict) check failed" if width == 1280 else "Trajectory"
    )

    closed = cards.nth(0)  # a passing card, closed on load
    closed.locator("summary").click()
    expect(closed.locator("details")).to_have_attribute("open", "")
    expect(closed.get_by_text("Expected answer")).to_be_visible()

    page.get_by_role("link", name="Expand all").click()
    page.wait_for_url("**?expand=1")
    expect(page.locator("details.result-details[open]")).to_have_count(10)
    page.screenshot(path=SHOTS / f"run-expanded-{width}.png", full_page=True)
    # A scorer's name is one word a line: "ROUGE-L" is not broken at its hyphen on a phone.
    rouge = cards.nth(0).locator(".scorer-table th", has_text="ROUGE-L")
    lines = rouge.evaluate(
        "th => { const r = document.createRange(); r.selectNodeContents(th); return r.getClientRects().length; }"
    )
    assert lines == 1, lines
    rouge.locator("xpath=ancestor::table").screenshot(path=SHOTS / f"run-scorers-{width}.png")

    page.locator("#result-filters").get_by_role("link", name="Not run").click()
    page.wait_for_url("**?filter=not_run&expand=1")
    expect(cards).to_have_count(2)
    page.locator("#results").screenshot(path=SHOTS / f"run-filter-not-run-{width}.png")

    page.reload()
    expect(page.locator("#result-filters [aria-current=true]")).to_contain_text("Not run")
    expect(page.locator("details.result-details[open]")).to_have_count(2)
    page.get_by_role("link", name="Collapse all").click()
    page.wait_for_url("**?filter=not_run")
    expect(page.locator("details.result-details[open]")).to_have_count(0)

    # A link to one case opens its card.
    page.goto(f"{url}#case-3")
    expect(cards.nth(3).locator("details")).to_have_attribute("open", "")
    expect(cards.nth(3).locator(".result-check")).to_contain_text("although the answer scored 10/10")

    page.goto(f"{live_server.url}/agents/{run.agent_id}/runs/compare/?a={before.pk}&b={run.pk}")
    expect(page.locator(".compare-stopped")).to_contain_text(
        f"Run #{run.pk} was stopped: 2 of its 10 cases were not run."
    )
    page.screenshot(path=SHOTS / f"compare-{width}.png", full_page=True)
    # The question shows once: in its column on a desktop, under the case number on a phone.
    first = page.locator(".compare-table tbody tr").first
    expect(first.locator(".compare-q-phone")).to_be_visible(visible=width != 1280)


def test_on_a_phone_the_run_status_is_above_the_fold_and_the_banner_can_be_hidden(
    page, login, live_server, alice, bob, runs, no_llm
):
    _, run = runs
    url = _open_run(page, login, live_server, alice, run, PHONE)
    banner = page.locator("#no-model-banner")
    expect(banner).to_be_visible()
    page.screenshot(path=SHOTS / "run-phone-top-390.png")

    status = page.locator("#run-live .run-status-row").bounding_box()
    assert status["y"] + status["height"] <= PHONE["height"], status

    tabs = page.locator("nav.tabs:not(.run-tabs) a")  # the agent's tabs
    tops = {round(tabs.nth(n).bounding_box()["y"]) for n in range(tabs.count())}
    assert len(tops) == 1, tops  # one line, scrolling sideways
    current = page.locator("nav.tabs:not(.run-tabs) [aria-current=page]").bounding_box()
    assert current["x"] >= 0 and current["x"] + current["width"] <= PHONE["width"], current
    # Configuration is scrolled out on the left: that edge fades, so the user knows to swipe.
    expect(page.locator("nav.tabs:not(.run-tabs)")).to_have_class(re.compile(r"\btabs-more-left\b"))

    banner.get_by_role("button", name="Hide this notice").click()
    expect(banner).to_have_count(0)
    page.reload()
    expect(page.locator("#no-model-banner")).to_have_count(0)
    page.screenshot(path=SHOTS / "run-phone-no-banner-390.png")
    context = page.context.browser.new_context(viewport=PHONE)
    other = context.new_page()
    login(other, bob, next_url=url)
    expect(other.locator("#no-model-banner")).to_be_visible()  # hidden for alice only
    context.close()

"""The rule coverage page in a real browser, at desktop and phone widths: untested rules first,
chips on the dataset's cases leading to their rule."""

import os

import pytest
from playwright.sync_api import expect

from runs.models import Result, Run, RunCase
from tests.e2e.conftest import DESKTOP, PHONE
from tests.factories import AgentFactory, DatasetFactory, TestCaseFactory

pytestmark = pytest.mark.e2e
SHOTS = os.environ.get("EVALSITE_SCREENSHOTS", "")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_coverage_page_and_rule_chips(page, login, live_server, transactional_db, team, alice, no_llm, viewport):
    agent = AgentFactory(
        team=team,
        name="Billing bot",
        version__instructions="You are the billing assistant of Acme Cloud.\n- Quote prices in euros.",
        version__guardrails="Never reveal another customer's invoice.",
        version__knowledge="Refunds are possible within 30 days of purchase.",
    )
    dataset = DatasetFactory(agent=agent, name="Billing questions")
    case = TestCaseFactory(dataset=dataset, question="Can I get refunds 20 days after purchase?", expected_answer="")
    run = Run.objects.create(
        agent=agent, agent_version=agent.current_version, dataset=dataset, dataset_name=dataset.name,
        status=Run.Status.COMPLETED,
    )  # fmt: skip
    run_case = RunCase.objects.create(run=run, position=0, source_case=case, question=case.question)
    Result.objects.create(run=run, case=run_case, status=Result.Status.PASS, score=9)
    page.set_viewport_size(viewport)

    login(page, alice, f"/agents/{agent.pk}/datasets/{dataset.pk}/")
    chip = page.locator(f"#case-{case.pk} .chip-rule")
    expect(chip).to_have_count(1)
    chip.click()

    expect(page.get_by_role("heading", name="Rule coverage")).to_be_visible()
    expect(page.get_by_role("heading", name="3 rules no case tests")).to_be_visible()
    rows = page.locator(".rule-row")
    expect(rows).to_have_count(4)
    expect(rows.last).to_contain_text("Refunds are possible within 30 days")
    expect(rows.last.locator(".rule-counts .badge-pass")).to_have_text("1 passed")
    expect(rows.first.get_by_text("No test case")).to_be_visible()
    if SHOTS:
        page.screenshot(path=os.path.join(SHOTS, f"coverage-{viewport['width']}.png"), full_page=True)


def test_rule_chips_on_the_dataset_page_are_styled_apart(
    page, login, live_server, transactional_db, team, alice, no_llm
):
    # The chips' rules lived in coverage.css, which only the coverage page loads: on the dataset
    # page two chips touched, with no gap between them, and read as one.
    agent = AgentFactory(
        team=team,
        version__instructions="You are the billing assistant of Acme Cloud.\n- Quote prices in euros.",
        version__knowledge="Refunds are possible within 30 days of purchase.",
    )
    dataset = DatasetFactory(agent=agent)
    case = TestCaseFactory(
        dataset=dataset, question="Quote me the prices in euros: can I get refunds 20 days after purchase?"
    )
    page.set_viewport_size(DESKTOP)

    login(page, alice, f"/agents/{agent.pk}/datasets/{dataset.pk}/")
    chips = page.locator(f"#case-{case.pk} .chip-rule")
    expect(chips).to_have_count(2)
    first, second = chips.nth(0).bounding_box(), chips.nth(1).bounding_box()
    assert first and second
    assert second["x"] - (first["x"] + first["width"]) >= 2, (first, second)
    background = chips.nth(0).evaluate("chip => getComputedStyle(chip).backgroundColor")
    assert background not in ("rgba(0, 0, 0, 0)", "transparent"), background

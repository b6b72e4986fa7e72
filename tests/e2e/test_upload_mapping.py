"""The mapping step in a real browser: a test plan whose Scenario column stands left of
Question, a glossary sheet skipped with its reason, a changed field, then the cases
with their warnings and metadata. Screenshots at 1280 and 390 px go to /tmp/shots-i13b/."""

from pathlib import Path

import pytest
from playwright.sync_api import expect

from datasets.extraction.services import dataset_extract
from datasets.models import Dataset
from tests.datasets import files
from tests.datasets.extraction_helpers import extract, media_root  # noqa: F401
from tests.e2e.conftest import DESKTOP, PHONE

pytestmark = pytest.mark.e2e
SHOTS = Path("/tmp/shots-i13b")


def _workbook() -> bytes:
    return files.xlsx_bytes(
        {
            "Test plan": [
                ["Acme support bot: regression plan"],
                [],
                ["ID", "Scenario", "Priority", "Question", "Expected", "Notes"],
                [
                    "TC-1",
                    "Refunds",
                    "High",
                    "Can I get a refund 40 days after purchase?",
                    "No, only within 30 days.",
                    "policy 2",
                ],
                ["TC-2", "Refunds", "Low", "How do I ask for a refund?", "", ""],
                ["TC-3", "Support hours", "High", "When is phone support open?", "Weekdays 9-17 CET.", "holidays?"],
            ],
            "Glossary": [["Term", "Definition"], ["SLA", "Service level agreement"]],
        }
    )


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_mapping_step_from_suggestion_to_cases_with_warnings(
    page, login, live_server, transactional_db, alice, agent, no_llm, viewport
):
    SHOTS.mkdir(exist_ok=True)
    width = viewport["width"]
    dataset = extract(agent, "plan.xlsx", _workbook(), confirm=False)
    assert dataset.status == Dataset.Status.REVIEW
    page.set_viewport_size(viewport)
    login(page, alice, f"/agents/{agent.pk}/datasets/{dataset.pk}/mapping/")

    expect(page.get_by_role("heading", name="Map the columns")).to_be_visible()
    question = page.get_by_label("D Question")
    expect(question).to_have_value("question")
    expect(page.get_by_label("B Scenario")).to_have_value("metadata")
    expect(page.get_by_text("It looks like a glossary sheet")).to_be_visible()
    page.screenshot(path=str(SHOTS / f"mapping-{width}.png"), full_page=True)

    page.get_by_label("C Priority").select_option("tags")
    page.get_by_role("button", name="Create the test cases").click()
    page.wait_for_url(f"**/datasets/{dataset.pk}/")
    dataset_extract(dataset_id=dataset.pk)  # the job the confirmation sent, run here
    page.reload()

    expect(page.locator(".dataset-meta").get_by_text("Ready with warnings")).to_be_visible()
    expect(page.get_by_text("No expected answer").first).to_be_visible()
    expect(page.locator(".case-metadata").first).to_contain_text("Scenario")
    expect(page.get_by_text("#High").first).to_be_visible()
    page.screenshot(path=str(SHOTS / f"warnings-{width}.png"), full_page=True)
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0

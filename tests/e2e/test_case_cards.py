"""Case cards and the source preview in a real browser, at 1280 and 390 px: contexts and
guideline on the card, search terms marked, the preview scrolled to the case's row."""

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.datasets.extraction_helpers import extract, media_root  # noqa: F401 - fixture
from tests.datasets.files import xlsx_bytes
from tests.e2e.conftest import DESKTOP, PHONE
from tests.factories import AgentFactory

pytestmark = pytest.mark.e2e
SHOTS = Path("/tmp/shots-i13a")


@pytest.fixture
def extracted(transactional_db, team, no_llm):
    agent = AgentFactory(team=team, name="Support bot")
    rows = [["ID", "Question", "Expected answer", "Context", "Guideline"]]
    rows += [
        [f"R-{n}", f"Question {n}: what is the status of order {n}?", f"Order {n} is paid.", "", ""]
        for n in range(1, 60)
    ]
    rows.append(
        [
            "R-60",
            "Can I get a <b>refund</b> after 40 days?",
            "No. Refunds are available within 30 days of purchase.",
            "Refund policy, section 2: refunds within 30 days of purchase; after that only store credit.",
            "Must say no and name the 30-day window.",
        ]
    )
    dataset = extract(agent, "Refund plan.xlsx", xlsx_bytes({"Plan": rows}))
    assert dataset.status == "ready", dataset.failure_reason
    case = dataset.cases.get(case_id="R-60")
    case.expected_context = ["Refunds are available within 30 days of purchase.", "Store credit after 30 days."]
    case.save(update_fields=["expected_context"])
    return dataset


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_search_marks_why_a_case_matched_and_its_source_opens_at_its_row(
    page, login, live_server, alice, extracted, viewport
):
    SHOTS.mkdir(exist_ok=True)
    name = "desktop" if viewport == DESKTOP else "phone"
    dataset = extracted
    page.set_viewport_size(viewport)
    login(page, alice, f"/agents/{dataset.agent_id}/datasets/{dataset.pk}/")

    page.locator("#case-search").fill("refund")
    card = page.locator(".case-item").filter(has_text="R-60")
    expect(page.locator(".case-item")).to_have_count(1)
    expect(card.locator("mark").first).to_have_text("refund")
    expect(card.get_by_text("Document context")).to_be_visible()
    expect(card.get_by_text("Retrieval context")).to_be_visible()
    expect(card.get_by_text("Judge guideline")).to_be_visible()
    # The cell's markup is shown as text, with the search term marked inside it.
    expect(card.locator(".case-question")).to_contain_text("Can I get a <b>refund</b> after 40 days?")
    expect(card.locator("b")).to_have_count(0)
    card.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / f"case-card-search-{name}.png"), full_page=name == "phone")

    card.locator(".case-source-link").click()
    dialog = page.locator("dialog.document-dialog")
    expect(dialog).to_be_visible()
    row = dialog.locator("tr.is-source")
    expect(row).to_have_count(1)
    expect(row).to_be_in_viewport()
    # The question and expected-answer cells of the row are marked.
    expect(row.locator("td.is-source-cell")).to_have_count(2)
    expect(row.locator("td.is-source-cell").first).to_have_text("Can I get a <b>refund</b> after 40 days?")
    page.screenshot(path=str(SHOTS / f"preview-row-{name}.png"), full_page=False)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_dataset_list_and_the_wizard_choice(page, login, live_server, alice, extracted, viewport):
    name = "desktop" if viewport == DESKTOP else "phone"
    page.set_viewport_size(viewport)
    login(page, alice, f"/agents/{extracted.agent_id}/datasets/")
    expect(page.locator("time").first).to_contain_text(":")
    page.screenshot(path=str(SHOTS / f"dataset-list-{name}.png"), full_page=False)

    page.goto(f"{live_server.url}/agents/{extracted.agent_id}/datasets/new/")
    page.locator("input[type=file]").set_input_files(
        files=[{"name": "plan.csv", "mimeType": "text/csv", "buffer": b"Question,Answer\nHi?,Hello\n"}]
    )
    page.get_by_role("button", name="Continue →").click()
    checkbox = page.get_by_label("Let the agent read the uploaded document")
    expect(checkbox).to_be_visible()
    expect(checkbox).not_to_be_checked()
    page.screenshot(path=str(SHOTS / f"wizard-review-{name}.png"), full_page=True)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_pdf_source_opens_at_its_page_with_the_evidence_marked(
    page, login, live_server, alice, team, no_llm, viewport
):
    from tests.datasets.files import pdf_bytes

    name = "desktop" if viewport == DESKTOP else "phone"
    agent = AgentFactory(team=team, name="PDF bot")
    pages = [
        ["Support test plan"],
        [
            "TC-1: Weekend support",
            "Question: Is support open on Sunday, or only on",
            "weekdays?",
            "Expected answer: Weekdays 9-17 CET only.",
            "TC-2: Phone",
            "Question: Is there phone support?",
            "Expected answer: Yes, for Enterprise.",
        ],
    ]
    dataset = extract(agent, "plan.pdf", pdf_bytes(pages))
    page.set_viewport_size(viewport)
    login(page, alice, f"/agents/{agent.pk}/datasets/{dataset.pk}/")

    card = page.locator(".case-item").filter(has_text="TC-1")
    expect(card.locator(".case-question")).to_have_text("Question: Is support open on Sunday, or only on weekdays?")
    card.locator(".case-source-link").click()
    dialog = page.locator("dialog.document-dialog")
    expect(dialog.locator(".source-callout")).to_contain_text("This case, page 2")
    expect(dialog.locator("iframe.pdf-frame")).to_have_attribute("src", re.compile(r"#page=2$"))
    dialog.get_by_role("link", name="Page 2 text").click()
    mark = dialog.locator("mark.source-mark")
    expect(mark).to_contain_text("Is support open on Sunday, or only on")
    expect(mark).to_be_in_viewport()
    page.screenshot(path=str(SHOTS / f"preview-pdf-text-{name}.png"), full_page=False)

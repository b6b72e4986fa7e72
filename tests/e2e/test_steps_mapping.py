"""The mapping step of a test plan whose Steps quote the user's message, in a real browser:
the quoted message proposed as the question, Scenario and Test Data joined into the context
with the result shown before anything is created, then the cases. Screenshots at 1280 and
390 px go to $EVALSITE_SHOTS (/tmp/evalsite-shots) when that folder exists."""

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from datasets.extraction.services import dataset_extract
from datasets.models import Dataset
from tests.datasets.extraction_helpers import extract, media_root  # noqa: F401
from tests.datasets.test_steps_question import QUOTED, _plan
from tests.e2e.conftest import DESKTOP, PHONE

pytestmark = pytest.mark.e2e
SHOTS = Path(os.environ.get("EVALSITE_SHOTS", "/tmp/evalsite-shots"))


def _shot(page, name: str) -> None:
    if SHOTS.is_dir():
        page.screenshot(path=str(SHOTS / name), full_page=True)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_steps_give_the_question_and_columns_combine_on_the_mapping_step(
    page, login, live_server, transactional_db, alice, agent, no_llm, viewport
):
    width = viewport["width"]
    dataset = extract(agent, "regression-plan.xlsx", _plan(), confirm=False)
    assert dataset.status == Dataset.Status.REVIEW
    page.set_viewport_size(viewport)
    login(page, alice, f"/agents/{agent.pk}/datasets/{dataset.pk}/mapping/")

    expect(page.get_by_label("D Steps")).to_have_value("quoted_question")
    result = page.locator(".mapping-result")
    expect(result).to_contain_text(QUOTED[0])
    expect(result.get_by_text("Quoted in “Steps”").first).to_be_visible()

    page.get_by_label("C Scenario").select_option("document_context")  # joined with Test Data
    expect(result).to_contain_text("the columns mapped to it are joined")
    expect(result).to_contain_text("Scenario: Refund on an annual plan within the window")
    expect(page.get_by_label("C Scenario")).to_have_value("document_context")
    _shot(page, f"h4-mapping-steps-{width}.png")
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert overflow <= 0

    page.get_by_role("button", name="Create the test cases").click()
    page.wait_for_url(f"**/datasets/{dataset.pk}/")
    dataset_extract(dataset_id=dataset.pk)
    page.reload()
    expect(page.get_by_text(QUOTED[0]).first).to_be_visible()
    expect(page.get_by_text("The question is the message quoted in its “Steps” column").first).to_be_visible()
    _shot(page, f"h4-cases-steps-{width}.png")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_with_a_model_the_steps_that_quote_nothing_get_a_written_question(
    page, login, live_server, transactional_db, alice, agent, fake_llm, viewport
):
    width = viewport["width"]
    fake_llm.add_rule(
        task="extract", contains="Write the message the user sends", json={"message": "How do I get my invoice?"}
    )
    dataset = extract(agent, "regression-plan.xlsx", _plan(), confirm=False)
    page.set_viewport_size(viewport)
    login(page, alice, f"/agents/{agent.pk}/datasets/{dataset.pk}/mapping/")

    option = page.get_by_label("Let the model write the user's message for the 1 row whose steps quote none")
    option.check()
    page.locator(".mapping-derive").scroll_into_view_if_needed()
    _shot(page, f"h4-mapping-model-option-{width}.png")
    page.get_by_role("button", name="Create the test cases").click()
    page.wait_for_url(f"**/datasets/{dataset.pk}/")
    dataset_extract(dataset_id=dataset.pk)
    page.reload()

    expect(page.get_by_text("How do I get my invoice?").first).to_be_visible()
    expect(
        page.get_by_text("The model wrote this question from the “Steps” text, which quotes no message").first
    ).to_be_visible()
    _shot(page, f"h4-cases-model-question-{width}.png")

"""The dataset upload controls in a real browser (issue 14 items 16 and 22).

16: a name the server refuses (duplicate) is shown next to the name, on the same step,
    with the chosen file kept, so fixing the name and pressing Generate again works.
22: the New dataset page uses the same drop zone as the Generate Dataset wizard, with
    errors styled as on the agent form (field turns red, message under it).
"""

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from datasets.models import Dataset
from tests.e2e.conftest import DESKTOP, PHONE
from tests.factories import AgentFactory, DatasetFactory

pytestmark = pytest.mark.e2e

SHOTS = Path("/tmp/shots-i14b")
CSV = b"question,expected_answer\nHow long is the refund window?,30 days.\n"


@pytest.fixture
def agent(transactional_db, team):
    agent = AgentFactory(team=team, name="Support bot")
    DatasetFactory(agent=agent, name="Refunds")
    return agent


def _shot(page, name, viewport):
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}-{viewport['width']}.png"), full_page=True)


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_a_refused_name_keeps_the_step_and_the_file(page, login, live_server, alice, agent, no_llm, viewport, tmp_path):
    upload = tmp_path / "refund_questions.csv"
    upload.write_bytes(CSV)
    page.set_viewport_size(viewport)
    login(page, alice, f"/agents/{agent.pk}/datasets/new/")

    form = page.locator("#upload-form")
    form.locator("input[type=file]").set_input_files(str(upload))
    expect(form.locator("[data-file-label]")).to_contain_text("refund_questions.csv")
    form.get_by_role("button", name="Continue →").click()
    name = form.get_by_label("Dataset name")
    expect(name).to_be_visible()
    name.fill("refunds")  # the agent has a dataset named so already
    form.get_by_role("button", name="Generate").click()

    form = page.locator("#upload-form")
    error = form.locator("#name-errors")
    expect(error).to_be_visible()
    expect(error).to_contain_text("already has a dataset named")
    expect(form.get_by_label("Dataset name")).to_be_visible()
    expect(form.get_by_label("Dataset name")).to_be_focused()
    expect(form.get_by_role("button", name="Generate")).to_be_visible()
    expect(form.locator("[data-step='1']")).to_be_hidden()
    expect(page.locator("[data-step-indicator='2']")).to_have_class("step is-current")
    expect(form.locator("[data-source-name]")).to_have_text("refund_questions.csv")
    assert form.locator("input[type=file]").evaluate("input => input.files.length") == 1
    _shot(page, "wizard-name-error", viewport)

    form.get_by_label("Dataset name").fill("Refund questions")
    form.get_by_role("button", name="Generate").click()
    page.wait_for_url(re.compile(rf"/agents/{agent.pk}/datasets/\d+/$"))
    created = Dataset.objects.get(agent=agent, name="Refund questions")
    assert created.source_name == "refund_questions.csv"


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_the_new_dataset_page_has_the_same_drop_zone(page, login, live_server, alice, agent, viewport, tmp_path):
    # Every supported kind goes through this door (tables to the mapping step): an image does not.
    wrong = tmp_path / "notes.png"
    wrong.write_bytes(b"\x89PNG not a test plan")
    page.set_viewport_size(viewport)
    login(page, alice, f"/agents/{agent.pk}/datasets/create/")

    field = page.locator("[data-file-field]")
    zone = field.locator("label[data-dropzone]")
    expect(zone).to_be_visible()
    expect(zone).to_contain_text("Drop a file here, or browse")
    assert field.locator("input[type=file]").evaluate("input => getComputedStyle(input).opacity") == "0"

    # Chosen in the browser: the kind is checked at once, under the field.
    field.locator("input[type=file]").set_input_files(str(wrong))
    expect(field.locator("[data-file-error]")).to_be_visible()
    expect(field.locator("[data-file-error]")).to_contain_text("notes.png")
    expect(zone).to_have_class("dropzone has-error")

    # Refused by the server: the same red field, the message under it.
    page.get_by_label("Name").fill("From an image")
    page.get_by_role("button", name="Create dataset").click()
    field = page.locator("[data-file-field]")
    expect(field).to_have_class("field file-field has-error")
    expect(field.locator(".errorlist li")).to_contain_text("this one is “.png”")
    _shot(page, "new-dataset-file-error", viewport)
    assert not Dataset.objects.filter(name="From an image").exists()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_import_and_attach_use_the_same_drop_zone(page, login, live_server, alice, agent, viewport, tmp_path):
    from datasets.models import Dataset as DatasetModel
    from tests.factories import TestCaseFactory

    dataset = DatasetModel.objects.get(agent=agent, name="Refunds")
    case = TestCaseFactory(dataset=dataset, question="How long is the refund window?")
    wrong = tmp_path / "cases.xlsx"
    wrong.write_bytes(b"PK not really")
    page.set_viewport_size(viewport)
    login(page, alice, f"/agents/{agent.pk}/datasets/{dataset.pk}/import/csv/")

    field = page.locator("[data-file-field]")
    expect(field.locator("label[data-dropzone]")).to_contain_text("CSV or TSV")
    field.locator("input[type=file]").set_input_files(str(wrong))
    expect(field.locator("[data-file-error]")).to_contain_text("cases.xlsx")
    _shot(page, "import-csv-file-error", viewport)

    page.goto(f"{live_server.url}/agents/{agent.pk}/datasets/{dataset.pk}/cases/{case.pk}/edit/")
    attach = page.locator(".attach-form [data-file-field]")
    expect(attach.locator("label[data-dropzone]")).to_be_visible()
    expect(attach.get_by_text("Attach a document")).to_be_visible()
    _shot(page, "case-edit-attach", viewport)

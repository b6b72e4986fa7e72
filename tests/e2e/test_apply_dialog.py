"""Apply suggestions in a real browser: untick one, edit another, review the diff, apply,
and see the new version and what changed."""

import pytest
from playwright.sync_api import expect

from agents.models import Agent
from runs.models import Result, Run, RunCase
from suggestions.models import Suggestion
from tests.e2e.conftest import DESKTOP, PHONE
from tests.factories import AgentFactory

pytestmark = pytest.mark.e2e


@pytest.fixture
def run_with_suggestions(transactional_db, team, alice):
    agent = AgentFactory(team=team, name="Support bot")
    run = Run.objects.create(
        agent=agent, agent_version=agent.current_version, dataset_name="Support policy", status=Run.Status.COMPLETED,
        total=3, completed=3, passed=1, failed=2, average_score=4.0, scoring={"pass_threshold": 7},
    )  # fmt: skip
    cases = [
        RunCase.objects.create(run=run, position=i, question=f"Question {i}?", expected_answer="…") for i in range(3)
    ]
    for case, status in zip(cases, ["pass", "fail", "fail"], strict=True):
        Result.objects.create(run=run, case=case, status=status, score=9 if status == "pass" else 2)
    facts = ["Phone support: +1 555 0100.", "Non-profits get 50% off.", "SLA credit is 10%."]
    for position, fact in enumerate(facts):
        suggestion = Suggestion.objects.create(
            run=run, position=position, title=f"Add to knowledge: {fact}", category="knowledge",
            description=f"The agent missed: {fact}", proposed_text=fact, offline=True,
        )  # fmt: skip
        suggestion.cases.set([cases[min(position + 1, 2)]])
    return run


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_apply_dialog_from_choice_to_new_version(
    page, login, live_server, alice, run_with_suggestions, no_llm, viewport
):
    run = run_with_suggestions
    agent = run.agent
    page.set_viewport_size(viewport)
    login(page, alice, f"/agents/{agent.pk}/runs/{run.pk}/?tab=suggestions")

    panel = page.locator("#suggestions")
    expect(panel.get_by_role("heading", name="Suggested changes")).to_be_visible()
    expect(panel.locator(".suggestion")).to_have_count(3)
    expect(panel.get_by_text("Offline", exact=True).first).to_be_visible()

    # Step 1: untick the second suggestion, retitle the first.
    panel.get_by_role("link", name="Apply to agent").click()
    dialog = page.locator("dialog#apply-dialog")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("checkbox")).to_have_count(3)
    expect(page.locator(".htmx-settling")).to_have_count(0)  # the step's htmx attributes are live
    dialog.get_by_role("checkbox", name="Apply suggestion 2").uncheck()
    dialog.get_by_label("Title").first.fill("Publish the phone number")
    dialog.get_by_role("button", name="Continue: review the change").click()

    # Step 2: the diff of the knowledge, and its final text, which the user edits.
    expect(dialog.get_by_text("Step 2 of 2")).to_be_visible()
    diff = dialog.locator("#apply-diff-knowledge .diff")
    expect(diff.locator(".add", has_text="Phone support: +1 555 0100.")).to_be_visible()
    expect(diff.locator(".add", has_text="SLA credit is 10%.")).to_be_visible()
    expect(diff).not_to_contain_text("Non-profits")
    final = dialog.get_by_label("Final knowledge")
    # htmx binds the textarea's input trigger when the swap settles (20 ms after it shows,
    # longer on a loaded machine): an edit before that would go unheard, as no person types.
    expect(page.locator(".htmx-settling")).to_have_count(0)
    final.fill(final.input_value() + "\n\nEdited in the dialog.")
    expect(diff.locator(".add", has_text="Edited in the dialog.")).to_be_visible()  # the diff follows the edit
    dialog.get_by_role("button", name="Apply: save as version 2").click()

    # The panel, updated in place: applied, with the version, its diff and Verify.
    expect(dialog).to_have_count(0)
    expect(page.locator("#toasts").get_by_text("Saved as version 2.")).to_be_visible()
    expect(panel.get_by_text("Version 2 was made from 2 suggestions")).to_be_visible()
    expect(panel.locator(".suggestion.is-applied")).to_have_count(2)
    expect(panel.get_by_text("Publish the phone number")).to_be_visible()
    expect(panel.locator(".applied-diff .add", has_text="Edited in the dialog.")).to_be_visible()
    expect(panel.get_by_role("button", name="Verify v2")).to_be_visible()

    panel.get_by_role("link", name="Compare with v1").click()
    compare = page.locator("#compare")
    expect(compare.get_by_text("1 field changed")).to_be_visible()
    expect(compare.locator(".diff .add", has_text="Edited in the dialog.")).to_be_visible()
    expect(compare.locator(".diff")).not_to_contain_text("Non-profits")

    agent.refresh_from_db()
    assert agent.current_version.number == 2
    assert agent.current_version.knowledge.endswith("Edited in the dialog.")
    titles = set(Suggestion.objects.filter(state="applied").values_list("title", flat=True))
    assert titles == {"Publish the phone number", "Add to knowledge: SLA credit is 10%."}


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_http_agents_see_apply_disabled_and_write_a_change_request(
    page, login, live_server, alice, run_with_suggestions, no_llm, viewport
):
    run = run_with_suggestions
    Agent.objects.filter(pk=run.agent_id).update(kind=Agent.Kind.HTTP)
    page.set_viewport_size(viewport)
    login(page, alice, f"/agents/{run.agent_id}/runs/{run.pk}/?tab=suggestions")

    panel = page.locator("#suggestions")
    apply_button = panel.get_by_role("button", name="Apply to agent")
    expect(apply_button).to_be_disabled()
    expect(apply_button).to_have_attribute(
        "title", "HTTP agents are configured elsewhere: download the change request instead."
    )
    expect(panel.locator("#apply-blocked-reason")).to_contain_text("HTTP agents are configured elsewhere")

    panel.get_by_role("link", name="Write change request").click()
    dialog = page.locator("dialog#apply-dialog")
    expect(dialog.get_by_text("This agent is an HTTP endpoint.")).to_be_visible()
    expect(dialog.get_by_role("button", name="Download change request")).to_be_visible()

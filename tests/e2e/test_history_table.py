"""The history table on the agent's page in Chromium: its version column reads as row labels
(v1, v2 in the body's style), not as a second grey upper-case header column, and the last row
draws no stray line under its label."""

import pytest
from playwright.sync_api import expect

from agents.models import AgentVersion
from tests.e2e.conftest import DESKTOP
from tests.factories import AgentFactory, DatasetFactory
from tests.runs.review_helpers import CaseSpec, build_run

pytestmark = pytest.mark.e2e


def test_the_history_table_version_column_is_a_row_label(page, login, live_server, alice, team, no_llm):
    agent = AgentFactory(team=team, name="Support bot")
    dataset = DatasetFactory(agent=agent, name="Refunds")
    second = AgentVersion.objects.create(agent=agent, number=2, note="Shorter answers")
    for version, state in ((agent.current_version, "pass"), (second, "fail")):
        build_run(agent=agent, dataset=dataset, version=version, cases=[CaseSpec(repeats=[(state, 8.0)])])
    page.set_viewport_size(DESKTOP)
    login(page, alice, f"/agents/{agent.pk}/runs/history/")

    label = page.locator(".history-table tbody th").first
    expect(label).to_contain_text("v1")
    style = label.evaluate("e => { const s = getComputedStyle(e); return [s.textTransform, s.backgroundColor]; }")
    assert style == ["none", "rgba(0, 0, 0, 0)"], style
    # The last row's label draws no bottom line of its own inside the rounded table edge.
    last = page.locator(".history-table tbody tr:last-child th")
    assert last.evaluate("e => getComputedStyle(e).borderBottomWidth") == "0px"

"""The comparison pages in a browser (issue 19): two runs with the paired test and the
answers side by side, five runs as a matrix, the verify panel, the baseline box and the
flaky marks, at desktop and phone width. Screenshots go to $EVALSITE_SHOTS (default
/tmp/shots-f19) for a person to look at."""

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect

from agents.models import AgentVersion
from runs.comparing.flaky import case_stability_refresh
from runs.models import Run
from runs.services import dataset_baseline_pin
from tests.e2e.conftest import DESKTOP, PHONE
from tests.factories import AgentFactory, DatasetFactory, TestCaseFactory
from tests.runs.review_helpers import CaseSpec, build_run

pytestmark = pytest.mark.e2e

SHOTS = Path(os.environ.get("EVALSITE_SHOTS", "/tmp/shots-f19"))
QUESTIONS = [
    ("How long is the refund window?", "Refunds are available within 30 days of purchase."),
    ("What credit do Enterprise customers get when uptime drops?", "A 10% credit below 99.95% uptime."),
    ("What is the support phone number?", "+1 555 0100, for Enterprise customers."),
    ("Can I change my plan mid-cycle?", "Yes; the difference is prorated."),
    ("Do you offer student discounts?", "Yes, 50% with a valid student ID."),
    ("Which regions host customer data?", "EU (Frankfurt) and US (Virginia)."),
]
# Per run: each case's verdict ("p"/"f") and the answer given.
RUNS = [
    ("pppffp", "Refunds are available within 30 days of purchase."),
    ("ppfffp", "Refunds are available within 30 days of purchase, no questions asked."),
    ("fpppfp", "Refunds are available within 14 days of purchase."),
    ("ppppfp", "Refunds within 30 days of purchase; keep the receipt."),
    ("fpppff", "You can ask for a refund within 14 days."),
]


def _build(alice, team):
    agent = AgentFactory(team=team, name="Support bot")
    dataset = DatasetFactory(agent=agent, name="Support policy")
    cases = [
        TestCaseFactory(dataset=dataset, position=n, question=q, expected_answer=e)
        for n, (q, e) in enumerate(QUESTIONS)
    ]
    versions = [agent.current_version] + [AgentVersion.objects.create(agent=agent, number=n) for n in range(2, 6)]
    runs = []
    for version, (verdicts, answer) in zip(versions, RUNS, strict=True):
        specs = [
            CaseSpec(
                question=case.question,
                expected=case.expected_answer,
                source_case_id=case.pk,
                answer=answer if n == 0 else f"{case.expected_answer} (v{version.number})",
                repeats=[("pass", 8.5) if v == "p" else ("fail", 3.0)],
            )
            for n, (case, v) in enumerate(zip(cases, verdicts, strict=True))
        ]
        runs.append(build_run(agent=agent, dataset=dataset, version=version, cases=specs))
    # Three more runs of version 5: cases 5 and 6 flip between them, so they are flaky.
    for verdicts in ("fpppff", "fpppfp", "fppppf"):
        specs = [
            CaseSpec(
                question=c.question,
                expected=c.expected_answer,
                source_case_id=c.pk,
                repeats=[("pass", 8.0) if v == "p" else ("fail", 3.0)],
            )
            for c, v in zip(cases, verdicts, strict=True)
        ]
        build_run(agent=agent, dataset=dataset, version=versions[-1], cases=specs)
    case_stability_refresh(dataset_id=dataset.pk)
    dataset_baseline_pin(run=runs[0], user=alice)
    verify = runs[1]
    Run.objects.filter(pk=verify.pk).update(parent=runs[0], purpose=Run.Purpose.VERIFY)
    return agent, dataset, runs


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_compare_matrix_verify_and_flaky_pages(page, login, live_server, alice, team, transactional_db, viewport):
    agent, dataset, runs = _build(alice, team)
    width = viewport["width"]
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size(viewport)

    login(page, alice, f"/agents/{agent.pk}/runs/")
    page.goto(f"{live_server.url}/agents/{agent.pk}/runs/compare/?a={runs[0].pk}&b={runs[4].pk}")
    expect(page.locator(".paired-test-sentence")).to_contain_text("v5 fixes 1 and breaks 2 cases of 6")
    first = page.locator("details.compare-answers").first
    first.locator("summary").click()
    expect(first.locator(".worddiff del").first).to_be_visible()
    page.screenshot(path=str(SHOTS / f"compare-two-runs-{width}.png"), full_page=True)

    query = "&".join(f"runs={run.pk}" for run in runs)
    page.goto(f"{live_server.url}/agents/{agent.pk}/runs/compare/?{query}")
    expect(page.locator(".matrix-table tbody tr")).to_have_count(6)
    expect(page.locator(".matrix-table tbody tr").first).to_contain_text("Regression")
    page.screenshot(path=str(SHOTS / f"compare-matrix-{width}.png"), full_page=True)

    run_url = f"{live_server.url}/agents/{agent.pk}/runs/{runs[1].pk}/"
    page.goto(f"{run_url}?tab=suggestions")
    expect(page.locator(".verify-result .paired-test-sentence")).to_contain_text("v2 fixes 0 and breaks 1 case of 6")
    page.locator("#suggestions").scroll_into_view_if_needed()
    page.locator("#suggestions").screenshot(path=str(SHOTS / f"verify-panel-{width}.png"))
    page.goto(f"{run_url}?tab=baseline")
    page.locator("#baseline").screenshot(path=str(SHOTS / f"baseline-box-{width}.png"))
    page.goto(run_url)
    expect(page.locator(".result-card .badge-unstable").first).to_be_visible()
    page.locator(".result-card .badge-unstable").first.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / f"result-cards-flaky-{width}.png"))

    page.goto(f"{live_server.url}/agents/{agent.pk}/datasets/{dataset.pk}/")
    expect(page.locator(".case-list .badge-unstable")).to_have_count(2)
    page.get_by_label("Flaky cases only").check()
    expect(page.locator(".case-count")).to_contain_text("2 of 6 test cases are flaky")
    page.screenshot(path=str(SHOTS / f"dataset-flaky-filter-{width}.png"), full_page=True)

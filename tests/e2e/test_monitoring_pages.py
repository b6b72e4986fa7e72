"""The monitoring pages in Chromium at 1280 and 390 px (issue 47): the monitoring page with its
chart per judge configuration and an open alert, the trace list polling in a new trace, the trace
page's span tree, and a learning case made, approved and found in its dataset. Nothing sticks out
sideways on a phone.

With EVALSITE_DOC_SCREENSHOTS=1 the pictures go to docs/img/ (embedded by docs/learning-cases.md;
`make doc-screenshots`), otherwise to a temporary folder, so the walk is tested all the same."""

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone
from PIL import Image
from playwright.sync_api import Page, expect

from monitoring.models import Alert, LearningCase
from tests.e2e.conftest import DESKTOP, PHONE
from tests.e2e.test_page_fit import STICKING_OUT
from tests.factories import DatasetFactory
from tests.monitoring.factories import (
    FeedbackFactory,
    JudgeConfigFactory,
    OnlineEvaluatorFactory,
    OnlineScoreFactory,
    SpanFactory,
    TraceFactory,
)

pytestmark = pytest.mark.e2e

DOCS_IMG = Path(settings.BASE_DIR) / "docs" / "img"
QUESTIONS = [
    "How do I reset my password?",
    "Can I return shoes after 20 days?",
    "Do you ship to Norway?",
    "Where is my order 1042?",
    "Can I change my delivery address?",
    "Is there a student discount?",
]


@pytest.fixture
def shots(tmp_path) -> Path:
    folder = DOCS_IMG if os.environ.get("EVALSITE_DOC_SCREENSHOTS") == "1" else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _shoot(page: Page, folder: Path, name: str, full_page: bool = False) -> None:
    """The window (or the whole page) as a 256-colour PNG, as tests/e2e/test_doc_screenshots.py does."""
    expect(page.locator(".htmx-request")).to_have_count(0)
    path = folder / f"{name}.png"
    page.screenshot(path=path, animations="disabled", caret="hide", full_page=full_page)
    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)


def _fits(page: Page, width: int) -> None:
    assert page.evaluate(STICKING_OUT) == []
    assert page.evaluate("document.documentElement.scrollWidth") <= width


@pytest.fixture
def traffic(transactional_db, agent):
    """A day of production traffic: traces every hour or so, two judge configurations of one
    evaluator (the criteria changed in the afternoon), feedback, an open alert."""
    now = timezone.now()
    evaluator = OnlineEvaluatorFactory(agent=agent, name="Helpfulness", alert_below=0.7)
    before = JudgeConfigFactory(judge_model="openai/gpt-4o-mini")
    after = JudgeConfigFactory(judge_model="openai/gpt-4o-mini", criteria={"evaluation": "Give the exact policy."})
    traces = []
    for hour in range(22, 0, -1):
        for index in range(1 + hour % 3):
            question = QUESTIONS[(hour + index) % len(QUESTIONS)]
            started = now - timedelta(hours=hour, minutes=index * 7)
            trace = TraceFactory(
                agent=agent,
                question=question,
                answer=f"Answer to: {question}",
                started_at=started,
                duration_ms=400 + (hour * 37 + index * 113) % 900,
                status="error" if (hour + index) % 11 == 0 else "ok",
                error="upstream timeout" if (hour + index) % 11 == 0 else "",
                cost="0.0012",
            )
            traces.append(trace)
            score = 3 + (hour * 7 + index * 3) % 8
            OnlineScoreFactory(
                trace=trace,
                evaluator=evaluator,
                judge_config=before if hour > 9 else after,
                score=score,
                scored_at=started + timedelta(seconds=30),
                reasoning=f"Scored {score}: {'names the steps' if score >= 7 else 'misses the policy'}.",
            )
    Alert.objects.create(evaluator=evaluator, judge_config=after, pass_rate=0.55, window=20, threshold=0.7)
    shown = TraceFactory(
        agent=agent,
        question="Can I return shoes after 20 days? My email is [masked:email].",
        answer="Sorry, we never take returns.",
        messages=[
            {"role": "system", "content": "You are the shop's assistant."},
            {"role": "user", "content": "Hi, I bought shoes three weeks ago."},
            {"role": "assistant", "content": "Hello! How can I help with your shoes?"},
            {"role": "user", "content": "Can I return shoes after 20 days? My email is [masked:email]."},
            {"role": "assistant", "content": "Sorry, we never take returns."},
        ],
        tool_calls=[{"name": "order_lookup", "arguments": '{"email": "[masked:email]"}', "result": '{"days": 20}'}],
        retrieval_documents=[
            {"id": "returns-policy.md", "content": "Returns are accepted within 30 days.", "score": 0.91}
        ],
        masked={"email": 2},
        started_at=now - timedelta(minutes=20),
        duration_ms=1840,
    )
    start = int(shown.started_at.timestamp() * 1e9)
    root = SpanFactory(
        trace=shown, name="agent.run", start_time_unix_nano=start, end_time_unix_nano=start + 1_840_000_000
    )
    retrieve = SpanFactory(
        trace=shown,
        name="retrieve returns-policy",
        parent_span_id=root.span_id,
        kind="internal",
        start_time_unix_nano=start + 40_000_000,
        end_time_unix_nano=start + 260_000_000,
    )
    SpanFactory(
        trace=shown,
        name="tool order_lookup",
        parent_span_id=root.span_id,
        kind="internal",
        start_time_unix_nano=start + 280_000_000,
        end_time_unix_nano=start + 610_000_000,
    )
    SpanFactory(
        trace=shown,
        name="chat gpt-4o-mini",
        parent_span_id=root.span_id,
        start_time_unix_nano=start + 640_000_000,
        end_time_unix_nano=start + 1_800_000_000,
    )
    assert retrieve
    OnlineScoreFactory(
        trace=shown,
        evaluator=evaluator,
        judge_config=after,
        score=8,
        reasoning="Polite and clear.",
        scored_at=now - timedelta(minutes=19),
    )
    FeedbackFactory(trace=shown, value=0, comment="That's wrong, your site says 30 days!")
    return {"shown": shown, "traces": traces, "dataset": DatasetFactory(agent=agent, name="Returns")}


@pytest.mark.worker
def test_the_monitoring_pages_at_both_widths(page, login, live_server, celery_worker, alice, agent, traffic, shots):
    celery_worker()  # a real worker, as in production: the pages show no "Runs are paused" banner
    shown = traffic["shown"]
    base = f"/agents/{agent.pk}/monitoring/"
    page.set_viewport_size({**DESKTOP, "height": 1200})  # the docs' pictures: the charts in view
    login(page, alice, base)
    page.get_by_role("button", name="Hide this notice").click()  # "No model is configured": not the subject

    expect(page.get_by_role("heading", name="Online scores")).to_be_visible()
    expect(page.locator("#chart-pass-title ~ .mon-chart-scroll .mon-line")).to_have_count(2)  # one line per judge
    expect(page.locator(".mon-alert")).to_contain_text("pass rate 55% over the last 20 scored, below 70%")
    # Each legend's swatch is a small square beside its label, not stretched like the charts.
    for swatch in page.locator(".mon-legend .mon-swatch").all():
        box = swatch.bounding_box()
        assert box is not None and box["width"] <= 20 and box["height"] <= 20, box
    _shoot(page, shots, "monitoring-page")

    page.goto(f"{live_server.url}/agents/{agent.pk}/monitoring/traces/{shown.pk}/")
    expect(page.locator(".span-row")).to_have_count(4)
    expect(page.locator("mark.masked").first).to_have_text("email masked")
    expect(page.get_by_text("That's wrong, your site says 30 days!")).to_be_visible()
    _shoot(page, shots, "trace-page", full_page=True)

    # A reviewer makes a case of the disputed trace: the judge passed it, the user turned it down.
    page.get_by_label("Why").select_option("thumbs_down")
    page.get_by_role("button", name="Make a test case").click()
    expect(page.get_by_role("heading", name="Learning case")).to_be_visible()
    page.get_by_label("Expected answer").fill("Yes: returns are accepted within 30 days of delivery, with the receipt.")
    _shoot(page, shots, "learning-case")
    page.goto(f"{live_server.url}{base}learning/")
    expect(page.locator(".learning-rows .trace-row")).to_have_count(1)
    _shoot(page, shots, "learning-queue")

    for name, url in (
        ("monitoring-page", base),
        ("trace-page", f"{base}traces/{shown.pk}/"),
        ("learning-queue", f"{base}learning/"),
        ("trace-list", f"{base}traces/"),
    ):
        page.set_viewport_size(PHONE)
        page.goto(f"{live_server.url}{url}")
        _fits(page, PHONE["width"])
        _shoot(page, shots, f"{name}-390", full_page=name != "trace-list")  # 45 traces: the window is enough


def test_a_new_trace_appears_in_the_list_without_a_reload(page, login, live_server, alice, agent, traffic):
    page.set_viewport_size(DESKTOP)
    login(page, alice, f"/agents/{agent.pk}/monitoring/traces/")
    expect(page.locator(".trace-row").first).to_be_visible()
    _fits(page, DESKTOP["width"])

    TraceFactory(agent=agent, question="A brand new production question")

    expect(page.locator(".trace-row").first).to_contain_text("A brand new production question", timeout=8000)


def test_a_reviewer_approves_a_case_into_a_dataset(page, login, live_server, alice, agent, traffic):
    shown = traffic["shown"]
    page.set_viewport_size(PHONE)
    login(page, alice, f"/agents/{agent.pk}/monitoring/traces/{shown.pk}/")
    page.get_by_role("button", name="Make a test case").click()

    expect(page.get_by_text("Sorry, we never take returns.")).to_be_visible()
    page.get_by_label("Dataset", exact=True).select_option(label="Returns")
    page.get_by_label("Expected answer").fill("Yes: returns are accepted within 30 days of delivery.")
    page.get_by_role("button", name="Approve").click()

    expect(page.get_by_text("Added to Returns as case 1.")).to_be_visible()
    _fits(page, PHONE["width"])
    case = LearningCase.objects.get()
    assert case.status == "approved"
    assert case.test_case.metadata["trace_id"] == shown.otel_trace_id


def test_an_owner_sets_up_monitoring_and_an_evaluator_in_the_browser(page, login, live_server, alice, agent, shots):
    """The Monitoring settings (a key shown once, a service mapped) and an evaluator made, read and
    deleted through its pages, at both widths: nothing sticks out, the delete asks first."""
    page.set_viewport_size(DESKTOP)
    login(page, alice, "/accounts/settings/monitoring/")
    page.get_by_label("New key").fill("Production app")
    page.get_by_role("button", name="Create key").click()
    expect(page.get_by_text("evi_").first).to_be_visible()
    page.get_by_label("Service name").fill("support-bot")
    page.get_by_role("button", name="Map service").click()
    expect(page.get_by_text("Traces of “support-bot” now go to Support bot.")).to_be_visible()
    _fits(page, DESKTOP["width"])
    _shoot(page, shots, "monitoring-settings", full_page=True)

    page.goto(f"{live_server.url}/agents/{agent.pk}/monitoring/evaluators/new/")
    page.locator("#id_name").fill("Order accuracy")  # its label is "Name *" (required)
    page.locator("#id_sampling_percent").fill("25")
    page.get_by_label("Attributes").fill("deployment.environment=prod")
    page.get_by_role("button", name="Create evaluator").click()
    expect(page.get_by_text("Online evaluator “Order accuracy” created.")).to_be_visible()
    _fits(page, DESKTOP["width"])
    _shoot(page, shots, "evaluator-page", full_page=True)

    for url in ("/accounts/settings/monitoring/", f"/agents/{agent.pk}/monitoring/evaluators/", page.url):
        page.set_viewport_size(PHONE)
        page.goto(url if url.startswith("http") else f"{live_server.url}{url}")
        assert page.evaluate(STICKING_OUT) == [], url
    _shoot(page, shots, "evaluator-page-390", full_page=True)

    delete = page.get_by_role("button", name="Delete evaluator and its scores")
    expect(delete).to_be_hidden()  # behind "Delete evaluator…": one click never deletes
    page.get_by_text("Delete evaluator…").click()
    delete.click()
    expect(page.get_by_text("Online evaluator “Order accuracy” deleted, with its scores.")).to_be_visible()
    assert not agent.online_evaluators.exists()

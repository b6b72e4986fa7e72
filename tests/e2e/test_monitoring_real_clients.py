"""The real instrumented clients, seen in the console (issue 47, "Done when"): an app on the openai
SDK, instrumented by opentelemetry-instrumentation-openai-v2 or by openinference-instrumentation-
openai, exports one conversation with the SDK's OTLP/HTTP exporter to a running console; an online
evaluator scores it on a real Celery worker; the app posts its user's thumbs-down to /api/feedback.
Then, in Chromium at 1280 and 390 px, the trace page and the trace list show what the app sent,
exactly, with the score's reasoning and the user's comment, and the trace API says the same.

tests/monitoring/test_ingest_clients.py checks the stored trace of the same clients, and
tests/e2e/test_monitoring_pages.py the pages with factory-made traces; this test joins the two."""

import json
from pathlib import Path

import pytest
import requests
from django.test import Client
from playwright.sync_api import Page, expect

from accounts.services import api_token_create
from monitoring.models import OnlineScore, Trace
from monitoring.services import service_mapping_create
from tests.e2e.conftest import DESKTOP, PHONE
from tests.e2e.test_page_fit import STICKING_OUT
from tests.monitoring.conftest import ingestion_key  # noqa: F401 (a fixture: used by name below)
from tests.monitoring.online_helpers import evaluator_for, preflighted
from tests.monitoring.test_ingest_clients import run_client
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.worker]

QUESTION = "Where is my order A-1042?"  # chat_client.py's question, which the judge rule below keys on
REASONING = "Scored 3: the order has shipped, but the answer gives no tracking number to follow it."
COMMENT = "It arrived a week late and nobody told me why."


def _judged_by_a_real_worker(fake_llm, celery_worker, agent):
    """An evaluator on the agent whose judge passed its preflight, gives this conversation 3/10,
    and a real worker to score it, started after the fake is set up (it reads its settings)."""
    fake_llm.add_rule(task="judge", contains=QUESTION, json={"score": 3, "reasoning": REASONING})
    evaluator = evaluator_for(agent, name="Order accuracy")
    config = preflighted(fake_llm, evaluator)
    celery_worker()
    return evaluator, config


def _thumbs_down(live_server, key: str, trace_id: str) -> dict:
    """What an app sends when its user turns an answer down (docs/monitoring.md, section 4)."""
    response = requests.post(
        f"{live_server.url}/api/feedback",
        headers={"Authorization": f"Bearer {key}"},
        json={"trace_id": trace_id, "thumbs": "down", "comment": COMMENT, "user_id": "customer-7"},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    return response.json()


def _shows_what_was_sent(page: Page, sent: dict) -> None:
    """The trace page shows every message, the tool call, the token counts, the score and the feedback."""
    system, user, _, tool = sent["messages"]
    call = sent["tool_call"]
    prompt_tokens = sum(prompt for prompt, _ in sent["usage"])
    completion_tokens = sum(completion for _, completion in sent["usage"])

    expect(page.locator(".mon-message-system .mon-content")).to_have_text(system["content"])
    expect(page.locator(".mon-message-user .mon-content")).to_have_text(user["content"])
    expect(page.locator(".mon-message-tool .mon-content")).to_have_text(tool["content"])
    # The assistant's first turn is its tool call: its bubble says so, never blank.
    calling, answering = page.locator(".mon-message-assistant").all()
    expect(calling.locator(".mon-call")).to_have_text(f"Calls {call['name']} {call['arguments']}")
    expect(answering.locator(".mon-content")).to_have_text(sent["answer"])
    tools = page.locator(".mon-tools > li")
    expect(tools).to_have_count(1)
    expect(tools.locator("strong")).to_have_text(call["name"])
    expect(tools).to_contain_text(call["id"])
    # The arguments as the model wrote them (a JSON text), and the tool's result as the app gave it.
    expect(tools.locator("pre.mon-pre").first).to_have_text(call["arguments"])
    expect(tools.locator("pre.mon-pre").nth(1)).to_have_text(tool["content"])
    expect(page.locator(".trace-head")).to_contain_text(f"{prompt_tokens} in / {completion_tokens} out tokens")

    score = page.locator(".mon-score")
    expect(score).to_have_count(1)
    expect(score).to_contain_text("Fail")
    expect(score).to_contain_text("3/10")
    expect(score).to_contain_text("Order accuracy")
    expect(score.get_by_text(REASONING)).to_be_visible()
    feedback = page.locator(".mon-feedback")
    expect(feedback).to_have_count(1)
    expect(feedback).to_contain_text("Thumbs down")
    expect(feedback.get_by_text(COMMENT)).to_be_visible()


def _list_shows_it(page: Page, sent: dict) -> None:
    row = page.locator(".trace-row")
    expect(row).to_have_count(1)
    expect(row.locator(".trace-question")).to_have_text(QUESTION)
    expect(row.locator(".trace-answer")).to_have_text(sent["answer"])
    expect(row.get_by_title("Lowest online score")).to_have_text("3/10")
    expect(row.get_by_title("Negative end-user feedback")).to_be_visible()


def _fits(page: Page, width: int) -> None:
    assert page.evaluate(STICKING_OUT) == []
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def _shoot(page: Page, path: Path) -> Path:
    expect(page.locator(".htmx-request")).to_have_count(0)
    page.screenshot(path=path, full_page=True, animations="disabled", caret="hide")
    return path


@pytest.mark.parametrize("instrumentation", ["openai-v2", "openinference"])
def test_a_real_clients_trace_its_score_and_feedback_show_on_the_pages_and_the_api(
    instrumentation,
    page,
    login,
    live_server,
    celery_worker,
    fake_llm,
    ingestion_key,  # noqa: F811
    team,
    agent,
    alice,
    tmp_path,
):
    service_mapping_create(team=team, service_name="support-bot", agent=agent)
    evaluator, config = _judged_by_a_real_worker(fake_llm, celery_worker, agent)

    sent = run_client(instrumentation=instrumentation, fake_llm=fake_llm, live_server=live_server, key=ingestion_key)
    trace = Trace.objects.get(team=team, otel_trace_id=sent["trace_id"], agent=agent)
    # Ingestion's hook sends the selection job, the worker claims a score and the judge makes it.
    score = wait_for(
        lambda: OnlineScore.objects.filter(trace=trace, evaluator=evaluator, status="scored").first(),
        what="the online score of the client's trace",
    )
    assert (score.score, score.passed, score.reasoning, score.judge_config_id) == (3, False, REASONING, config.pk)
    posted = _thumbs_down(live_server, ingestion_key, sent["trace_id"])
    assert (posted["kind"], posted["value"], posted["linked"]) == ("thumbs", 0.0, True)

    trace_url = f"/agents/{agent.pk}/monitoring/traces/{trace.pk}/"
    list_url = f"/agents/{agent.pk}/monitoring/traces/"
    page.set_viewport_size(DESKTOP)
    login(page, alice, trace_url)
    shots = []
    for size in (DESKTOP, PHONE):
        width = size["width"]
        page.set_viewport_size(size)
        page.goto(f"{live_server.url}{trace_url}")
        _shows_what_was_sent(page, sent)
        _fits(page, width)
        # Each span opened, as a reader looking at its attributes would: they fit too.
        for summary in page.locator(".span-row summary").all():
            summary.click()
        expect(page.locator(".span-row details[open]")).to_have_count(trace.span_count)
        _fits(page, width)
        shots.append(_shoot(page, tmp_path / f"trace-{instrumentation}-{width}.png"))
        page.goto(f"{live_server.url}{list_url}")
        _list_shows_it(page, sent)
        _fits(page, width)
        shots.append(_shoot(page, tmp_path / f"trace-list-{instrumentation}-{width}.png"))
    print("screenshots:", *shots)

    # The trace API says the same: the score with its judge configuration, and the feedback.
    token = api_token_create(user=alice, name="reader")[1]
    api = Client(headers={"Authorization": f"Bearer {token}"})
    body = api.get(f"/api/agents/{agent.pk}/traces/{trace.pk}").json()
    assert (body["input_tokens"], body["output_tokens"]) == (
        sum(prompt for prompt, _ in sent["usage"]),
        sum(completion for _, completion in sent["usage"]),
    )
    assert [json.dumps(call["arguments"]) for call in body["tool_calls"]] == [sent["tool_call"]["arguments"]]
    assert [
        (s["evaluator"], s["status"], s["score"], s["passed"], s["reasoning"], s["judge_fingerprint"])
        for s in body["scores"]
    ] == [("Order accuracy", "scored", 3, False, REASONING, config.fingerprint)]
    assert [(f["kind"], f["value"], f["negative"], f["comment"], f["user_id"]) for f in body["feedback"]] == [
        ("thumbs", 0.0, True, COMMENT, "customer-7")
    ]
    listed = api.get(f"/api/agents/{agent.pk}/traces").json()["items"]
    assert [(t["otel_trace_id"], t["lowest_score"], t["failed_score"], t["negative_feedback"]) for t in listed] == [
        (sent["trace_id"], 3, True, True)
    ]

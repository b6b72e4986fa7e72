"""A real browser walks every page and htmx fragment built from hostile text (check 4 in docs/architecture.md).

An agent, its versions, a dataset with its cases and documents, a finished run with its
results and a suggestion all carry script tags, event handlers, hx-get/hx-post/hx-on
attributes that would fire requests on load, and template syntax. Every GET route of the
URL conf that these objects fill is visited twice: as a page, and as the fragment htmx
swaps into a live page (htmx.ajax, so hx-* attributes in it are processed as in real use).
Then the real interactions: a search with a hostile query, the case edit dialog, the
document preview, the version diff. Expected throughout: no dialog, no request to /admin/,
/logout/ or a payload URL, no element a payload created, the payloads shown as text, and
`{{ 7*7 }}` never rendered as 49.

Routes come from the URL conf, so pages added later are walked too; EXTRA_VISITS adds
query strings for views that need them (one entry per view).
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page, expect

from agents import services as agent_services
from agents.models import Agent
from datasets.models import Dataset, Document, TestCase
from monitoring import services as monitoring_services
from monitoring.models import Alert, Conversation, LearningCase, Span
from playground.models import Exchange
from reviews.models import Review
from runs.models import Result, Run, RunCase
from suggestions.models import PreviewJob, RewriteJob, Suggestion
from tests.datasets import files
from tests.hostile.corpus import XSS_PAYLOADS
from tests.monitoring.factories import (
    FeedbackFactory,
    JudgeConfigFactory,
    OnlineEvaluatorFactory,
    OnlineScoreFactory,
    TraceFactory,
)
from tests.security.routes import console_routes

pytestmark = pytest.mark.e2e

TEMPLATE_MARK = "tmpl-mark {{ 7*7 }}"
SHORT = "<img src=x onerror=alert('short')>{{ 7*7 }}"  # fits names (120) and ids (100)
ALL = "\n".join([*XSS_PAYLOADS, TEMPLATE_MARK])
# Not visited: they sign out, or serve files or JSON rather than pages (their headers: tests/security).
SKIPPED_ROUTES = {"accounts:logout", "runs:document_signed", "playground:document_signed", "home", "healthz"}
# Query strings some views need to show their content: (route name, query).
EXTRA_VISITS = [
    ("agents:versions", lambda o: {"a": o["version_id"], "b": o["version_2_id"]}),
    ("datasets:detail", lambda o: {"q": "xss"}),
    ("datasets:case_search", lambda o: {"q": "<script>alert('xss-q')</script>"}),
    ("datasets:document_preview", lambda o: {"case": o["case_pk"], "show": "context"}),
    ("datasets:document_preview", lambda o: {"case": o["case_pk"]}),
    ("monitoring:traces", lambda o: {"q": "<script>alert('xss-q')</script>", "status": "error"}),
]
DOM_CHECK = """() => {
  const bad = [];
  const report = (el, name, value) => bad.push(`${el.tagName} ${name}="${value}"`);
  for (const el of document.querySelectorAll('*')) {
    for (const attr of el.attributes) {
      const name = attr.name.toLowerCase(), value = attr.value;
      if (name.startsWith('on') && /alert\\(/.test(value)) report(el, name, value);
      if (/^(data-)?hx-/.test(name) && /(\\/admin\\/|logout|hx-payload|alert\\()/.test(value)) report(el, name, value);
      if (['href', 'src', 'action'].includes(name) && /^\\s*javascript:/i.test(value)) report(el, name, value);
    }
    if (el.tagName === 'SCRIPT' && /alert\\(/.test(el.textContent)) bad.push('an inline <script> from a payload');
    if (el.tagName === 'IMG' && el.getAttribute('src') === 'x') bad.push('an <img src=x> from a payload');
  }
  return bad;
}"""


@pytest.fixture
def hostile_world(transactional_db, settings, tmp_path: Path, team, alice, bob) -> dict[str, int]:
    """Every object a page shows, its text fields full of payloads."""
    settings.MEDIA_ROOT = tmp_path / "media"
    team.name = f"Team {SHORT}"
    team.save()
    agent = agent_services.agent_create(
        team=team, user=alice, name=f"Bot {SHORT}", kind=Agent.Kind.LLM, description=ALL[:500],
        instructions=ALL, skills=ALL, knowledge=ALL, guardrails=ALL,
        tools=[{"name": "lookup_order", "description": ALL, "result": ALL,
                "parameters": {"type": "object", "properties": {"q": {"type": "string", "description": ALL}}}}],
    )  # fmt: skip
    version_1 = agent.current_version_id
    agent = agent_services.agent_update(agent=agent, user=alice, note=SHORT, instructions=ALL + "\nv2 " + SHORT)
    dataset = Dataset.objects.create(
        agent=agent, name=f"Set {SHORT}", description=ALL, acceptance_criteria=ALL, rejection_criteria=ALL,
        evaluation_criteria=ALL, judge_prompt=ALL, source=Dataset.Source.UPLOAD, source_name=f"{SHORT}.docx",
        notice=ALL,
    )  # fmt: skip
    cases = [
        TestCase.objects.create(
            dataset=dataset,
            position=n,
            question=f"Q{n} {payload}",
            expected_answer=f"A{n} {payload}",
            document_context=f"C{n} {payload}",
            judge_guideline=f"G{n} {payload}",
            tags=[payload[:60], f"t{n}"],
            case_id=f"id{n} {payload}"[:100],
            source_file=payload[:200],
            source_location=payload[:100],
            source_span=ALL,
            tests_rule=payload[:300],
            smoke_guidance=ALL,
            expected_context=[ALL],
            turns=[{"user": payload, "expected": payload}] if n % 3 == 0 else [],
            expected_tools=[{"name": "lookup_order", "args": {"q": payload}}] if n % 2 == 0 else [],
        )  # fmt: skip
        for n, payload in enumerate([*XSS_PAYLOADS, TEMPLATE_MARK, ALL])
    ]
    docx = _stored_document(
        team, dataset, f"{SHORT}.docx", "docx", files.docx_bytes([ALL, [["Question", "Answer"], [ALL, ALL]]])
    )
    pdf = _stored_document(team, dataset, f"{SHORT}.pdf", "pdf", files.pdf_bytes([XSS_PAYLOADS]))
    cases[0].documents.add(docx, pdf)
    run = Run.objects.create(
        agent=agent, agent_version=agent.current_version, dataset=dataset, dataset_name=dataset.name,
        status=Run.Status.COMPLETED, total=3, completed=3, passed=1, failed=1, errored=1, average_score=5.0,
        score_total=10.0, summary=ALL, summary_note=SHORT, judge_model=SHORT, error=ALL,
        scoring={"pass_threshold": 7, "acceptance_criteria": ALL},
    )  # fmt: skip
    for position, (case, status) in enumerate(zip(cases, ["pass", "fail", "error"], strict=False)):
        run_case = RunCase.objects.create(
            run=run, position=position, source_case=case, case_id=case.case_id, question=case.question,
            expected_answer=case.expected_answer,
            data={"tags": case.tags, "document_context": ALL, "judge_guideline": ALL, "turns": case.turns},
        )  # fmt: skip
        Result.objects.create(
            run=run, case=run_case, status=status, question=ALL, actual_answer=f"Answer {ALL}",
            reasoning=f"Reasoning {ALL}", verdict="Correct" if status == "pass" else "Incorrect",
            error=ALL if status == "error" else "", score=None if status == "error" else (9 if status == "pass" else 3),
            tool_calls=[{"id": "call_1", "name": "lookup_order", "arguments": {"q": ALL}}],
            retrieval_context=[ALL],
            conversation=[{"role": "user", "content": ALL}, {"role": "assistant", "content": ALL}],
            scorers=[{"name": "trajectory", "score": 1.0, "passed": True, "detail": ALL}],
        )  # fmt: skip
    # Reviews with hostile notes: on the cards, in the review queue and the agreement page.
    for result in run.results.filter(status__in=["pass", "fail"]):
        passed = result.status != "pass"
        Review.objects.create(result=result, reviewer=bob, agrees=False, passed=passed, note=ALL[:2000])
    suggestion = Suggestion.objects.create(
        run=run, title=f"Fix {SHORT}"[:200], category="knowledge", description=ALL[:2000], proposed_text=ALL,
        offline=True,
    )  # fmt: skip
    suggestion.cases.set(run.cases.all())
    # An Apply rewrite job whose texts and errors are hostile (the dialog's step 1 and 2).
    job = RewriteJob.objects.create(
        run=run, base_version=agent.current_version, suggestion_ids=[suggestion.pk], status=RewriteJob.Status.DONE,
        fields=[
            {"name": "instructions", "status": "done", "current": ALL, "text": ALL + " rewritten", "error": ""},
            {"name": "knowledge", "status": "failed", "current": ALL, "text": "", "error": ALL},
        ],
        error=ALL, token="t", queued_at=timezone.now(), finished_at=timezone.now(), requested_by=alice,
    )  # fmt: skip
    # Apply's model preview of those texts: hostile questions, answers and errors in its rows.
    preview = PreviewJob.objects.create(
        run=run, base_version=agent.current_version, texts={"instructions": ALL}, status=PreviewJob.Status.DONE,
        results=[{"number": 1, "question": ALL[:200], "before": "fail", "status": "pass", "score": 8.0,
                  "answer": ALL[:300], "error": ALL[:300], "cost": 0.0}],
        error=ALL, queued_at=timezone.now(), requested_by=alice,
    )  # fmt: skip
    # A playground turn: hostile message, answer, tool calls and error.
    exchange = Exchange.objects.create(
        agent=agent, version=agent.current_version, created_by=alice, message=ALL, status=Exchange.Status.DONE,
        answer=ALL, tool_calls=[{"name": "lookup_order", "args": {"q": ALL}}], retrieval_context=[ALL],
        error=ALL, finished_at=timezone.now(),
    )  # fmt: skip
    return {
        **_hostile_monitoring(team, alice, agent),
        "agent_id": agent.pk, "version_id": version_1, "version_2_id": agent.current_version_id,
        "dataset_id": dataset.pk, "case_id": cases[0].pk, "case_pk": cases[0].pk, "document_id": docx.pk,
        "run_id": run.pk, "run_case_id": run.cases.first().pk, "result_id": run.results.first().pk,
        "suggestion_id": suggestion.pk, "job_id": job.pk, "preview_id": preview.pk,
        "exchange_id": exchange.pk,
        "membership_id": bob.memberships.get().pk, "token_id": 0,
    }  # fmt: skip


def _hostile_monitoring(team, alice, agent: Agent) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """What a deployed app sends is the least trusted text of all: a production trace, its spans,
    tool calls, documents and feedback full of payloads, with the key, mapping, evaluator, score,
    alert and learning case made from them."""
    key = monitoring_services.ingestion_key_create(team=team, user=alice, name=f"Key {SHORT}"[:100])[0]
    mapping = monitoring_services.service_mapping_create(team=team, service_name=f"svc {SHORT}"[:200], agent=agent)
    conversation = Conversation.objects.create(
        agent=agent, team=team, session_id=f"s {SHORT}"[:200], started_at=timezone.now(),
        last_activity_at=timezone.now(),
    )  # fmt: skip
    trace = TraceFactory(
        agent=agent, conversation=conversation, service_name=f"svc {SHORT}"[:200], name=SHORT[:300],
        status="error", error=ALL, model=SHORT[:200], question=ALL, answer=ALL, user_id=SHORT[:200],
        tags=[payload[:60] for payload in XSS_PAYLOADS], attributes={SHORT[:100]: ALL},
        messages=[{"role": "user", "content": ALL},
                  {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": SHORT[:60],
                                                                      "arguments": {"q": ALL}}]},
                  {"role": "tool", "content": ALL, "tool_call_id": "c1"},
                  {"role": "assistant", "content": ALL}],
        tool_calls=[{"id": "c1", "name": SHORT[:60], "arguments": {"q": ALL}, "result": ALL}],
        retrieval_documents=[{"id": SHORT[:60], "content": ALL, "score": 0.5}],
        span_count=1,
    )  # fmt: skip
    start = int(trace.started_at.timestamp() * 1e9)
    Span.objects.create(
        trace=trace, span_id="ab" * 8, name=SHORT[:300], kind="client", status_code="error", status_message=ALL,
        start_time_unix_nano=start, end_time_unix_nano=start + 850_000_000, attributes={SHORT[:100]: ALL, "x": [ALL]},
        events=[{"name": SHORT[:100], "attributes": {"message": ALL}}],
    )  # fmt: skip
    FeedbackFactory(trace=trace, comment=ALL, user_id=SHORT[:200])
    evaluator = OnlineEvaluatorFactory(
        agent=agent, name=f"Eval {SHORT}"[:120], filters={"service": SHORT[:200], "tags": [SHORT[:60]]},
        scoring={"evaluation_criteria": ALL, "acceptance_criteria": ALL, "judge_model": SHORT[:100]},
        alert_below=0.9,
    )  # fmt: skip
    config = JudgeConfigFactory(judge_model=SHORT[:100])
    OnlineScoreFactory(trace=trace, evaluator=evaluator, judge_config=config, score=3, reasoning=ALL)
    Alert.objects.create(evaluator=evaluator, judge_config=config, pass_rate=0.1, window=20, threshold=0.9,
                         delivery={"webhook": f"failed: {ALL[:300]}"})  # fmt: skip
    learning_case = LearningCase.objects.create(
        agent=agent, trace=trace, otel_trace_id=trace.otel_trace_id, trace_time=trace.started_at,
        service_name=SHORT[:200], reason="picked", question=ALL, conversation=[{"role": "user", "content": ALL}],
        actual_answer=ALL, expected_answer=ALL, reject_reason=ALL[:500], created_by=alice,
    )  # fmt: skip
    return {
        "key_id": key.pk, "mapping_id": mapping.pk, "trace_id": trace.pk, "learning_case_id": learning_case.pk,
        "evaluator_id": evaluator.pk,
    }  # fmt: skip


def _stored_document(team, dataset: Dataset, name: str, file_type: str, data: bytes) -> Document:  # type: ignore[no-untyped-def]
    from django.core.files.base import ContentFile

    document = Document(team=team, dataset=dataset, original_name=name, file_type=file_type, size=len(data))
    document.file.save(f"upload.{file_type}", ContentFile(data), save=False)
    document.save()
    return document


class Watch:
    """Everything the browser did that a payload could have caused."""

    def __init__(self, page: Page, origin: str) -> None:
        self.dialogs: list[str] = []
        self.requests: list[str] = []
        self.problems: list[str] = []
        self.origin = urlsplit(origin).netloc
        page.on("dialog", self._dialog)
        page.on("request", self._request)

    def _dialog(self, dialog) -> None:  # type: ignore[no-untyped-def]
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def _request(self, request) -> None:  # type: ignore[no-untyped-def]
        url = urlsplit(request.url)
        if url.scheme in ("data", "blob", "about", "chrome-extension"):
            return
        if (
            url.netloc != self.origin
            or url.path.startswith("/admin")
            or "logout" in url.path
            or "hx-payload" in url.query
            or url.path.endswith("/x")
        ):
            self.requests.append(f"{request.method} {request.url}")

    def assert_clean(self) -> None:
        assert self.dialogs == [], f"a payload opened a dialog: {self.dialogs}"
        assert self.requests == [], f"a payload sent requests: {self.requests}"
        assert self.problems == [], "\n".join(self.problems)

    def check(self, page: Page, where: str) -> str:
        for problem in _evaluate(page, DOM_CHECK):
            self.problems.append(f"{where}: {problem}")
        text = _evaluate(page, "() => document.body ? document.body.innerText : ''")
        if re.search(r"tmpl-mark\s+49", text):
            self.problems.append(f"{where}: {{{{ 7*7 }}}} was evaluated to 49")
        return text


def _evaluate(page: Page, script: str, arg: object = None) -> object:
    """page.evaluate, once more after a navigation: a fragment may tell htmx to reload or
    redirect (HX-Refresh after a settled status poll), which is fine and not under test."""
    for _ in range(3):
        try:
            return page.evaluate(script, arg)
        except PlaywrightError as exc:
            if "navigation" not in str(exc) and "context was destroyed" not in str(exc):
                raise
            page.wait_for_load_state()
    return page.evaluate(script, arg)


def _route_urls(objects: dict[str, int]) -> list[tuple[str, str]]:
    urls = []
    for route in console_routes():
        if route.name in SKIPPED_ROUTES:
            continue
        missing = [param for param in route.params if param not in objects]
        if missing:
            pytest.fail(f"{route.name}: the XSS walk cannot fill {missing}; add them to hostile_world.")
        urls.append((route.name, reverse(route.name, kwargs={p: objects[p] for p in route.params})))
    for name, query in EXTRA_VISITS:
        route = next(route for route in console_routes() if route.name == name)
        base = reverse(name, kwargs={p: objects[p] for p in route.params})
        urls.append((f"{name}?{'&'.join(query(objects))}", f"{base}?{urlencode(query(objects))}"))
    return urls


def test_no_page_or_fragment_runs_hostile_text(page: Page, live_server, login, alice, hostile_world, no_llm):
    objects = hostile_world
    watch = Watch(page, live_server.url)
    login(page, alice, reverse("agents:list"))
    visited = 0
    for name, url in _route_urls(objects):
        probe = page.request.get(live_server.url + url, max_redirects=0)
        assert probe.status < 500, f"GET {name} answered {probe.status}"
        is_page = probe.headers.get("content-type", "").startswith("text/html")
        if (
            probe.status in (301, 302, 405)
            or not is_page
            or "attachment" in probe.headers.get("content-disposition", "")
        ):
            continue  # POST-only, a redirect, or a file (headers: tests/security/test_headers.py)
        page.goto(live_server.url + url)  # waits for "load": htmx has processed the page by then
        watch.check(page, f"{name} (page)")
        # The same URL as the fragment htmx swaps into a live page, hx-* attributes processed.
        if page.evaluate("() => typeof htmx") != "object":  # a fragment-only URL: swap it into a real page
            page.goto(live_server.url + reverse("agents:list"))
        # The promise settles once the fragment is swapped in and processed; requests it
        # triggers are seen by Watch whenever they start, so the walk need not wait for them.
        _evaluate(page, "url => htmx.ajax('GET', url, {target: '#main', swap: 'innerHTML'}).catch(() => null)", url)
        watch.check(page, f"{name} (htmx fragment)")
        visited += 1
    watch.assert_clean()
    assert visited >= 25, f"only {visited} pages were walked: did the session end?"

    _interactions(page, live_server.url, objects, watch)

    watch.assert_clean()


def _interactions(page: Page, origin: str, objects: dict[str, int], watch: Watch) -> None:
    """The real htmx flows, where a fragment lands inside a page."""
    detail = origin + reverse("datasets:detail", args=[objects["agent_id"], objects["dataset_id"]])
    page.goto(detail)
    text = watch.check(page, "dataset page")
    for payload in [*XSS_PAYLOADS, TEMPLATE_MARK]:
        assert payload in text, f"{payload!r} is not shown verbatim on the dataset page"
    expect(page.get_by_text(f"Set {SHORT}").first).to_be_visible()

    # Search as you type, with a hostile query: the search fragment swaps in.
    with page.expect_response(re.compile(r"/cases/\?")):
        page.locator("#case-search").fill("<svg onload=alert('typed')>")
    page.wait_for_load_state("networkidle")
    watch.check(page, "search fragment")
    with page.expect_response(re.compile(r"/cases/\?")):
        page.locator("#case-search").fill("onerror")
    page.wait_for_load_state("networkidle")
    expect(page.locator("#case-list")).to_contain_text("<img src=x onerror=\"alert('xss-img')\">")
    watch.check(page, "search fragment with results")

    # The edit dialog of the case holding every payload: the textarea keeps them as text.
    page.goto(detail)
    last = page.locator(".case-item").last
    last.get_by_role("link", name=re.compile("^Edit")).click()
    dialog = page.locator("dialog[open]")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_label("Question")).to_have_value(f"Q{len(XSS_PAYLOADS) + 1} {ALL}")
    watch.check(page, "case edit dialog")
    page.keyboard.press("Escape")

    # The document preview dialog (DOCX blocks) from the chip on the first case.
    page.goto(detail)
    page.locator(".case-item").first.locator(".chip-doc").first.click()
    expect(page.locator("dialog[open]")).to_be_visible()
    page.wait_for_load_state("networkidle")
    expect(page.locator("dialog[open]")).to_contain_text("<script>alert('xss-script')</script>")
    watch.check(page, "document preview dialog")

    # The version diff, loaded into the versions page by htmx.
    page.goto(origin + reverse("agents:versions", args=[objects["agent_id"]]))
    compare = page.get_by_role("link", name="Compare")
    if compare.count():
        compare.first.click()
        page.wait_for_load_state("networkidle")
    watch.check(page, "version diff")

    # The run: its answers, reasoning and suggestions.
    page.goto(origin + reverse("runs:detail", args=[objects["agent_id"], objects["run_id"]]))
    page.wait_for_load_state("networkidle")
    text = watch.check(page, "run page")
    assert "<script>alert('xss-script')</script>" in text, "the run page shows the answer's payload as text"

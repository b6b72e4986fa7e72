"""The demo's story end to end through the pages, with no model, on a real Celery worker and a
fresh database: run the demo dataset (7 of 10 pass) → offline suggestions → Apply (the review
step names the other cases the new text reaches) → Verify: the three planted failures are fixed,
nothing regresses, and the page says plainly why 3 fixes on 10 cases is not yet proof."""

import html
import re

import pytest
from django.test import Client
from django.urls import reverse

from agents.models import Agent
from datasets.models import Dataset
from evalsite.demo import CASES, KNOWLEDGE_AGENT, demo_load
from runs.models import Run
from suggestions.models import Suggestion, SuggestionGeneration
from suggestions.selectors import verify_comparison_get
from tests.runs.conftest import wait_settled
from tests.suggestions.conftest import leaked_versions
from tests.waiting import wait_for

pytestmark = pytest.mark.worker

MISSING = {"phone-support", "enterprise-sla-credit", "nonprofit-discount"}  # facts the demo knowledge lacks
NUMBER = {case_id: index + 1 for index, (case_id, *_rest) in enumerate(CASES)}


def _generated(run: Run) -> bool:
    return SuggestionGeneration.objects.filter(run=run, status=SuggestionGeneration.Status.DONE).exists()


def _text(response) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


def test_the_demo_finds_the_gaps_fixes_them_and_proves_it_through_the_pages(celery_worker, no_llm):
    demo = demo_load()
    agent = Agent.objects.get(name=KNOWLEDGE_AGENT)
    dataset = Dataset.objects.get(agent=agent)
    worker = celery_worker(concurrency=2)
    client = Client()
    client.force_login(demo.user)

    # 1. Run the demo dataset from its page: the agent misses the three facts its knowledge lacks.
    started = client.post(reverse("runs:start", args=[agent.pk, dataset.pk]), {"request_key": "demo-run"})
    assert started.status_code == 302
    run = wait_settled(Run.objects.get(agent=agent), worker=worker)
    assert run.status == Run.Status.COMPLETED and run.scorer == Run.Scorer.OFFLINE
    assert (run.total, run.passed, run.failed, run.errored) == (len(CASES), 7, 3, 0)
    assert set(run.cases.filter(results__status="fail").values_list("case_id", flat=True)) == MISSING

    # 2. The run page offers three offline suggestions, each a fact naming its case.
    wait_for(lambda: _generated(run), what="the suggestions of the first run")
    page = _text(client.get(reverse("runs:detail", args=[agent.pk, run.pk]), {"tab": "suggestions"}))
    suggestions = list(run.suggestions.order_by("position"))
    assert len(suggestions) == 3
    assert all(s.offline and s.category == Suggestion.Category.KNOWLEDGE for s in suggestions)
    assert {case.case_id for s in suggestions for case in s.cases.all()} == MISSING
    for suggestion in suggestions:
        assert suggestion.title in page
        assert not suggestion.title.startswith("Add to knowledge: Agent")
        assert f"Source: the expected answer of case #{suggestion.cases.get().display_number}." in (
            suggestion.description
        )

    # 3. Apply step 1, then step 2: the review names the other cases the new text reaches.
    urls = {name: reverse(f"suggestions:{name}", args=[agent.pk, run.pk]) for name in ("apply", "apply_confirm")}
    step_one = {"s-TOTAL_FORMS": "3", "s-INITIAL_FORMS": "3", "s-MIN_NUM_FORMS": "0", "s-MAX_NUM_FORMS": "1000"}
    for index, item in enumerate(suggestions):
        step_one.update({f"s-{index}-id": item.pk, f"s-{index}-selected": "on", f"s-{index}-title": item.title,
                         f"s-{index}-category": item.category, f"s-{index}-description": item.description})  # fmt: skip
    review = client.post(urls["apply"], step_one)
    review_text = _text(review)
    assert "would teach the agent its own test" not in review_text
    assert "3 other cases would answer differently with this knowledge" in review_text
    for case_id in ("support-hours", "team-uptime", "team-price"):  # they retrieve the passages that grow
        assert f"#{NUMBER[case_id]} “{CASES[NUMBER[case_id] - 1][2]}” would now retrieve the new text" in review_text
    assert "Found with the knowledge agent's own retrieval" in review_text
    knowledge = html.unescape(re.search(r'name="knowledge"[^>]*>(.*?)</textarea>', review.content.decode(), re.S)[1])
    confirm = {
        "suggestions": [s.pk for s in suggestions],
        "base_version": agent.current_version_id,
        "fields_changed": ["knowledge"],
        "knowledge": knowledge,
    }
    assert client.post(urls["apply_confirm"], confirm).status_code == 302
    agent.refresh_from_db()
    version = agent.current_version
    assert version.number == 2 and "+1 555 0142 377" in version.knowledge
    assert run.suggestions.filter(state=Suggestion.State.APPLIED, applied_version=version).count() == 3
    assert leaked_versions() == []

    # 4. Verify every case against version 2, from the run page.
    verify = reverse("suggestions:verify", args=[agent.pk, run.pk])
    assert client.post(verify, {"version": version.pk, "scope": "all", "request_key": "demo"}).status_code == 302
    child = wait_settled(Run.objects.get(parent=run, purpose=Run.Purpose.VERIFY), worker=worker)
    assert child.agent_version == version and child.status == Run.Status.COMPLETED
    assert (child.total, child.passed, child.failed, child.errored) == (10, 10, 0, 0)
    comparison = verify_comparison_get(parent=run, run=child)
    assert {CASES[change.parent_position][0] for change in comparison.fixes} == MISSING
    assert comparison.regressions == []

    # 5. The page tells it honestly: all fixed, nothing broken, and not yet proof on 10 cases.
    page = _text(client.get(reverse("runs:detail", args=[agent.pk, run.pk]), {"tab": "suggestions"}))
    assert "10 / 10" in page and "was 7 (+3)" in page
    assert "3 fixes and no regressions on 10 cases is a good sign, but not yet proof" in page
    assert "would still split the changed verdicts this unevenly about 1 time in 4 (p = 0.25)" in page
    assert "it needs at least 6 fixes to call the change real (p < 0.05)" in page

"""The whole loop on the offline demo, with no model, through a real Celery worker:
run → offline suggestions → apply them all → verify → the verify run passes more cases."""

import html
import re

import pytest
from django.test import Client
from django.urls import reverse

from agents.models import Agent
from datasets.models import Dataset
from evalsite.demo import CASES, KNOWLEDGE_AGENT, demo_load
from runs import services as run_services
from runs.models import Run
from suggestions.models import Suggestion, SuggestionGeneration
from suggestions.selectors import verify_comparison_get
from tests.runs.conftest import wait_settled
from tests.waiting import wait_for

pytestmark = pytest.mark.worker

MISSING = {"phone-support", "enterprise-sla-credit", "nonprofit-discount"}  # facts the demo knowledge lacks


def _generated(run: Run) -> bool:
    return SuggestionGeneration.objects.filter(run=run, status=SuggestionGeneration.Status.DONE).exists()


def test_offline_suggestions_fix_the_demo_agent_and_the_verify_run_proves_it(celery_worker, no_llm):
    demo = demo_load()
    agent = Agent.objects.get(name=KNOWLEDGE_AGENT)
    dataset = Dataset.objects.get(agent=agent)
    worker = celery_worker(concurrency=2)
    client = Client()
    client.force_login(demo.user)

    # 1. The first run: the demo agent misses the three facts its knowledge lacks.
    run = wait_settled(run_services.run_start(agent=agent, dataset=dataset, user=demo.user), worker=worker)
    assert run.status == Run.Status.COMPLETED and run.scorer == Run.Scorer.OFFLINE
    assert (run.total, run.passed, run.failed, run.errored) == (len(CASES), 7, 3, 0)
    failing = set(run.cases.filter(results__status="fail").values_list("case_id", flat=True))
    assert failing == MISSING

    # 2. Completing the run queued the offline suggestion job on the worker.
    wait_for(lambda: _generated(run), what="the suggestions of the first run")
    suggestions = list(run.suggestions.order_by("position"))
    assert len(suggestions) == 3
    assert all(s.offline and s.category == Suggestion.Category.KNOWLEDGE for s in suggestions)
    assert {case.case_id for s in suggestions for case in s.cases.all()} == MISSING

    # 3. Apply them all through the dialog's two steps.
    urls = {
        name: reverse(f"suggestions:{name}", args=[agent.pk, run.pk]) for name in ("apply", "apply_confirm", "verify")
    }
    step_one = {"s-TOTAL_FORMS": "3", "s-INITIAL_FORMS": "3", "s-MIN_NUM_FORMS": "0", "s-MAX_NUM_FORMS": "1000"}
    for index, item in enumerate(suggestions):
        step_one.update({f"s-{index}-id": item.pk, f"s-{index}-selected": "on", f"s-{index}-title": item.title,
                         f"s-{index}-category": item.category, f"s-{index}-description": item.description})  # fmt: skip
    review = client.post(urls["apply"], step_one).content.decode()
    confirm = {
        "suggestions": [s.pk for s in suggestions],
        "base_version": agent.current_version_id,
        "fields_changed": ["knowledge"],
        "knowledge": html.unescape(re.search(r'name="knowledge"[^>]*>(.*?)</textarea>', review, re.S).group(1)),
    }
    assert client.post(urls["apply_confirm"], confirm).status_code == 302
    agent.refresh_from_db()
    version = agent.current_version
    assert version.number == 2 and "+1 555 0142 377" in version.knowledge
    assert run.suggestions.filter(state=Suggestion.State.APPLIED, applied_version=version).count() == 3

    # 4. Verify: every case of the same snapshot, against version 2.
    assert (
        client.post(urls["verify"], {"version": version.pk, "scope": "all", "request_key": "demo"}).status_code == 302
    )
    child = Run.objects.get(parent=run, purpose=Run.Purpose.VERIFY)
    child = wait_settled(child, worker=worker)

    assert child.agent_version == version and child.total == len(CASES)
    comparison = verify_comparison_get(parent=run, run=child)
    fixes = {CASES[change.parent_position][0] for change in comparison.fixes}
    regressions = {CASES[change.parent_position][0] for change in comparison.regressions}
    assert (run.passed, child.passed) == (7, 8)
    assert child.passed > run.passed
    assert fixes == {"phone-support", "nonprofit-discount"}
    # A real regression, and the reason Verify exists: the new phone passage ("Phone support is
    # available ... Team ...") now outranks the hours passage for "When is your support team available?".
    assert regressions == {"support-hours"}
    assert comparison.passed_after - comparison.passed_before == len(fixes) - len(regressions)

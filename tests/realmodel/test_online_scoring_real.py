"""Online scoring with SmolLM2-135M as the evaluator's judge on the real llama_cpp.server (issue 47).

Production traces are selected for scoring as the ingestion hook selects them, the scoring jobs
run here as a worker would run them (Celery eager), and the judge's preflight runs for real on the
calibration set the first time a score needs it. A 135M model is expected to fail it, as a big
model sometimes does: then no score may be counted, and neither the monitoring page nor the
evaluator's page may show a pass rate for that judge. Should some day the model pass, every score
it made must have passed the runs' output checks, or be marked not counted with its reason.

Run with `-m realmodel -s` to see what SmolLM2 did.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from monitoring.models import OnlineScore
from monitoring.online import reaper
from monitoring.online.scoring import PREFLIGHT_FAILED, evaluator_judge_config
from monitoring.online.selection import online_traces_select
from monitoring.online.series import online_score_series
from runs.judging.ask import instruction_texts
from runs.judging.checks import judge_answer_problem
from runs.judging.scoring import JUDGE_INSTRUCTIONS, JUDGE_RUBRIC
from tests.monitoring.factories import TraceFactory
from tests.monitoring.online_helpers import evaluator_for
from tests.realmodel.server import MODEL_ALIAS

# Transactional, as the preflight test next door: the product calls models outside transactions,
# and a test transaction held open through 15 slow calls would be ended by PostgreSQL's idle timeout.
pytestmark = [pytest.mark.realmodel, pytest.mark.django_db(transaction=True)]
# The preflight test's bounds: room for a judge's JSON with a few sentences, and time for each
# call on a loaded 2-core machine.
JUDGE_TOKENS = 160
JUDGE_SECONDS = 300.0
TRACES = [
    ("How do I reset my password?", "Open Settings, choose Security, then Reset password."),
    (
        "Can I get a refund 10 days after my first payment?",
        "Yes: a new subscription is refunded in full within 30 days.",
    ),
    ("What are your opening hours?", "Our parcels are shipped by courier within two working days."),
]


def _judge_row(html: str, name: str) -> str:
    """The monitoring page's row of the judges' table for this evaluator."""
    table = re.search(r'<table class="table mon-judge-table">(.*?)</table>', html, re.S)
    assert table, "the monitoring page shows no judges' table"
    rows = [row for row in re.findall(r"<tr>(.*?)</tr>", table.group(1), re.S) if name in row]
    assert len(rows) == 1, rows
    return rows[0]


@pytest.mark.timeout(3000)
def test_smollm2_judging_production_traces_is_reported_as_it_is(
    real_llm, agent, client_alice, settings, tasks_run_here, django_capture_on_commit_callbacks
):
    settings.EVALSITE_LLM_MAX_TOKENS = {**settings.EVALSITE_LLM_MAX_TOKENS, "judge": JUDGE_TOKENS}
    settings.EVALSITE_LLM_TIMEOUTS = {"judge": JUDGE_SECONDS}
    evaluator = evaluator_for(agent)
    assert evaluator_judge_config(evaluator).judge_model == f"openai/{MODEL_ALIAS}"
    traces = [TraceFactory(agent=agent, question=question, answer=answer) for question, answer in TRACES]

    # The hook's selection; its scoring jobs run here, the first one starting the judge's
    # preflight (which runs here too, on the real server) and waiting for it.
    with django_capture_on_commit_callbacks(execute=True):
        assert online_traces_select(trace_ids=[trace.pk for trace in traces]) == len(traces)
    config = evaluator_judge_config(evaluator)
    assert config.preflight_status in ("passed", "failed"), config.preflight
    details = config.preflight
    print("SmolLM2 online preflight:", config.preflight_status, details["reasons"])
    print("  items:", [(item["kind"], item["score"], item["problem"]) for item in details["items"]])
    # What waited for the preflight goes on once it has an outcome (the beat's pass).
    with django_capture_on_commit_callbacks(execute=True):
        reaper.preflight_waiting_resume()

    ran = [task for task, _, _ in tasks_run_here]
    # One preflight, for real; each score's job once, and once more for the one that waited for it.
    assert ran.count("runs.tasks.judge_config_preflight") == 1, ran
    assert ran.count("monitoring.tasks.online_score_run") == len(traces) + 1, ran
    scores = list(OnlineScore.objects.filter(evaluator=evaluator).order_by("pk"))
    for score in scores:
        print(f"  score {score.pk}: {score.status} {score.score} {score.passed} {score.error or score.reasoning!r}")
    assert len(scores) == len(traces) and all(score.judge_config == config for score in scores)
    series = online_score_series(agent=agent, since=timezone.now() - timedelta(hours=1))
    (line,) = series.lines
    page = client_alice.get(reverse("monitoring:page", args=[agent.pk])).content.decode()
    evaluator_page = client_alice.get(reverse("monitoring:evaluator", args=[agent.pk, evaluator.pk])).content.decode()
    row = _judge_row(page, evaluator.name)

    if config.preflight_status == "failed":
        assert details["reasons"] and details["in_place"] < details["total"], details
        assert [(s.status, s.error, s.score, s.passed) for s in scores] == [
            (OnlineScore.Status.SKIPPED, PREFLIGHT_FAILED, None, None)
        ] * len(traces)
        # No judge call was made for a score: the preflight's calls are the only ones spent.
        assert sum(score.tokens for score in scores) == 0
        # The series counts nothing and shows no rate for this judge configuration.
        assert (line.judge_config, line.scored, line.passed, line.pass_rate, line.mean_score) == (
            config,
            0,
            0,
            None,
            None,
        )
        assert line.not_counted == {"skipped": len(traces)} and series.not_counted == {"skipped": len(traces)}
        assert all(bucket.pass_rate is None and bucket.mean_score is None for bucket in line.buckets)
        # The monitoring page: 0 scored, "–" for the rate and the mean, the skips not counted,
        # and neither chart draws a point.
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        assert [cell.strip() for cell in cells[:3]] == ["0", "–", "–"], cells
        assert f"{len(traces)} skipped" in cells[-1] and "%" not in row
        assert page.count("Nothing in this period.") >= 2  # the pass-rate and mean-score charts
        assert "<circle" not in page.split('id="chart-pass-title"')[1].split("</figure>")[0]
        # The evaluator's page says why, and shows no verdict.
        assert "Preflight failed" in evaluator_page and PREFLIGHT_FAILED in evaluator_page
        assert "This judge scores no production traffic" in evaluator_page
        assert 'badge-success">Pass<' not in evaluator_page and 'badge-fail">Fail<' not in evaluator_page
        return

    # The preflight passed: what was counted passed the runs' checks; the rest says why not.
    instructions = instruction_texts(
        JUDGE_INSTRUCTIONS, JUDGE_RUBRIC, {**evaluator.scoring, "pass_threshold": config.threshold}
    )
    for score in scores:
        if score.status == OnlineScore.Status.SCORED:
            assert 0 <= score.score <= 10 and score.passed == (score.score >= config.threshold)
            problem = judge_answer_problem(score=score.score, reasoning=score.reasoning, instructions=instructions)
            assert problem is None, (problem, score.reasoning)
        else:
            assert score.status in (OnlineScore.Status.UNUSABLE, OnlineScore.Status.ERROR), score.status
            assert score.error and score.score is None and score.passed is None
    counted = [score for score in scores if score.status == OnlineScore.Status.SCORED]
    assert line.scored == len(counted) and line.passed == sum(1 for score in counted if score.passed)
    assert "Preflight passed" in evaluator_page
    if not counted:
        assert line.pass_rate is None and "%" not in row

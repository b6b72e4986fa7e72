"""Online scoring on a real Celery worker (issue 47, point 6): a worker killed (SIGKILL, with its
pool) while its judge calls are in flight loses no score and makes none twice: its heartbeat
stops, the reaper takes back the scores it held (their leases still fresh) and sends again those
it may have held unstarted, and another worker makes each exactly once, long before the shipped
120 s timeouts."""

import time

import pytest
from django.db.models import Q

from monitoring.models import OnlineScore
from monitoring.online import reaper
from monitoring.online.selection import online_traces_select
from tests.monitoring.factories import TraceFactory
from tests.monitoring.online_helpers import evaluator_for, preflighted
from tests.waiting import wait_for

pytestmark = pytest.mark.worker

TRACES = 6


def _in_flight(fake) -> set[str]:
    return {r.trace["online_score"] for r in fake.requests if "online_score" in r.trace and r.seq_out is None}


def test_a_worker_killed_mid_scoring_loses_no_score_and_makes_none_twice(celery_worker, fake_llm, agent, settings):
    # The shipped timeouts: the killed worker's scores are taken back by its heartbeat, not by them.
    settings.EVALSITE_STALE_CLAIM_SECONDS = settings.EVALSITE_STALE_QUEUE_SECONDS = 120
    fake_llm.add_rule(
        task="judge", contains="ZX-ORDER", delay=2.5, json={"score": 9, "reasoning": "Correct and complete."}
    )
    evaluator = evaluator_for(agent)
    preflighted(fake_llm, evaluator)
    traces = [TraceFactory(agent=agent, question=f"Where is ZX-ORDER {n}?") for n in range(TRACES)]
    first = celery_worker(concurrency=2)

    assert online_traces_select(trace_ids=[trace.pk for trace in traces]) == TRACES
    # Both of its processes busy with a judge call (2.5 s each): no other score is started before the kill.
    killed = wait_for(lambda: len(_in_flight(fake_llm)) == 2 and _in_flight(fake_llm), what="two judge calls in flight")
    first.kill()
    assert not OnlineScore.objects.filter(status="scored", pk__in=[int(pk) for pk in killed]).exists()
    killed_at = time.monotonic()
    celery_worker(concurrency=2)

    def all_scored() -> bool:
        reaper.stale_scores_resend()  # what beat does every few seconds
        return not OnlineScore.objects.filter(~Q(status="scored"), evaluator=evaluator).exists()

    # The heartbeat's TTL (5 s), a new worker's start and the judge calls: well within a minute.
    wait_for(all_scored, timeout=60, interval=1, what="every score made after the kill")
    print(f"\nonline scoring after a killed worker: {TRACES} scores made {time.monotonic() - killed_at:.1f} s after it")

    scores = list(OnlineScore.objects.filter(evaluator=evaluator))
    assert len(scores) == TRACES and {score.trace_id for score in scores} == {trace.pk for trace in traces}
    assert {(score.status, score.score, score.passed) for score in scores} == {("scored", 9, True)}
    for score in scores:
        asked = fake_llm.count("judge", online_score=score.pk)
        # Once each, and once more only for a score whose judge call the kill cut off.
        assert asked == (2 if str(score.pk) in killed else 1), (score.pk, asked, killed)

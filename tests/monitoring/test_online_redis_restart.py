"""Online scoring through a Redis restart (issue 47, point 6): Redis dies mid-scoring and comes
back empty, every queued scoring message lost; the reaper sends the pending scores again from the
database, at once from the worker's recorded broker loss rather than after the shipped 120 s
timeouts, and each is made exactly once."""

import time

import pytest
import redis

from monitoring.models import OnlineScore
from monitoring.online import reaper
from monitoring.online.selection import online_traces_select
from tests.broker import waiting
from tests.chaos.conftest import own_redis  # noqa: F401  (fixture)
from tests.monitoring.factories import TraceFactory
from tests.monitoring.online_helpers import evaluator_for, preflighted
from tests.waiting import wait_for

pytestmark = [pytest.mark.chaos, pytest.mark.worker]

# Four rounds of the shipped worker's processes (4): some messages still wait in Redis when it goes.
TRACES = 16


def test_a_restarted_redis_loses_no_score_and_makes_none_twice(celery_worker, fake_llm, agent, settings, own_redis):  # noqa: F811
    # The shipped timeouts (issue 48): the worker records its lost broker connection
    # (evalsite/workers.py broker_lost_record) and online scoring's reaper (monitoring/online/
    # reaper.py) takes back at once the scores Celery ended and sends again those whose message
    # Redis lost, as runs' reaper does for cases: nothing here waits out EVALSITE_STALE_*_SECONDS.
    settings.EVALSITE_STALE_CLAIM_SECONDS = settings.EVALSITE_STALE_QUEUE_SECONDS = 120
    fake_llm.add_rule(
        task="judge", contains="ZX-PARCEL", delay=1, json={"score": 9, "reasoning": "Correct and complete."}
    )
    evaluator = evaluator_for(agent)
    preflighted(fake_llm, evaluator)
    traces = [TraceFactory(agent=agent, question=f"Where is ZX-PARCEL {n}?") for n in range(TRACES)]
    worker = celery_worker(concurrency=settings.WORKER_CONCURRENCY, env={"REDIS_URL": own_redis.url})

    online_traces_select(trace_ids=[trace.pk for trace in traces])
    scores = OnlineScore.objects.filter(evaluator=evaluator)
    wait_for(lambda: scores.filter(status="scored").count() >= 2, timeout=60, what="two scores made")
    client = redis.Redis.from_url(own_redis.url)
    assert waiting(client) >= 1  # messages still queued: the restart loses them
    client.close()

    own_redis.kill()
    wait_for(lambda: "Connection to broker lost" in worker.read_log(), timeout=60, what="the worker to lose Redis")
    own_redis.start()  # same port, empty
    restarted = time.monotonic()

    def all_scored() -> bool:
        reaper.stale_scores_resend()  # what beat does every few seconds
        return scores.filter(status="scored").count() == TRACES

    wait_for(all_scored, timeout=60, interval=1, what="every score made after the restart")
    in_flight_again = sum(fake_llm.count("judge", online_score=score.pk) - 1 for score in scores)
    print(f"\nonline scoring through a Redis restart (concurrency {settings.WORKER_CONCURRENCY}): "
          f"{TRACES} scores made {time.monotonic() - restarted:.1f} s after Redis was back, "
          f"{in_flight_again} judge call(s) made again")  # fmt: skip

    assert worker.process.poll() is None, worker.read_log()[-4000:]
    assert {(score.status, score.score) for score in scores} == {("scored", 9)}
    assert sorted(score.trace_id for score in scores) == sorted(trace.pk for trace in traces)
    for score in scores:
        # Once each; twice only for a score whose judge call was in flight when Redis went.
        assert 1 <= fake_llm.count("judge", online_score=score.pk) <= 2
    assert in_flight_again <= settings.WORKER_CONCURRENCY  # at most the calls the worker's processes had in hand

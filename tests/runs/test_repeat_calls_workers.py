"""The run page counts exactly the calls the model received (issue 48): a case a lane only
claimed ahead, then handed back or took up again, is not a call the agent was asked again.

Real Celery workers on Redis against the fake model server, which counts every request it
receives. Each of the run's three lanes hangs in its first agent call while it holds the
case it claimed ahead; then the worker, or its pool children, is killed.
"""

import re
import signal
import socket

import psutil
import pytest

from agents.models import Agent
from evalsite import workers
from runs import selectors, services
from runs.models import Result, Run
from runs.reports import exporters
from tests.runs.conftest import wait_settled
from tests.waiting import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.chaos]

CASES = 9


def _lanes_hang_holding_a_case_ahead(fake_llm, make_dataset, alice, celery_worker):
    fake_llm.set_latency(0.2)
    fake_llm.add_rule(task="agent", hang=True, times=3)  # each lane's first case
    dataset = make_dataset(CASES, kind=Agent.Kind.LLM)
    worker = celery_worker(concurrency=3)
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)

    def held() -> bool:
        hanging = [r for r in fake_llm.requests if r.task == "agent" and r.seq_out is None]
        running = Result.objects.filter(run=run, status=Result.Status.RUNNING)
        return len(hanging) == 3 and running.count() == 6  # three in hand, three claimed ahead

    wait_for(held, what="three lanes hanging in their agent call, each holding a case claimed ahead")
    return run, worker


def _assert_shown_equals_received(run: Run, fake_llm, client) -> None:
    results = list(Result.objects.filter(run=run))
    assert len(results) == CASES
    for result in results:
        received = fake_llm.count(task="agent", run=run.pk, case=result.pk)
        assert result.attempts == received, f"result {result.pk}: {result.attempts} attempts, {received} calls"
    again = fake_llm.count(task="agent", run=run.pk) - CASES
    assert again == 3  # the three cases in hand when the fault struck, nothing else
    assert selectors.run_repeats(run=run).total == again
    assert exporters.run_export_data(run)["run"]["repeat_calls"]["total"] == again
    page = client.get(f"/agents/{run.agent_id}/runs/{run.pk}/").content.decode()
    assert re.search(r"Agent asked again (\d+) time", page).group(1) == str(again)


def test_a_killed_worker_counts_only_the_cases_its_lanes_had_asked(
    celery_worker, fake_llm, make_dataset, alice, client_alice
):
    run, first = _lanes_hang_holding_a_case_ahead(fake_llm, make_dataset, alice, celery_worker)

    first.kill()  # the worker and its pool, as an OOM killer would
    workers.workers_end(host=socket.gethostname(), pid=first.process.pid)  # as runstack records it
    services.run_reap()
    second = celery_worker(concurrency=3, beat=True)
    run = wait_settled(run, worker=second)

    assert run.status == Run.Status.COMPLETED and run.passed == CASES
    _assert_shown_equals_received(run, fake_llm, client_alice)


def test_killed_pool_children_count_only_the_cases_their_lanes_had_asked(
    celery_worker, fake_llm, make_dataset, alice, client_alice
):
    run, worker = _lanes_hang_holding_a_case_ahead(fake_llm, make_dataset, alice, celery_worker)

    # Celery delivers each lane's message again (late acks, reject on worker lost), with its
    # token: the lane's new process takes up the case in hand and the one it claimed ahead.
    for child in psutil.Process(worker.process.pid).children():
        child.send_signal(signal.SIGKILL)
    run = wait_settled(run, worker=worker)

    assert run.status == Run.Status.COMPLETED and run.passed == CASES
    _assert_shown_equals_received(run, fake_llm, client_alice)

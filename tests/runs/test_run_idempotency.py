"""http agents get a stable Idempotency-Key per (run, case, repeat, variant) and the attempt number."""

from datetime import timedelta

import pytest
from django.utils import timezone

from agents.models import Agent, AgentVersion
from runs import services
from runs.engine import case as engine
from runs.engine import claims
from runs.models import Result
from tests.agents.test_adapters import agent_server  # noqa: F401  (fixture)
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db


def _http_run(make_dataset, alice, url: str, cases: int = 2, **dataset):
    ds = make_dataset(cases, kind=Agent.Kind.HTTP, version={"http_url": url}, dataset=dataset or None)
    return services.run_start(agent=ds.agent, dataset=ds, user=alice)


def test_a_reexecuted_case_carries_the_same_key_and_the_next_attempt(
    make_dataset,
    alice,
    no_llm,
    settings,
    agent_server,  # noqa: F811
):
    run = _http_run(make_dataset, alice, agent_server.url, cases=1)
    result = Result.objects.get(run=run)
    # A worker claims the case and asks the agent, then dies before saving (kill -9).
    claimed, _ = claims.result_claim(result.pk, result.token)
    engine.execute(claimed, run, AgentVersion.objects.get(pk=run.agent_version_id))
    old = timezone.now() - timedelta(seconds=settings.EVALSITE_STALE_CLAIM_SECONDS + 1)
    Result.objects.filter(pk=result.pk).update(claimed_at=old)
    assert services.run_reap() == 1  # the reaper takes it up again with a new token

    drive(run)

    first, second = agent_server.headers
    assert first["Idempotency-Key"] == second["Idempotency-Key"]
    assert first["Idempotency-Key"] == f"evalsite-run{run.pk}-case{result.case_id}-repeat0-variant0"
    assert (first["X-Evalsite-Attempt"], second["X-Evalsite-Attempt"]) == ("1", "2")
    assert Result.objects.get(pk=result.pk).attempts == 2


def test_each_case_and_repeat_has_its_own_key(make_dataset, alice, no_llm, agent_server):  # noqa: F811
    run = _http_run(make_dataset, alice, agent_server.url, cases=2, number_of_requests=2)
    drive(run)
    keys = [headers["Idempotency-Key"] for headers in agent_server.headers]
    assert len(keys) == 4 and len(set(keys)) == 4
    assert {headers["X-Evalsite-Attempt"] for headers in agent_server.headers} == {"1"}


def test_the_run_page_counts_reexecutions(client_alice, make_dataset, alice, no_llm, agent_server):  # noqa: F811
    run = _http_run(make_dataset, alice, agent_server.url, cases=2)
    drive(run)
    url = f"/agents/{run.agent_id}/runs/{run.pk}/"
    assert "asked again" not in client_alice.get(url).content.decode()
    Result.objects.filter(run=run).update(attempts=2)  # results from before causes were recorded
    assert "Agent asked again 2 times: 2 after an unrecorded cause" in client_alice.get(url).content.decode()

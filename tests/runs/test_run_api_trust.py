"""The runs API says what a run's figures leave out: abstentions ("Needs a judge model"), unusable
judge answers, answers cut at their token limit, and a judge that failed preflight."""

import pytest

from tests.factories import DatasetFactory
from tests.runs.review_helpers import CaseSpec, build_run
from tests.runs.test_run_api import auth  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db
CUT = [{"call": "judge", "limit": 400}]


def test_the_run_its_status_and_its_results_carry_the_new_fields(client, auth, agent):  # noqa: F811
    run = build_run(
        agent=agent,
        dataset=DatasetFactory(agent=agent),
        cases=[
            CaseSpec(repeats=[("pass", 9.0)], cut=CUT),
            CaseSpec(repeats=[("abstained", None)]),
            CaseSpec(repeats=[("error", None)], error_kind="judge_unusable", error="Placeholder reasoning."),
        ],
        judge_failed_preflight=True,
    )
    body = client.get(f"/api/runs/{run.pk}", **auth).json()
    assert (body["abstained"], body["judge_failed_preflight"]) == (1, True)
    assert body["trust"]["judge_unusable"] == 1
    assert body["trust"]["cut"] == [
        {"call": "judge", "limit": 400, "count": 1, "setting": "EVALSITE_LLM_MAX_TOKENS_JUDGE"}
    ]
    assert body["trust"]["notes"][0] == "The judge failed preflight: its scores are not trustworthy."
    results = body["results"]
    assert [r["status"] for r in results] == ["pass", "abstained", "error"]
    assert results[0]["cut"] == CUT and results[2]["error_kind"] == "judge_unusable"
    assert results[1]["score"] is None

    status = client.get(f"/api/runs/{run.pk}/status", **auth).json()
    assert (status["abstained"], status["judge_failed_preflight"]) == (1, True)

"""Online evaluators in the JSON API (issue 47, point 7): CRUD through the same services as the
pages, each score with its judge configuration, alerts; another team's agent is a 404."""

import pytest
from django.utils import timezone

from accounts.services import api_token_create
from monitoring.models import Alert, OnlineEvaluator, OnlineScore
from monitoring.online.scoring import evaluator_judge_config
from tests.monitoring.factories import OnlineEvaluatorFactory, TraceFactory

pytestmark = pytest.mark.django_db
JSON = "application/json"
BODY = {
    "name": "Helpfulness",
    "sampling_rate": 0.2,
    "daily_cost_cap": "3.50",
    "filters": {"service": "support-bot", "errors_only": True},
    "scoring": {"evaluation_criteria": "Correct and polite.", "pass_threshold": 8},
    "alert_below": 0.6,
    "alert_window": 10,
}


@pytest.fixture
def auth(alice):
    return {"HTTP_AUTHORIZATION": f"Bearer {api_token_create(user=alice, name='ci')[1]}"}


def test_create_read_update_and_delete(client, auth, agent, fake_llm):
    created = client.post(f"/api/agents/{agent.pk}/evaluators", BODY, content_type=JSON, **auth)

    assert created.status_code == 201, created.json()
    body = created.json()
    assert (body["name"], body["sampling_rate"], body["daily_cost_cap"]) == ("Helpfulness", 0.2, "3.50")
    assert body["filters"] == {"service": "support-bot", "errors_only": True}
    assert body["judge"]["judge_model"] == "openai/fake-judge" and body["preflight_state"] in ("unchecked", "running")
    url = f"/api/agents/{agent.pk}/evaluators/{body['id']}"
    assert client.get(url, **auth).json()["name"] == "Helpfulness"

    patched = client.patch(url, {"sampling_rate": 0.5}, content_type=JSON, **auth)
    assert patched.status_code == 200 and patched.json()["sampling_rate"] == 0.5
    assert patched.json()["name"] == "Helpfulness"  # left out: unchanged
    disabled = client.post(f"{url}/enable", {"enabled": False}, content_type=JSON, **auth)
    assert disabled.json()["enabled"] is False

    assert client.delete(url, **auth).status_code == 204
    assert not OnlineEvaluator.objects.exists()


def test_bad_settings_are_a_422_naming_the_field(client, auth, agent):
    url = f"/api/agents/{agent.pk}/evaluators"

    bad_rate = client.post(url, {**BODY, "sampling_rate": 3}, content_type=JSON, **auth)
    bad_filter = client.post(url, {**BODY, "filters": {"colour": "red"}}, content_type=JSON, **auth)
    bad_judge = client.post(url, {**BODY, "scoring": {"temperature": 2}}, content_type=JSON, **auth)
    no_name = client.post(url, {"sampling_rate": 0.1}, content_type=JSON, **auth)

    assert [r.status_code for r in (bad_rate, bad_filter, bad_judge, no_name)] == [422] * 4
    assert bad_rate.json()["detail"][0]["loc"] == ["body", "payload", "sampling_rate"]
    assert "Unknown filter colour" in bad_filter.json()["detail"][0]["msg"]
    assert "Unknown judge setting temperature" in bad_judge.json()["detail"][0]["msg"]
    assert not OnlineEvaluator.objects.exists()


def test_scores_list_with_their_judge_configuration(client, auth, agent, fake_llm):
    evaluator = OnlineEvaluatorFactory(agent=agent)
    config = evaluator_judge_config(evaluator)
    trace = TraceFactory(agent=agent)
    OnlineScore.objects.create(
        evaluator=evaluator, judge_config=config, trace=trace, status="scored", score=9, passed=True,
        reasoning="Right.", scored_at=timezone.now(),
    )  # fmt: skip
    OnlineScore.objects.create(
        evaluator=evaluator, trace=TraceFactory(agent=agent), status="unusable", error="Judge answer unusable: x"
    )

    scores = client.get(f"/api/agents/{agent.pk}/evaluators/{evaluator.pk}/scores", **auth).json()["items"]
    scored = client.get(f"/api/agents/{agent.pk}/online-scores?status=scored", **auth).json()["items"]

    assert len(scores) == 2
    assert [(s["status"], s["otel_trace_id"], s["judge_config"]["fingerprint"]) for s in scored] == [
        ("scored", trace.otel_trace_id, config.fingerprint)
    ]


def test_alerts_list(client, auth, agent, fake_llm):
    evaluator = OnlineEvaluatorFactory(agent=agent)
    config = evaluator_judge_config(evaluator)
    Alert.objects.create(evaluator=evaluator, judge_config=config, pass_rate=0.4, window=10, threshold=0.6)
    Alert.objects.create(
        evaluator=evaluator, judge_config=config, pass_rate=0.5, window=10, threshold=0.6, resolved_at=timezone.now()
    )

    every = client.get(f"/api/agents/{agent.pk}/alerts", **auth).json()["items"]
    open_ones = client.get(f"/api/agents/{agent.pk}/alerts?open=true", **auth).json()["items"]

    assert len(every) == 2 and [a["pass_rate"] for a in open_ones] == [0.4]
    assert open_ones[0]["judge_config"]["id"] == config.pk


def test_another_teams_agent_is_a_404(client, auth, other_team):
    stranger = OnlineEvaluatorFactory(agent__team=other_team)
    base = f"/api/agents/{stranger.agent_id}"

    assert client.get(f"{base}/evaluators", **auth).status_code == 404
    assert client.post(f"{base}/evaluators", BODY, content_type=JSON, **auth).status_code == 404
    assert client.delete(f"{base}/evaluators/{stranger.pk}", **auth).status_code == 404
    assert client.get(f"{base}/alerts", **auth).status_code == 404
    assert OnlineEvaluator.objects.filter(pk=stranger.pk).exists()


def test_no_token_is_a_401(client, agent):
    assert client.get(f"/api/agents/{agent.pk}/evaluators").status_code == 401

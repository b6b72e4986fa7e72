"""The online evaluators' pages (issue 47, point 3): create, edit, enable, disable and delete an
evaluator of one agent; its judge's preflight state and today's spend are shown."""

from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from monitoring.models import OnlineEvaluator, OnlineScore
from monitoring.online.scoring import PREFLIGHT_FAILED, evaluator_judge_config
from runs.services.preflight import judge_config_preflight
from tests.monitoring.factories import OnlineEvaluatorFactory, TraceFactory

pytestmark = pytest.mark.django_db

FORM = {
    "name": "Helpfulness",
    "enabled": "on",
    "scope": "trace",
    "idle_minutes": "30",
    "sampling_percent": "25",
    "daily_cost_cap": "5.00",
    "service": "support-bot",
    "attribute_filters": "deployment.environment=prod\ngen_ai.request.model~mini",
    "tags": "vip, eu",
    "feedback": "negative",
    "latency_over_ms": "",
    "errors_only": "",
    "evaluation_criteria": "Answers the customer's question correctly.",
    "acceptance_criteria": "",
    "rejection_criteria": "Promises a refund.",
    "judge_model": "",
    "judge_prompt": "",
    "pass_threshold": "8",
    "judge_resamples": "",
    "alert_below_percent": "70",
    "alert_window": "20",
    "alert_webhook": "https://hooks.example.com/evalsite",
    "alert_email": "oncall@example.com",
}


def _url(name, agent, evaluator=None):
    return reverse(f"monitoring:{name}", args=[agent.pk] + ([evaluator.pk] if evaluator else []))


def test_an_evaluator_is_created_from_the_form(
    client_alice, agent, alice, fake_llm, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as sent:
        response = client_alice.post(_url("evaluator_create", agent), FORM)

    evaluator = OnlineEvaluator.objects.get(agent=agent)
    assert response.status_code == 302 and response["Location"] == _url("evaluator", agent, evaluator)
    assert (evaluator.name, evaluator.sampling_rate, evaluator.daily_cost_cap) == ("Helpfulness", 0.25, Decimal("5"))
    assert evaluator.filters == {
        "service": "support-bot",
        "attributes": [
            {"key": "deployment.environment", "op": "equals", "value": "prod"},
            {"key": "gen_ai.request.model", "op": "contains", "value": "mini"},
        ],
        "tags": ["vip", "eu"],
        "feedback": "negative",
    }
    assert evaluator.scoring == {
        "evaluation_criteria": "Answers the customer's question correctly.",
        "rejection_criteria": "Promises a refund.",
        "pass_threshold": 8,
    }
    assert (evaluator.alert_below, evaluator.alert_email, evaluator.created_by) == (0.7, "oncall@example.com", alice)
    assert len(sent) == 1  # its judge's preflight, started at once


def test_bad_input_is_shown_on_the_form_and_nothing_saved(client_alice, agent, fake_llm):
    response = client_alice.post(
        _url("evaluator_create", agent), {**FORM, "sampling_percent": "140", "attribute_filters": "no separator"}
    )

    assert response.status_code == 422
    text = response.content.decode()
    assert "less than or equal to 100" in text and "write key=value or key~value" in text
    assert not OnlineEvaluator.objects.exists()


def test_a_second_evaluator_with_the_same_name_is_refused(client_alice, agent, fake_llm):
    OnlineEvaluatorFactory(agent=agent, name="Helpfulness")

    response = client_alice.post(_url("evaluator_create", agent), FORM)

    assert response.status_code == 422 and "already has an evaluator named" in response.content.decode()


def test_an_evaluator_with_no_judge_model_says_it_cannot_score_production(client_alice, agent, settings):
    # The offline reference scorer needs an expected answer; production traffic has none.
    settings.EVALSITE_LLM_MODEL = settings.EVALSITE_JUDGE_MODEL = ""
    evaluator = OnlineEvaluatorFactory(agent=agent)

    text = client_alice.get(_url("evaluator", agent, evaluator)).content.decode()

    assert "No judge model" in text and "Needs a judge model" in text
    assert "no preflight needed" not in text


def test_the_page_shows_the_judges_preflight_state_and_todays_spend(client_alice, agent, fake_llm):
    evaluator = OnlineEvaluatorFactory(agent=agent, daily_cost_cap=Decimal("2.00"))
    fake_llm.add_rule(task="judge", json={"score": 5, "reasoning": "Some of it is right and some is not."})
    config = judge_config_preflight(config=evaluator_judge_config(evaluator))
    OnlineScore.objects.create(
        evaluator=evaluator, judge_config=config, trace=TraceFactory(agent=agent), status="skipped",
        error=PREFLIGHT_FAILED, scored_at=timezone.now(), cost=Decimal("0.25"),
    )  # fmt: skip

    response = client_alice.get(_url("evaluator", agent, evaluator))

    text = response.content.decode()
    assert response.status_code == 200
    assert "Preflight failed" in text and "scores no production traffic" in text
    assert "$0.25" in text and "$2.00" in text
    assert PREFLIGHT_FAILED in text


def test_the_list_shows_each_evaluator(client_alice, agent, fake_llm):
    OnlineEvaluatorFactory(agent=agent, name="Tone", sampling_rate=0.1, filters={"errors_only": True})

    response = client_alice.get(_url("evaluators", agent))

    assert response.status_code == 200 and "Tone" in response.content.decode()
    assert "10% of errors only" in response.content.decode()


def test_an_evaluator_is_edited(client_alice, agent, fake_llm):
    evaluator = OnlineEvaluatorFactory(agent=agent)

    response = client_alice.post(_url("evaluator_update", agent, evaluator), {**FORM, "name": "Accuracy"})

    evaluator.refresh_from_db()
    assert response.status_code == 302 and evaluator.name == "Accuracy" and evaluator.sampling_rate == 0.25


def test_the_edit_form_starts_from_the_evaluators_settings(client_alice, agent, fake_llm):
    client_alice.post(_url("evaluator_create", agent), FORM)
    evaluator = OnlineEvaluator.objects.get()

    text = client_alice.get(_url("evaluator", agent, evaluator)).content.decode()

    assert "deployment.environment=prod\ngen_ai.request.model~mini" in text
    assert 'value="vip, eu"' in text and 'value="25.0"' in text


def test_disable_and_enable(client_alice, agent, fake_llm):
    evaluator = OnlineEvaluatorFactory(agent=agent)

    client_alice.post(_url("evaluator_enable", agent, evaluator), {"enabled": "0"})
    evaluator.refresh_from_db()
    assert not evaluator.enabled
    response = client_alice.post(_url("evaluator_enable", agent, evaluator), {"enabled": "1", "next": "list"})

    evaluator.refresh_from_db()
    assert evaluator.enabled and evaluator.swept_until is not None  # starts at the traces from now on
    assert response["Location"] == _url("evaluators", agent)


def test_delete(client_alice, agent):
    evaluator = OnlineEvaluatorFactory(agent=agent)

    response = client_alice.post(_url("evaluator_delete", agent, evaluator))

    assert response.status_code == 302 and not OnlineEvaluator.objects.exists()


def test_another_teams_evaluator_is_a_404(client_charlie, agent):
    evaluator = OnlineEvaluatorFactory(agent=agent)

    assert client_charlie.get(_url("evaluator", agent, evaluator)).status_code == 404
    assert client_charlie.post(_url("evaluator_delete", agent, evaluator)).status_code == 404
    assert OnlineEvaluator.objects.exists()


def test_another_agents_evaluator_is_a_404(client_alice, agent, team):
    stranger = OnlineEvaluatorFactory(agent__team=team)

    assert client_alice.get(_url("evaluator", agent, stranger)).status_code == 404


def test_the_wrong_method_is_a_405(client_alice, agent):
    evaluator = OnlineEvaluatorFactory(agent=agent)

    assert client_alice.get(_url("evaluator_delete", agent, evaluator)).status_code == 405
    assert client_alice.post(_url("evaluator", agent, evaluator)).status_code == 405

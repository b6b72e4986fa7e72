"""Errors a team meets with Anthropic, each readable on Test connection or on the case's card,
naming Anthropic: bad key, unknown model, rate limits, overload, context, refusal, a refused
schema keyword."""

from __future__ import annotations

import pytest

from agents.models import Agent
from evalsite.llm import probe, structured
from runs import services
from runs.models import Result
from tests.providers.anthropic_server import AnthropicServer
from tests.providers.product_walk import aim, assert_clean, probe_answers
from tests.providers.test_anthropic import ANTHROPIC
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db


@pytest.fixture
def server(anthropic_server, settings, monkeypatch) -> AnthropicServer:
    aim(settings, monkeypatch, anthropic_server, ANTHROPIC)
    settings.EVALSITE_JUDGE_MODEL = ""  # one model: one report
    settings.EVALSITE_LLM_RETRIES = 2
    return anthropic_server


def _connection_error(server) -> str:
    probe_answers(server)
    (report,) = probe.model_test_all()
    assert not report.ok
    return report.error


def _case_error(server, make_dataset, alice) -> str:
    dataset = make_dataset(1, kind=Agent.Kind.LLM)
    run = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))
    result = Result.objects.get(run=run)
    return result.error


def test_a_bad_key(server):
    server.api_key = "sk-ant-another-key"
    error = _connection_error(server)
    assert error.startswith("Anthropic rejected the API key (401)"), error
    assert f"(tried {server.root}/v1/messages)" in error


def test_a_model_it_does_not_serve(server, settings):
    settings.EVALSITE_LLM_MODEL = "anthropic/claude-sonnet-9"
    error = _connection_error(server)
    assert error.startswith("Anthropic has no model or deployment by that name (404): model: claude-sonnet-9"), error


def test_rate_limited_with_retry_after_waits_and_retries(server, make_dataset, alice):
    server.add_rule(task="judge", status=429, error="Number of request tokens has exceeded your per-minute rate limit",
                    headers={"retry-after": "1"}, times=1)  # fmt: skip
    server.add_rule(task="judge", json={"score": 8, "reasoning": "Right."})
    error = _case_error(server, make_dataset, alice)
    assert error == ""
    first, second = [r for r in server.requests if r.task == "judge"]
    assert first.status == 429 and second.status == 200
    assert second.time_in - first.time_out >= 0.9  # it waited what retry-after said
    assert_clean(server)


def test_rate_limited_until_it_gives_up_says_so_on_the_card(server, make_dataset, alice):
    server.add_rule(task="agent", status=429, error="Number of requests has exceeded your rate limit",
                    headers={"retry-after": "0"})  # fmt: skip
    error = _case_error(server, make_dataset, alice)
    assert "Anthropic rate limited the request (429) after 3 attempts" in error, error
    assert server.count(task="agent") == 3


def test_overloaded(server, make_dataset, alice):
    server.add_rule(task="agent", status=529, error="Overloaded")
    error = _case_error(server, make_dataset, alice)
    assert "Anthropic is overloaded (529) after 3 attempts: Overloaded" in error, error


def test_a_prompt_longer_than_the_context_window(server):
    server.set_context_window(10)
    error = _connection_error(server)
    assert error.startswith("The conversation is longer than the model's context window"), error
    assert server.requests[0].response is not None


def test_a_refusal(server, make_dataset, alice):
    server.add_rule(task="agent", reply="", finish_reason="content_filter")
    error = _case_error(server, make_dataset, alice)
    assert "Anthropic refused to answer" in error, error


def test_a_schema_keyword_it_refuses_steps_down_the_ladder_and_is_remembered(server):
    server.refuse_schema_keywords("enum")
    probe_answers(server)
    (report,) = probe.model_test_all()
    assert report.ok and report.json_detail == probe.SCHEMA_MODES["json_object"], report
    assert structured.remembered(ANTHROPIC.chat_model) == "json_object"
    asked = len(server.wire)
    probe.model_test_all()
    # The second test asks for JSON once, straight in the remembered way.
    json_calls = [r for r in server.wire[asked:] if r.path == "/v1/messages" and "output_format" in (r.body or {})]
    assert json_calls == []

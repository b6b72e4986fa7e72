"""Errors a team meets with Azure OpenAI, each readable on Test connection or on the case's card,
naming Azure OpenAI: bad key, unknown deployment, rate limits, overload, context, the content filter."""

from __future__ import annotations

import pytest

from agents.models import Agent
from evalsite.llm import probe, structured
from runs import services
from runs.models import Result
from tests.providers.azure_server import AzureServer
from tests.providers.product_walk import aim, assert_clean, probe_answers
from tests.providers.test_azure import AZURE
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db


@pytest.fixture
def server(azure_server, settings, monkeypatch) -> AzureServer:
    aim(settings, monkeypatch, azure_server, AZURE)
    settings.EVALSITE_JUDGE_MODEL = ""  # one model: one report
    settings.EVALSITE_EMBEDDING_MODEL = ""
    settings.EVALSITE_LLM_RETRIES = 2
    return azure_server


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
    server.api_key = "another-key"
    error = _connection_error(server)
    assert error.startswith("Azure OpenAI rejected the API key (401)"), error
    assert f"(tried {server.root}/openai/deployments/evalsite-gpt-4o/chat/completions)" in error


def test_a_model_it_does_not_serve(server, settings):
    settings.EVALSITE_LLM_MODEL = "azure/evalsite-gpt-5"
    error = _connection_error(server)
    assert error.startswith("Azure OpenAI has no model or deployment by that name (404)"), error
    assert "The API deployment for this resource does not exist" in error


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
    assert "Azure OpenAI rate limited the request (429) after 3 attempts" in error, error
    assert server.count(task="agent") == 3


def test_overloaded(server, make_dataset, alice):
    server.add_rule(task="agent", status=503, error="The service is temporarily unable to process your request.")
    error = _case_error(server, make_dataset, alice)
    assert "Azure OpenAI is overloaded (503) after 3 attempts" in error, error


def test_a_prompt_longer_than_the_context_window(server):
    server.set_context_window(10)
    error = _connection_error(server)
    assert error.startswith("The conversation is longer than the model's context window"), error
    assert server.requests[0].response is not None


def test_an_answer_the_content_filter_stopped(server, make_dataset, alice):
    server.add_rule(task="agent", reply="", finish_reason="content_filter")
    error = _case_error(server, make_dataset, alice)
    assert "Azure OpenAI refused to answer" in error, error


def test_a_prompt_the_content_filter_caught(server, make_dataset, alice):
    server.add_rule(task="agent", status=400, code="content_filter")
    error = _case_error(server, make_dataset, alice)
    assert "Azure OpenAI refused the request under its content policy" in error, error


def test_a_schema_keyword_it_refuses_steps_down_the_ladder_and_is_remembered(server):
    server.refuse_schema_keywords("enum")
    probe_answers(server)
    (report,) = probe.model_test_all()
    assert report.ok and report.json_detail == probe.SCHEMA_MODES["json_object"], report
    assert structured.remembered(AZURE.chat_model) == "json_object"
    # Straight from json_schema to json_object: llama.cpp's form is not Azure's.
    formats = [(r.body or {}).get("response_format", {}).get("type") for r in server.wire if r.body]
    assert formats.count("json_schema") == 1 and formats.count("json_object") == 1, formats
    assert_clean(server)

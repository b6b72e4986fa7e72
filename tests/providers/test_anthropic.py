"""The product through Anthropic's Messages API (tests/providers/anthropic_server.py), by
litellm's own anthropic/ route: the README's recipe, then every error a team meets."""

from __future__ import annotations

import pytest

from tests.providers.anthropic_server import API_KEY, AnthropicServer
from tests.providers.product_walk import (
    Provider,
    aim,
    walk_generation,
    walk_preflight_and_run,
    walk_scenario,
    walk_suggestions_and_rewrite,
    walk_test_connection,
)

pytestmark = pytest.mark.django_db

ANTHROPIC = Provider(
    name="Anthropic",
    chat_model="anthropic/claude-sonnet-5",
    judge_model="anthropic/claude-haiku-5-5",
    api_key=API_KEY,
)


@pytest.fixture
def server(anthropic_server, settings, monkeypatch) -> AnthropicServer:
    aim(settings, monkeypatch, anthropic_server, ANTHROPIC)
    return anthropic_server


def test_test_connection(server):
    walk_test_connection(server, ANTHROPIC)
    # litellm asks for JSON with the structured-outputs beta's output_format, and the tool as a tool.
    assert server.legacy and all(r.headers.get("anthropic-version") for r in server.wire if r.path == "/v1/messages")


def test_preflight_a_run_with_a_tool_using_agent_and_its_summary(server, make_dataset, alice):
    run = walk_preflight_and_run(server, ANTHROPIC, make_dataset, alice)
    # claude-haiku-5-5 at $0.10/$0.50 per million tokens, claude-sonnet-5 at $2/$10: costs follow them.
    judge = [r for r in server.requests if r.task == "judge" and r.trace.get("run") == str(run.pk)]
    assert judge


def test_a_scenario_with_the_simulated_user(server, make_dataset, alice):
    walk_scenario(server, make_dataset, alice)


def test_ai_generation(server, agent):
    walk_generation(server, agent)


def test_suggestions_and_applys_rewrite(server, make_dataset, alice):
    walk_suggestions_and_rewrite(server, make_dataset, alice)

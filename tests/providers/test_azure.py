"""The product through Azure OpenAI's deployments API (tests/providers/azure_server.py), by
litellm's own azure/ route: the README's recipe."""

from __future__ import annotations

import pytest

from tests.providers.azure_server import API_KEY, API_VERSION, AzureServer
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

AZURE = Provider(
    name="Azure OpenAI",
    chat_model="azure/evalsite-gpt-4o",
    judge_model="azure/evalsite-gpt-4o-mini",
    embedding_model="azure/evalsite-embed",
    api_key=API_KEY,
    env={"AZURE_API_VERSION": API_VERSION},
)


@pytest.fixture
def server(azure_server, settings, monkeypatch) -> AzureServer:
    aim(settings, monkeypatch, azure_server, AZURE)
    return azure_server


def test_test_connection(server):
    walk_test_connection(server, AZURE)
    chats = [r for r in server.wire if r.path.endswith("/chat/completions")]
    assert chats and all(r.query["api-version"] == API_VERSION for r in chats)


def test_preflight_a_run_with_a_tool_using_agent_and_its_summary(server, make_dataset, alice):
    walk_preflight_and_run(server, AZURE, make_dataset, alice)


def test_a_scenario_with_the_simulated_user(server, make_dataset, alice):
    walk_scenario(server, make_dataset, alice)


def test_ai_generation(server, agent):
    walk_generation(server, agent)


def test_suggestions_and_applys_rewrite(server, make_dataset, alice):
    walk_suggestions_and_rewrite(server, make_dataset, alice)

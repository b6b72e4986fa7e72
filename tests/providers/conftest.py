"""Fixtures for the provider servers: one server per session, reset for each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.providers.anthropic_server import AnthropicServer
from tests.providers.azure_server import AzureServer
from tests.runs.conftest import _clear_worker_caches, make_dataset  # noqa: F401  (fixtures)


@pytest.fixture(scope="session")
def anthropic_server() -> Iterator[AnthropicServer]:
    server = AnthropicServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def azure_server() -> Iterator[AzureServer]:
    server = AzureServer().start()
    yield server
    server.stop()

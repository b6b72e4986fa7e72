"""A throwaway OpenAI-compatible HTTP server on the loopback interface, for the worker's warm-up.

The Celery worker's main process makes its first real completions against it before the
pool forks (evalsite/celery.py), so what litellm's first real call loads is loaded once and
shared by every pool child. It answers every POST with one fixed chat completion.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER = json.dumps(
    {
        "id": "chatcmpl-warm-up",
        "object": "chat.completion",
        "created": 0,
        "model": "warm-up",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": '{"ok": true}'}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(ANSWER)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(ANSWER)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  (the base class's name)
        pass


@contextmanager
def loopback_server() -> Iterator[str]:
    """The base URL (…/v1) of a server on 127.0.0.1 and a free port, stopped on exit."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, name="warm-up-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

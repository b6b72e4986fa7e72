"""`manage.py model_test`: Settings' Test connection from a terminal (make local-model runs it).

The same calls as the button (evalsite.llm.probe), run here rather than on a worker, and
the report stored where the Settings page reads it. Exits 1 when a model failed its test,
2 when no model is configured.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from evalsite import embedded_redis
from evalsite.llm.probe import model_test_all

# The report's fields worth a line each, in this order; others (added later) follow them.
SHOWN_FIRST = ("model", "ok", "latency_ms", "tokens_per_second", "json_detail", "tools", "embeddings", "error")


class Command(BaseCommand):
    help = "Test the connection to every configured model, as Settings' Test connection does."

    def handle(self, *args: Any, **options: Any) -> None:
        with _redis():
            reports = model_test_all()
        if not reports:
            raise CommandError("No model is configured: set EVALSITE_LLM_MODEL (see .env.example).", returncode=2)
        failed = False
        for report in reports:
            failed = failed or not report.ok
            status = self.style.SUCCESS("Connected") if report.ok else self.style.ERROR("Connection failed")
            self.stdout.write(f"{report.label}: {status}")
            for name, value in _fields(asdict(report)):
                self.stdout.write(f"  {name}: {value}")
        if failed:
            raise CommandError("A model failed its connection test (see above).", returncode=1)


@contextmanager
def _redis() -> Iterator[None]:
    """The calls share the model's slots and store their report in Redis: the running stack's
    (REDIS_URL, or `make run`'s embedded one), else an embedded one for the command's length."""
    socket_path = settings.EMBEDDED_REDIS_SOCKET
    if settings.REDIS_URL or embedded_redis.socket_in_use(socket_path):
        yield
        return
    socket_path.parent.mkdir(parents=True, exist_ok=True)
    process = embedded_redis.start(socket_path)
    try:
        yield
    finally:
        embedded_redis.stop(process)


def _fields(report: dict[str, Any]) -> list[tuple[str, Any]]:
    skip = {"purpose", "tested_at", "same_as"}
    names = [*SHOWN_FIRST, *(name for name in report if name not in SHOWN_FIRST)]
    return [
        (name, report[name]) for name in names if name in report and name not in skip and report[name] not in ("", None)
    ]

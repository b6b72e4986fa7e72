"""OTLP ingestion under load: spans as the SDK's OTLP/HTTP exporter sends them, POSTed to /v1/traces
of a running console at increasing rates, on SQLite and PostgreSQL (issue 47, item 6).

    .venv/bin/python bench/bench_ingest.py [--postgres postgres://postgres@127.0.0.1:5432/postgres]
                                           [--rates 1000,2000,3000,4000] [--seconds 6]

The payloads are the exporter's own bytes: traces made with the OpenTelemetry SDK (a turn span, two
GenAI chat spans with their messages and token usage as opentelemetry-instrumentation-openai-v2
records them, a tool span; a quarter of the questions carry an email, so masking works), encoded
by opentelemetry-exporter-otlp-proto-common in batches of 512 spans (the BatchSpanProcessor's
default). The console is gunicorn as the image starts it (evalsite.wsgi, 2 sync workers as
.env.example's WEB_CONCURRENCY=2, access log on), DEBUG off, on a fresh SQLite file or a fresh
PostgreSQL database (made and dropped here).

Each rate is open loop: a batch is due every 512/rate seconds, sent by 8 client threads (a late
one goes at once); latency is from sending to the answer. Then "max": 4 threads as fast as they
can. Reported per rate: accepted spans/s, p50/p95 latency, refused requests; per database: rows
written (traces, spans, conversations); and the floor, the same payloads only parsed with
opentelemetry-proto (ExportTraceServiceRequest.FromString) in this process, and decoded into rows
(monitoring.ingest.otlp.spans_of).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from common import free_port, stop_embedded_redis, use_embedded_redis_unless_set, wait_for_port  # noqa: E402
from run_all import bench_result  # noqa: E402

BATCH = 512
SPANS_PER_TRACE = 4
THREADS = 8
WORKERS = 2


def make_payloads(count: int) -> list[bytes]:
    """`count` ExportTraceServiceRequest bodies of BATCH spans each, as the exporter encodes them."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "support-bot"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench")
    payloads = []
    for number in range(count * BATCH // SPANS_PER_TRACE):
        question = f"Where is my order A-{number}?" + (" Mail me at ann@example.com." if number % 4 == 0 else "")
        with tracer.start_as_current_span("support turn") as turn:
            turn.set_attribute("session.id", f"session-{number // 3}")
            turn.set_attribute("user.id", f"customer-{number % 100}")
            for step in range(2):
                with tracer.start_as_current_span("chat fake-agent") as chat:
                    chat.set_attributes(
                        {
                            "gen_ai.operation.name": "chat",
                            "gen_ai.provider.name": "openai",
                            "gen_ai.request.model": "fake-agent",
                            "gen_ai.response.model": "fake-agent",
                            "gen_ai.input.messages": json.dumps(
                                [
                                    {
                                        "role": "system",
                                        "parts": [{"type": "text", "content": "You are the support bot."}],
                                    },
                                    {"role": "user", "parts": [{"type": "text", "content": question}]},
                                ]
                            ),
                            "gen_ai.output.messages": json.dumps(
                                [
                                    {
                                        "role": "assistant",
                                        "parts": [{"type": "text", "content": f"Order A-{number} shipped ({step})."}],
                                        "finish_reason": "stop",
                                    }
                                ]
                            ),
                            "gen_ai.usage.input_tokens": 40 + step,
                            "gen_ai.usage.output_tokens": 12,
                        }
                    )
                if step == 0:
                    with tracer.start_as_current_span("execute_tool get_order_status") as tool:
                        tool.set_attributes(
                            {
                                "gen_ai.operation.name": "execute_tool",
                                "gen_ai.tool.name": "get_order_status",
                                "gen_ai.tool.call.id": f"call_{number}",
                            }
                        )
    spans = exporter.get_finished_spans()
    for start in range(0, len(spans) - BATCH + 1, BATCH):
        payloads.append(encode_spans(spans[start : start + BATCH]).SerializeToString())
    provider.shutdown()
    return payloads


def floor(payloads: list[bytes]) -> tuple[float, float]:
    """Spans per second parsed by opentelemetry-proto alone, and decoded into rows."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from monitoring.ingest import otlp

    started = time.perf_counter()
    messages = [ExportTraceServiceRequest.FromString(body) for body in payloads]
    parsed = time.perf_counter() - started
    started = time.perf_counter()
    for message in messages:
        otlp.spans_of(message)
    decoded = time.perf_counter() - started
    spans = len(payloads) * BATCH
    return spans / parsed, spans / (parsed + decoded)


class Sender:
    """Sends payloads to the endpoint; keeps each answer's status and latency."""

    def __init__(self, url: str, key: str, payloads: list[bytes]) -> None:
        self.url, self.key, self.payloads = url, key, payloads
        self.next = 0
        self.lock = threading.Lock()

    def take(self, count: int) -> list[bytes]:
        with self.lock:
            taken = self.payloads[self.next : self.next + count]
            self.next += count
        if len(taken) < count:
            raise SystemExit("not enough payloads made: raise the count")
        return taken

    def run(self, bodies: list[bytes], due: list[float], threads: int) -> tuple[list[float], int, float]:
        import httpx

        latencies: list[float] = []
        refused = 0
        index = iter(range(len(bodies)))
        lock = threading.Lock()
        started = time.perf_counter()
        ended = [started]

        def work() -> None:
            nonlocal refused
            headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {self.key}"}
            with httpx.Client(timeout=60) as client:
                while True:
                    with lock:
                        number = next(index, None)
                    if number is None:
                        return
                    wait = started + due[number] - time.perf_counter()
                    if wait > 0:
                        time.sleep(wait)
                    sent = time.perf_counter()
                    response = client.post(self.url, content=bodies[number], headers=headers)
                    done = time.perf_counter()
                    with lock:
                        latencies.append(done - sent)
                        ended[0] = max(ended[0], done)
                        if response.status_code != 200:
                            refused += 1

        workers = [threading.Thread(target=work) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        return latencies, refused, ended[0] - started


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[18] if len(values) >= 2 else values[0]


def one_database(args: argparse.Namespace, database_url: str) -> None:
    """Migrate, start gunicorn on `database_url`, send, report (run in a process of its own)."""
    os.environ.update({"DATABASE_URL": database_url, "DEBUG": "false", "DJANGO_SETTINGS_MODULE": "evalsite.settings"})
    use_embedded_redis_unless_set()
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from accounts.models import Team
    from monitoring.models import Conversation, Span, Trace
    from monitoring.services import ingestion_key_create

    call_command("migrate", verbosity=0)
    vendor = connection.vendor
    team = Team.objects.create(name=f"Bench ingest {time.time_ns()}")
    key = ingestion_key_create(team=team, user=None, name="bench")[1]
    rates = [int(rate) for rate in args.rates.split(",")]
    needed = sum(max(THREADS, round(rate * args.seconds / BATCH)) for rate in rates) + args.max_requests + 4
    payloads = make_payloads(needed)
    parse_rate, decode_rate = floor(payloads)
    bench_result(f"ingest floor {vendor}: parse", round(parse_rate), "spans/s", "ExportTraceServiceRequest.FromString")
    bench_result(f"ingest floor {vendor}: parse+decode", round(decode_rate), "spans/s", "otlp.spans_of")

    port = free_port()
    log = open(Path(tempfile.mkdtemp(prefix="evalsite-bench-ingest-")) / "gunicorn.log", "w")
    command = [
        sys.executable, "-m", "gunicorn", "evalsite.wsgi:application", "--bind", f"127.0.0.1:{port}",
        "--workers", str(WORKERS), "--timeout", "60", "--graceful-timeout", "20",
        "--access-logfile", "-", "--error-logfile", "-", "--no-control-socket",
    ]  # fmt: skip
    web = subprocess.Popen(
        command, cwd=ROOT, env=os.environ.copy(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        wait_for_port(port, web, "gunicorn", timeout=60)
        sender = Sender(f"http://127.0.0.1:{port}/v1/traces", key, payloads)
        sender.run(sender.take(4), [0, 0, 0, 0], 2)  # warm both workers up
        print(f"{vendor}: load average {os.getloadavg()[0]:.2f}", flush=True)
        for rate in rates:
            count = max(THREADS, round(rate * args.seconds / BATCH))
            latencies, refused, elapsed = sender.run(
                sender.take(count), [i * BATCH / rate for i in range(count)], THREADS
            )
            accepted = (count - refused) * BATCH / elapsed
            note = f"offered {rate}/s, {count} requests of {BATCH} spans, {refused} refused"
            bench_result(f"ingest {vendor} at {rate} spans/s: accepted", round(accepted), "spans/s", note)
            bench_result(f"ingest {vendor} at {rate} spans/s: p50", round(statistics.median(latencies) * 1000), "ms")
            bench_result(f"ingest {vendor} at {rate} spans/s: p95", round(p95(latencies) * 1000), "ms")
        count = args.max_requests
        latencies, refused, elapsed = sender.run(sender.take(count), [0] * count, 4)
        note = f"4 senders back to back, {count} requests, {refused} refused"
        bench_result(f"ingest {vendor} max: accepted", round((count - refused) * BATCH / elapsed), "spans/s", note)
        bench_result(f"ingest {vendor} max: p95", round(p95(latencies) * 1000), "ms")
        rows = {
            "traces": Trace.objects.filter(team=team).count(),
            "spans": Span.objects.filter(trace__team=team).count(),
            "conversations": Conversation.objects.filter(team=team).count(),
        }
        sent = (sender.next - 4) * BATCH
        bench_result(
            f"ingest {vendor}: rows written", sum(rows.values()), "rows", f"{rows}; {sent} spans sent after warm-up"
        )
        print(f"{vendor}: load average {os.getloadavg()[0]:.2f}", flush=True)
    finally:
        os.killpg(web.pid, signal.SIGTERM)
        web.wait(timeout=20)
        stop_embedded_redis()


def _postgres_database(admin_url: str) -> tuple[str, str]:
    import psycopg

    name = f"evalsite_bench_ingest_{os.getpid()}"
    with psycopg.connect(admin_url, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return name, admin_url.rsplit("/", 1)[0] + "/" + name


def _drop(admin_url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", default=os.environ.get("BENCH_POSTGRES_URL", ""), help="an admin URL")
    parser.add_argument("--rates", default="1000,2000,3000,4000")
    parser.add_argument("--seconds", type=float, default=6)
    parser.add_argument("--max-requests", type=int, default=40)
    parser.add_argument("--only", default="", help=argparse.SUPPRESS)  # one database URL (the child)
    args = parser.parse_args()
    if args.only:
        one_database(args, args.only)
        return
    print(f"{os.cpu_count()} CPUs, load average {' '.join(f'{n:.2f}' for n in os.getloadavg())}", flush=True)
    forwarded = ["--rates", args.rates, "--seconds", str(args.seconds), "--max-requests", str(args.max_requests)]
    sqlite = f"sqlite:///{Path(tempfile.mkdtemp(prefix='evalsite-bench-ingest-')) / 'bench.sqlite3'}"
    subprocess.run([sys.executable, __file__, "--only", sqlite, *forwarded], check=True)
    if args.postgres:
        name, url = _postgres_database(args.postgres)
        try:
            subprocess.run([sys.executable, __file__, "--only", url, *forwarded], check=True)
        finally:
            _drop(args.postgres, name)


if __name__ == "__main__":
    main()

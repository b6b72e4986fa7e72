import gc
import inspect
import logging
import os
import sys
import time
from types import ModuleType

from celery import Celery
from celery.signals import (
    task_postrun,
    task_prerun,
    worker_before_create_process,
    worker_init,
    worker_shutdown,
    worker_shutting_down,
)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")


def _starting_a_worker() -> bool:
    """Whether this process is `celery ... worker` (web, beat and shells are not)."""
    program = sys.argv[0] if sys.argv else ""
    celery = os.path.basename(program) == "celery" or program.endswith(os.path.join("celery", "__main__.py"))
    return celery and "worker" in sys.argv[1:]


# A worker's start-up is imports (Celery, Django, then litellm in _preload_litellm) that make
# some 600,000 objects, and every burst of them ran the cyclic garbage collector over all the
# others: with it off until the warm-up is done, a worker's start-up took about a quarter
# less CPU (6.6 s instead of 9.1 s; bench/results/worker-startup-*.md). It is back on (after
# one collection) before the pool forks.
if _starting_a_worker():
    gc.disable()

logger = logging.getLogger(__name__)

app = Celery("evalsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# Celery's Django fixup closes every database connection before and after each task
# unless this is set, so each case task paid two fresh PostgreSQL connections (6-9 ms
# of a case's overhead, measured). Connections are instead kept by Django's own rules,
# as between web requests: CONN_MAX_AGE, health checks, and a connection that raised
# an error (a restarted database) dropped before the next task or retry.
app.conf.CELERY_DB_REUSE_MAX = 2**31


@task_prerun.connect
@task_postrun.connect
def _close_old_connections(sender: object = None, **kwargs: object) -> None:
    from django.db import close_old_connections

    if not getattr(getattr(sender, "request", None), "is_eager", False):  # as the fixup does
        close_old_connections()


@worker_shutting_down.connect
def _lanes_stop(**kwargs: object) -> None:
    # In the main process as a warm shutdown begins; the pool children see it before their
    # next case (evalsite/workers.py), so the worker waits for the cases in hand, no more.
    from evalsite import workers

    workers.shutdown_begin()


@worker_shutdown.connect
def _heartbeat_stop(**kwargs: object) -> None:
    from evalsite import workers

    workers.worker_stop()


@worker_init.connect
def _worker_init(**kwargs: object) -> None:
    """In the worker's main process, before it connects to the broker and forks its pool: the
    warm-up, then (a standby) the wait for its turn, then the heartbeat, so every pool child
    inherits the worker's identity and a standby is not counted as a live worker."""
    _preload_litellm()
    _standby_wait()
    from evalsite import workers

    workers.worker_start()


STANDBY_WARM = "standby: warmed up, waiting to take over"


def _standby_wait() -> None:
    """A standby worker (EVALSITE_WORKER_STANDBY_WAIT=1, started by `runstack` beside the
    worker) stops here, warmed up and not yet consuming, until a line on its stdin says the
    worker it stands in for is gone; it then goes on as that worker's successor, its start-up
    already paid (issue 48: a killed worker's successor took 6.6-8.0 s to start). Its stdin
    closed without that line (the launcher stopping or gone) ends it before it consumes."""
    if os.environ.get("EVALSITE_WORKER_STANDBY_WAIT") != "1":
        return
    from django.db import connections

    connections.close_all()  # a standby may wait for hours: no session held meanwhile
    print(f"{STANDBY_WARM} (pid {os.getpid()})", flush=True)
    if not sys.stdin.buffer.readline().strip():
        print("standby: dismissed before it took over", flush=True)
        os._exit(0)
    print(f"standby: taking over (pid {os.getpid()})", flush=True)


def _preload_litellm(**kwargs: object) -> None:
    """Import litellm once in the worker's main process, before the pool forks.

    The import takes seconds of CPU, and litellm's first completion imports more; done
    lazily, every pool child pays that on its first case at the same moment and a run's
    first window stalls. A mocked completion (no network) loads those modules too. The
    services the tasks import lazily (the engine, adapters, scorers) are loaded here too.

    What a child's first case still loaded on its own, each child again, is loaded here as
    well (_warm_up_first_case): memory a child allocates or writes lands on pages it then no
    longer shares, so each of these cost every child (bench/bench_worker_memory.py).
    """
    from django.core.cache import caches

    import datasets.services  # noqa: F401
    import runs.services  # noqa: F401
    import suggestions.services  # noqa: F401
    from evalsite import llm

    caches["default"]  # the cache backend (evalsite.cache): the gateway reads a model's identity in it

    try:
        llm.warm_up()
        _warm_up_first_case()
    except Exception:  # a warm-up must never stop the worker from starting
        logger.warning("litellm warm-up failed; the first cases will start slower", exc_info=True)
    finally:
        if not gc.isenabled():  # off for the start-up (above): on again, and what it left collected
            gc.enable()
            gc.collect()
    _freeze()


@worker_before_create_process.connect
def _freeze(**kwargs: object) -> None:
    """Keep the garbage collector off everything loaded so far: it lives as long as the worker.

    Called after the warm-up and again right before each pool child is forked, so what the
    worker's main process built after worker_init (the consumer, the pool) is frozen too, and
    no child's first collection writes to (and so copies) the pages it shares with the others.
    """
    gc.freeze()


def _warm_up_first_case() -> None:
    """What a case's first model calls load, without leaving this machine.

    One real chat completion and one with a JSON schema against a throwaway HTTP server on
    the loopback interface: the HTTP stack (httpcore, h11), litellm's response parsing, cost
    lookup and provider modules, and its cached SSL context (created once per process,
    shared by the children when made here). jsonschema (with its metaschemas) and the
    validator the judge's answers are checked with. Clients created for the throwaway
    server are closed and forgotten, so no child inherits their sockets.
    """
    from evalsite import llm
    from evalsite.llm.client import forget_clients, openai_client, unlogged
    from evalsite.worker_warmup import loopback_server

    llm.parse_json_answer('{"ok": true}', {"type": "object", "properties": {"ok": {"type": "boolean"}}})
    litellm = llm.litellm_module()  # the gateway imports litellm; its submodules are reached from it
    litellm.llms.custom_httpx.http_handler.get_ssl_configuration()  # cached for every HTTPS client
    with loopback_server() as base_url, unlogged():  # as the gateway's calls are made
        call = {"model": "openai/warm-up", "api_base": base_url, "api_key": "warm-up", "max_retries": 0, "timeout": 10}
        messages = [{"role": "user", "content": "warm-up"}]
        litellm.completion(messages=messages, **call)
        schema = {"name": "warm_up", "schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}
        # Through the gateway's own OpenAI client too (evalsite/llm/client.py openai_client, used
        # when a server and key are configured): the SDK's HTTP stack loads on its first request.
        client = openai_client(base_url, "warm-up", 10.0)
        litellm.completion(
            messages=messages, response_format={"type": "json_schema", "json_schema": schema}, client=client, **call
        )
        forget_clients()
    # litellm builds its provider config map (importing the modules of every provider it
    # maps) on the first model info lookup of a model it does not price, which its logging
    # thread does after a child's first call (unless unlogged() holds). A provider it does
    # not answer early for builds it.
    litellm.ProviderConfigManager.get_provider_chat_config(model="warm-up", provider=litellm.LlmProviders.ANTHROPIC)
    _logging_drained(litellm)
    cache = litellm.in_memory_llm_clients_cache
    for client in list(cache.cache_dict.values()):
        close = getattr(client, "close", None)
        if callable(close) and not inspect.iscoroutinefunction(close):
            close()
    cache.flush_cache()


def _logging_drained(litellm: ModuleType, timeout: float = 5.0) -> None:
    """Wait (bounded) until litellm's logging thread has handled the warm-up calls: a fork
    while it is importing or holding a lock would hand the children that state."""
    executor = litellm.litellm_core_utils.thread_pool_executor.executor
    slots, total = getattr(executor, "_pending_slots", None), getattr(executor, "_max_pending_tasks", None)
    deadline = time.monotonic() + timeout
    while slots is not None and getattr(slots, "_value", total) != total and time.monotonic() < deadline:
        time.sleep(0.01)

import gc
import logging
import os

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_init, worker_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")

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


@worker_init.connect
def _heartbeat_start(**kwargs: object) -> None:
    # Before the pool forks, so every pool child inherits the worker's identity.
    from evalsite import workers

    workers.worker_start()


@worker_shutdown.connect
def _heartbeat_stop(**kwargs: object) -> None:
    from evalsite import workers

    workers.worker_stop()


@worker_init.connect
def _preload_litellm(**kwargs: object) -> None:
    """Import litellm once in the worker's main process, before the pool forks.

    The import takes seconds of CPU, and litellm's first completion imports more; done
    lazily, every pool child pays that on its first case at the same moment and a run's
    first window stalls. A mocked completion (no network) loads those modules too. The
    services the tasks import lazily (the engine, adapters, scorers) are loaded here too.
    """
    import datasets.services  # noqa: F401
    import runs.services  # noqa: F401
    import suggestions.services  # noqa: F401
    from evalsite import llm

    try:
        llm.warm_up()
    except Exception:  # a warm-up must never stop the worker from starting
        logger.warning("litellm warm-up failed; the first cases will start slower", exc_info=True)
    # Everything loaded so far lives as long as the worker: keep the garbage collector off
    # it, so pool children don't copy those pages on their first collection.
    gc.freeze()

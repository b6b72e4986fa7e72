from celery import shared_task


@shared_task
def run_reap() -> None:
    """Re-queue stale work (filled in by the runs engine)."""

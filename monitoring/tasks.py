"""Celery entry points for monitoring: thin, idempotent, keyed by primary keys (docs/architecture.md,
"Where logic lives"). Late acks and a reaper: a worker killed mid-score, or a Redis restart, loses
no score and makes none twice (monitoring/online/reaper.py)."""

from celery import shared_task

from evalsite.tasks import DATABASE_RETRY


@shared_task(**DATABASE_RETRY)
def online_traces_select(trace_ids: list[int]) -> None:
    """Filters and sampling of freshly ingested traces (monitoring.online.traces_ingested)."""
    from monitoring.online.selection import online_traces_select

    online_traces_select(trace_ids=trace_ids)


@shared_task(**DATABASE_RETRY)
def online_score_run(score_id: int) -> None:
    """Judge one claimed score (monitoring/online/scoring.py)."""
    from monitoring.online.scoring import online_score_run

    online_score_run(score_id=score_id)


@shared_task(ignore_result=True)
def online_reap() -> None:
    """Beat: re-send stale claims, score what waited for its judge's preflight, sweep traces a lost
    hook message missed and pick idle conversations."""
    from monitoring.online.reaper import online_reap

    online_reap()


@shared_task(ignore_result=True, autoretry_for=(), max_retries=0)
def alert_deliver(alert_id: int) -> None:
    """Send an alert to its webhook and email; the outcome is recorded on the alert, never raised."""
    from monitoring.online.alerts import alert_deliver

    alert_deliver(alert_id=alert_id)


@shared_task(ignore_result=True)
def traces_retention() -> None:
    """Beat: delete traces older than their team's retention, in batches."""
    from monitoring.online.retention import traces_retention

    traces_retention()

"""What ingestion calls after it commits: cheap, and it never scores in the request."""

from __future__ import annotations

from evalsite.enqueue import after_commit
from monitoring.models import OnlineEvaluator


def traces_ingested(trace_ids: list[int]) -> None:
    """Traces were stored or updated (spans, or end-user feedback, came in): when an enabled
    per-trace evaluator of their agents exists (one query), send the selection job, which applies
    filters and sampling off the request (monitoring/online/selection.py). Call it again when
    feedback arrives for a trace, so a feedback filter sees it. Safe inside or outside a
    transaction: the message goes after commit."""
    ids = sorted({int(trace_id) for trace_id in trace_ids})
    if not ids:
        return
    wanted = OnlineEvaluator.objects.filter(
        enabled=True, scope=OnlineEvaluator.Scope.TRACE, agent__traces__id__in=ids
    ).exists()
    if not wanted:
        return
    from monitoring.tasks import online_traces_select as online_traces_select_task

    def send() -> None:
        online_traces_select_task.delay(ids)

    after_commit(send)  # outside a transaction it runs at once

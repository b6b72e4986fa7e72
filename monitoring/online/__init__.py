"""Online evaluators (issue 47): production traces scored by the same judges as runs.

`traces_ingested(trace_ids)` is the hook ingestion calls after it commits (monitoring/online/hooks.py).
"""

from monitoring.online.hooks import traces_ingested

__all__ = ["traces_ingested"]

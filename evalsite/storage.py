"""Deleting stored files (a leaf module: it imports no app).

Storage is not transactional, so a file goes only once its row is gone for good (callers
run this on commit) or when the transaction that would have kept it failed. A file that
cannot be deleted is logged and left behind, never an error: the rows are already gone,
and an orphaned file is harmless, while an exception would turn a finished delete into a
500 or a failed job.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.core.files.storage import default_storage

logger = logging.getLogger(__name__)


def stored_files_delete(names: Iterable[str | None]) -> None:
    """Delete each named file from the default storage; empty names are skipped."""
    for name in names:
        if not name:
            continue
        try:
            default_storage.delete(name)
        except OSError:
            logger.warning("Could not delete stored file %s", name, exc_info=True)

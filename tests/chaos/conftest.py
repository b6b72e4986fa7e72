"""Chaos tests share the run tests' helpers (dataset builder, worker-cache reset, polling)."""

from tests.runs.conftest import _clear_worker_caches, make_dataset  # noqa: F401  (fixtures)

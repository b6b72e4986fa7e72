"""Thin Celery entry points for datasets: load by primary key, call one service.

Each task has its service's name (datasets.extraction.services.dataset_extract,
datasets.generation.services.dataset_generate, datasets.jobs.dataset_reap) and imports
it inside its body, so loading this module (autodiscovery, datasets.jobs) loads no
service (docs/architecture.md, "Where logic lives").
"""

from typing import Any

from celery import Task, shared_task
from django.db import OperationalError


class _DatasetJob(Task):
    def on_failure(self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        # An error nobody planned for (a bug, a database gone for good) still settles the
        # dataset with a readable reason, so its page never says Extracting forever.
        from datasets.jobs import job_crashed

        dataset_id = kwargs.get("dataset_id", args[0] if args else None)
        if dataset_id is not None:
            job_crashed(task_name=self.name, dataset_id=dataset_id)


@shared_task(base=_DatasetJob, autoretry_for=(OperationalError,), retry_backoff=True, max_retries=2)
def dataset_extract(dataset_id: int) -> None:
    """Read an uploaded document's test cases."""
    from datasets.extraction.services import dataset_extract

    dataset_extract(dataset_id=dataset_id)


@shared_task(base=_DatasetJob, autoretry_for=(OperationalError,), retry_backoff=True, max_retries=2)
def dataset_generate(dataset_id: int) -> None:
    """Write a generated dataset's cases with the model."""
    from datasets.generation.services import dataset_generate

    dataset_generate(dataset_id=dataset_id)


@shared_task
def dataset_reap() -> None:
    """Periodic (beat): re-send extraction and generation jobs whose message was lost."""
    from datasets.jobs import dataset_reap

    dataset_reap()


class _RuleMapTask(Task):
    def on_failure(self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        # An error nobody planned for still settles the map, so the coverage page stops saying Mapping.
        from datasets.coverage import rule_map_fail

        map_id = kwargs.get("map_id", args[0] if args else None)
        if map_id is not None:
            rule_map_fail(map_id=map_id, reason="Mapping stopped because of an unexpected error. Try again.")


@shared_task(base=_RuleMapTask, autoretry_for=(OperationalError,), retry_backoff=True, max_retries=2)
def dataset_rule_map(map_id: int) -> None:
    """Map a dataset's cases to an agent version's rules with the model (datasets.coverage)."""
    from datasets.coverage import rule_map_execute

    rule_map_execute(map_id=map_id)


@shared_task
def dataset_rule_map_reap() -> int:
    """Fail rule maps whose worker died (beat)."""
    from datasets.coverage import rule_map_reap

    return rule_map_reap()

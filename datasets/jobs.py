"""The background jobs that fill a dataset: reading an upload and writing cases with AI.

Both kinds work the same way, so this module owns their plumbing; the work itself is
`datasets.extraction.services.dataset_extract` and `datasets.generation.services.dataset_generate`
(docs/architecture.md, "Dataset jobs"):

job_enqueue   send the job's task once the transaction commits (robust: a broker that is
              down leaves the dataset Extracting, and dataset_reap sends the job later)
job_claim     count this delivery in the database; None when there is nothing (more) to do
job_fail      Extracting -> Failed with a reason a QA person can act on
job_crashed   the same with the kind's plain reason, for an error nobody planned for
dataset_reap  send again the jobs whose message was lost
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from celery import Task
from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from datasets.models import Dataset
from datasets.tasks import dataset_extract as dataset_extract_task
from datasets.tasks import dataset_generate as dataset_generate_task
from evalsite.enqueue import enqueue_on_commit

# A Ready dataset getting more generated cases (coverage's "generate for uncovered rules",
# datasets.generation.services.dataset_generate_more) is a generation job whatever its source.
ADDING = Q(generation__has_key="more")


@dataclass(frozen=True)
class JobKind:
    source: str  # the Dataset.Source of the datasets this job fills
    task: Task
    related: str  # what the job reads with the dataset (select_related)
    gave_up: str  # the reason once EVALSITE_EXTRACT_MAX_ATTEMPTS deliveries were counted; {limit}
    unexpected_reason: str


EXTRACT = JobKind(
    source=Dataset.Source.UPLOAD,
    task=dataset_extract_task,
    related="agent",
    gave_up=(
        "Reading the file stopped the worker {limit} times, so Evalsite gave up. The file may be too large "
        "or too complex: split it, or save it in another format, and upload it again."
    ),
    unexpected_reason=(
        "Something went wrong on the server while reading the file. Try uploading it again; if it keeps "
        "failing, save it in another format (XLSX, CSV or PDF)."
    ),
)
GENERATE = JobKind(
    source=Dataset.Source.GENERATED,
    task=dataset_generate_task,
    related="agent__current_version",
    gave_up="Generation stopped the worker {limit} times, so Evalsite gave up. Try again with fewer test cases.",
    unexpected_reason=(
        "Generation stopped because of an unexpected error. Try again; if it happens again, tell your administrator."
    ),
)
KINDS = (EXTRACT, GENERATE)


def job_enqueue(kind: JobKind, dataset_id: int) -> None:
    """Send the job after commit. Callers have just put the dataset in Extracting."""
    enqueue_on_commit(kind.task, dataset_id)


def job_claim(kind: JobKind, dataset_id: int) -> Dataset | None:
    """Count this delivery in the database; None when there is nothing (more) to do.

    A conditional update: a redelivered message never works on a settled or deleted
    dataset. Late acks redeliver a task whose worker died with no retry count of their
    own, so a file that kills the worker every time would loop forever; past the limit
    the dataset fails instead (check 20 in docs/architecture.md).
    """
    limit = settings.EVALSITE_EXTRACT_MAX_ATTEMPTS
    mine = Q(source=kind.source) | ADDING if kind is GENERATE else Q(source=kind.source) & ~ADDING
    own = Dataset.objects.filter(mine, pk=dataset_id, status=Dataset.Status.EXTRACTING)
    claimed = own.filter(job_attempts__lt=limit).update(
        job_attempts=F("job_attempts") + 1, job_started_at=timezone.now()
    )
    if claimed:
        return Dataset.objects.select_related(kind.related).get(pk=dataset_id)
    _settle_failed(own, kind.gave_up.format(limit=limit))
    return None


def job_fail(*, dataset_id: int, reason: str) -> bool:
    """Extracting -> Failed with `reason`; False when the dataset had already settled or is gone."""
    return _settle_failed(Dataset.objects.filter(pk=dataset_id, status=Dataset.Status.EXTRACTING), reason)


def job_crashed(*, task_name: str, dataset_id: int) -> bool:
    """The task's on_failure: settle the dataset with its kind's plain reason (no traceback, no class name)."""
    kind = next(kind for kind in KINDS if kind.task.name == task_name)
    return job_fail(dataset_id=dataset_id, reason=kind.unexpected_reason)


def _settle_failed(datasets: QuerySet[Dataset], reason: str) -> bool:
    """Failed with `reason`; a dataset that was only getting more cases goes back to Ready instead,
    its cases kept, with the reason as its notice."""
    settled = False
    with transaction.atomic():
        for adding in datasets.filter(ADDING).select_for_update():
            adding.generation.pop("more", None)
            adding.status = Dataset.Status.READY
            adding.notice = f"Generating more test cases failed: {reason}"[:4000]
            adding.save(update_fields=["generation", "status", "notice", "updated_at"])
            settled = True
    failed = datasets.exclude(ADDING).update(
        status=Dataset.Status.FAILED, failure_reason=reason[:2000], notice="", updated_at=timezone.now()
    )
    return settled or bool(failed)


def dataset_reap() -> list[int]:
    """Send the job again for datasets stuck in Extracting; returns their ids.

    Late acks survive a killed worker, but not a flushed or restarted Redis: the message
    is gone and the dataset would say Extracting forever. Never-started jobs older than
    EVALSITE_STALE_QUEUE_SECONDS, and started ones past the hard task time limit, are sent
    again. A duplicate is harmless: the claim counts it and only one delivery saves.
    """
    now = timezone.now()
    queued_before = now - timedelta(seconds=settings.EVALSITE_STALE_QUEUE_SECONDS)
    started_before = now - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 60)
    # Keyed by the plain strings values_list gives back (a Source is equal to its value).
    kinds = {str(kind.source): kind for kind in KINDS}
    stale = Dataset.objects.filter(Q(source__in=list(kinds)) | ADDING, status=Dataset.Status.EXTRACTING).filter(
        Q(job_started_at__isnull=True, updated_at__lt=queued_before) | Q(job_started_at__lt=started_before)
    )
    rows = list(stale.values_list("pk", "source", "generation"))
    for dataset_id, source, generation in rows:
        (GENERATE if "more" in (generation or {}) else kinds[source]).task.delay(dataset_id)
    return [dataset_id for dataset_id, _, _ in rows]

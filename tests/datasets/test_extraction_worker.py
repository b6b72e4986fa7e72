"""The extraction job in a real Celery worker process, on Redis, against the test database."""

import pytest
from django.urls import reverse

from datasets.models import Dataset
from tests.datasets import files
from tests.datasets.extraction_helpers import media_root  # noqa: F401
from tests.waiting import wait_for

pytestmark = pytest.mark.worker


def wait_until_settled(dataset_id: int) -> Dataset:
    def settled() -> Dataset | None:
        dataset = Dataset.objects.get(pk=dataset_id)
        return dataset if dataset.is_settled else None

    return wait_for(settled, interval=0.3, what=f"dataset {dataset_id} to settle")


def test_uploads_are_extracted_by_a_worker_and_the_page_stops_polling(celery_worker, client_alice, agent):
    worker = celery_worker(concurrency=2)
    plan = files.xlsx_bytes(
        {"Plan": [["Title"], [], ["Question", "Expected answer"], ["One?", "1"], ["Two?", "2"], ["Three?", "3"]]}
    )
    locked = files.pdf_bytes([["Question: secret?", "Answer: yes"]], encrypt="pw")

    for name, data in (("plan.xlsx", plan), ("locked.pdf", locked)):
        response = client_alice.post(
            reverse("datasets:upload", args=[agent.pk]), {"name": name, "file": files.upload(name, data)}
        )
        assert response.status_code == 302, response.content.decode()[:500]
    ready_id, failed_id = Dataset.objects.order_by("pk").values_list("pk", flat=True)

    polling = client_alice.get(reverse("datasets:status", args=[agent.pk, ready_id]), HTTP_HX_REQUEST="true")
    review, failed = wait_until_settled(ready_id), wait_until_settled(failed_id)
    assert (review.status, review.cases.count()) == ("review", 0), worker.read_log()[-3000:]
    # The user confirms the suggested mapping; the worker then creates the cases.
    confirm = client_alice.post(
        reverse("datasets:mapping", args=[agent.pk, ready_id]),
        {"t0_include": "on", "t0_c1": "question", "t0_c2": "expected_answer"},
    )
    assert confirm.status_code == 302
    ready = wait_until_settled(ready_id)

    assert (ready.status, ready.cases.count(), ready.job_attempts) == ("ready", 3, 1), worker.read_log()[-3000:]
    assert [c.source_location for c in ready.cases.order_by("position")] == ["Plan row 4", "Plan row 5", "Plan row 6"]
    assert failed.status == "failed" and "encrypted" in failed.failure_reason
    assert polling.status_code in (200, 286)  # it may already have finished
    for dataset in (ready, failed):
        settled = client_alice.get(reverse("datasets:status", args=[agent.pk, dataset.pk]), HTTP_HX_REQUEST="true")
        assert settled.status_code == 286
        assert "hx-trigger" not in settled.content.decode()
    assert "Traceback" not in worker.read_log()

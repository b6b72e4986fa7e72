"""Generate with AI end to end: the job runs in a real Celery worker on Redis."""

import pytest

from datasets.generation.services import dataset_generate_create
from datasets.models import Dataset
from tests.factories import AgentFactory, MembershipFactory, TeamFactory, UserFactory
from tests.waiting import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

INVOICE = {
    "title": "Invoice INV-7",
    "document_context": "Customer invoice",
    "formal": {
        "kind": "invoice",
        "parties": [{"role": "Bill to", "name": "Globex"}],
        "line_items": {"columns": ["Description", "Amount"], "rows": [["Pro plan", "€49.00"]]},
        "totals": [{"label": "Total", "value": "€49.00"}],
    },
}


def test_generation_runs_in_a_real_worker_and_writes_cases_and_files(celery_worker, fake_llm, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"  # the worker inherits it (tests/worker.py)
    team = TeamFactory()
    user = MembershipFactory(team=team, user=UserFactory(username="gen-worker")).user
    agent = AgentFactory(team=team)
    serial = iter(range(1, 1000))

    def handler(request):
        cases = []
        for _ in range(int(request["messages"][-1]["content"].split("Write ")[1].split()[0])):
            n = next(serial)
            cases.append(
                {
                    "question": f"Case {n}: is invoice {n * 17} refundable after {n} days?",
                    "expected_answer": "Refunds are available within 30 days of purchase.",
                    "tests_rule": "R3",
                    "document": INVOICE if n == 1 else None,
                }
            )
        return {"json": {"cases": cases}}

    fake_llm.add_rule(task="generate", handler=handler)
    celery_worker(concurrency=1)

    dataset = dataset_generate_create(agent=agent, user=user, name="Worker generated", count=12, instructions="")

    def settled() -> bool:
        dataset.refresh_from_db()
        return dataset.is_settled

    wait_for(settled, interval=0.3, what=f"dataset {dataset.pk} to settle")

    assert dataset.status == Dataset.Status.READY, dataset.failure_reason
    assert dataset.cases.count() == 12
    assert fake_llm.count(task="generate", dataset=dataset.pk) == 2
    document = dataset.documents.get()
    assert (document.file_type, document.generated) == ("pdf", True)
    assert (tmp_path / "media" / document.file.name).read_bytes().startswith(b"%PDF-")
    assert dataset.job_attempts == 1

"""An expected model failure in a worker: recorded on the job, logged in one line, no traceback."""

import pytest

from suggestions.models import SuggestionGeneration
from suggestions.services import suggestion_generation_start
from tests.runs.conftest import wait_for

pytestmark = pytest.mark.worker


def test_a_model_failure_in_the_worker_logs_no_traceback(celery_worker, failing_run, fake_llm):
    fake_llm.add_rule(task="suggest", status=401)
    worker = celery_worker(concurrency=1)

    suggestion_generation_start(run=failing_run)

    def failed() -> bool:
        return SuggestionGeneration.objects.filter(run=failing_run, status=SuggestionGeneration.Status.FAILED).exists()

    wait_for(failed, timeout=60, what="the suggestion job to fail")
    wait_for(lambda: "raised expected" in worker.read_log(), timeout=30, what="the worker to log the failure")
    log = worker.read_log()
    assert "The model provider rejected the API key (401)." in log
    assert "Traceback" not in log
    assert "UnpickleableExceptionWrapper" not in log
    assert fake_llm.count(task="suggest") == 1

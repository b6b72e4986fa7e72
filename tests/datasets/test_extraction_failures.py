"""Every way a document can fail: the dataset ends Failed with a readable reason and no cases,
the worker survives, and hostile content never leaks into the database."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from datasets.extraction.services import dataset_extract
from datasets.models import Dataset, Document, TestCase
from tests.broker import take, waiting
from tests.datasets import files
from tests.datasets.extraction_helpers import extract, media_root, uploaded_dataset  # noqa: F401

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def assert_failed(dataset: Dataset, *words: str) -> None:
    assert dataset.status == "failed"
    for word in words:
        assert word in dataset.failure_reason
    assert dataset.cases.count() == 0
    # Readable, not a traceback or an exception class name (check 29 in docs/architecture.md).
    for leak in ("Traceback", "Error:", "Exception", "errno"):
        assert leak not in dataset.failure_reason


def test_encrypted_pdf_fails_saying_it_is_encrypted(agent):
    data = files.pdf_bytes([["Question: secret?", "Answer: yes"]], encrypt="hunter2")

    assert_failed(extract(agent, "locked.pdf", data), "The PDF is encrypted")


def test_image_only_pdf_fails_saying_it_has_no_text(agent):
    assert_failed(extract(agent, "scan.pdf", files.image_only_pdf()), "no text layer", "OCR")


def test_zip_bomb_that_skipped_the_upload_form_fails_fast(agent):
    # Stored directly, as if by an API or an older release: the job checks the archive again.
    dataset = extract(agent, "bomb.xlsx", files.zip_bomb_xlsx(inflated_mb=1024))

    assert_failed(dataset, "zip bomb")


def test_zip_bomb_check_reads_only_the_directory_and_stays_small(tmp_path):
    """Peak memory of the check, measured in a fresh child process (the test process's own memory would hide it)."""
    path = tmp_path / "bomb.xlsx"
    path.write_bytes(files.zip_bomb_xlsx(inflated_mb=1024))
    script = (
        "import json, re\n"
        "from datasets.extraction.validation import validate_file\n"
        "from datasets.extraction.errors import FileRejected\n"
        f"handle = open({str(path)!r}, 'rb')\n"
        "try:\n"
        f"    validate_file('bomb.xlsx', handle, {path.stat().st_size}, max_bytes=10_000_000)\n"
        "    reason = ''\n"
        "except FileRejected as exc:\n"
        "    reason = exc.reason\n"
        # VmHWM: this process's peak RSS (ru_maxrss would include the forked parent's, kept over exec).
        "peak = int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))\n"
        "print(json.dumps({'reason': reason, 'peak_kb': peak}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    answer = json.loads(result.stdout)

    assert "zip bomb" in answer["reason"]
    assert answer["peak_kb"] < 60 * 1024  # the archive inflates to 1 GB


@pytest.mark.parametrize(
    "name, data",
    [
        ("xxe.xlsx", lambda: files.entity_xlsx(files.XXE_DOCTYPE, "xxe")),
        ("laughs.xlsx", lambda: files.entity_xlsx(files.LAUGHS_DOCTYPE, "lol9")),
        ("xxe.docx", lambda: files.entity_docx(files.XXE_DOCTYPE, "xxe")),
        ("laughs.docx", lambda: files.entity_docx(files.LAUGHS_DOCTYPE, "lol9")),
    ],
)
def test_xml_entities_are_refused_and_never_expanded(agent, name, data):
    dataset = extract(agent, name, data())

    assert_failed(dataset, "XML entity")
    stored = [dataset.failure_reason, *Document.objects.values_list("text", flat=True)]
    stored += [f"{q} {a}" for q, a in TestCase.objects.values_list("question", "expected_answer")]
    assert not any("root:x:" in text or "lollollol" in text for text in stored)


@pytest.mark.parametrize(
    "name, data",
    [
        ("xxe.xlsx", lambda: files.entity_xlsx(files.XXE_DOCTYPE, "xxe")),
        ("laughs.xlsx", lambda: files.entity_xlsx(files.LAUGHS_DOCTYPE, "lol9")),
        ("xxe.docx", lambda: files.entity_docx(files.XXE_DOCTYPE, "xxe")),
        ("laughs.docx", lambda: files.entity_docx(files.LAUGHS_DOCTYPE, "lol9")),
    ],
)
def test_the_parsers_themselves_never_expand_entities(tmp_path, name, data):
    """Behind the DOCTYPE check: defusedxml (openpyxl) and resolve_entities=False (python-docx)."""
    from datasets.extraction import sandbox
    from datasets.extraction.errors import ExtractionFailed

    path = tmp_path / name
    path.write_bytes(data())
    request = {"mode": "extract", "path": str(path), "file_type": name.rsplit(".", 1)[1], "max_cases": 500}
    try:
        answer = json.dumps(sandbox.run(request, timeout=30, memory_mb=768))
    except ExtractionFailed as exc:
        answer = exc.reason
    assert "root:x:" not in answer
    assert "lollollol" not in answer


def test_a_parse_over_the_time_limit_fails_the_dataset_not_the_worker(agent, settings):
    settings.EVALSITE_PARSE_TIMEOUT = 0.05
    data = files.xlsx_bytes({"Cases": [["Question", "Answer"], *files.qa_rows(50)]})

    assert_failed(extract(agent, "slow.xlsx", data), "took longer than the 0.05 second limit")


def test_a_parse_over_the_memory_limit_fails_the_dataset(agent, settings):
    settings.EVALSITE_PARSE_MEMORY_MB = 30
    data = files.xlsx_bytes({"Cases": [["Question", "Answer"], *files.qa_rows(50)]})

    assert_failed(extract(agent, "hungry.xlsx", data), "memory")


@pytest.mark.parametrize(
    "error",
    [
        MemoryError(),
        ImportError("/usr/lib/python3.11/lib-dynload/math.so: failed to map segment from shared object"),
        OSError(12, "Cannot allocate memory"),
    ],
)
def test_running_out_of_memory_while_loading_a_parser_is_reported_as_memory(error):
    # Under the address-space limit, importing a parser's extension module can fail before
    # any parsing starts; the user must still be told it was the memory limit.
    from datasets.extraction.child import _failure

    answer = _failure(error)

    assert answer["kind"] == "memory"
    assert "more memory" in answer["reason"]


def test_a_job_that_killed_its_worker_n_times_gives_up(agent, settings):
    settings.EVALSITE_EXTRACT_MAX_ATTEMPTS = 3
    dataset = uploaded_dataset(agent, "cases.csv", files.csv_bytes([["Question"], ["Hi?"]]))
    Dataset.objects.filter(pk=dataset.pk).update(job_attempts=3)

    dataset_extract(dataset_id=dataset.pk)

    dataset.refresh_from_db()
    assert_failed(dataset, "3 times")
    assert dataset.job_attempts == 3


def test_each_attempt_is_counted_and_a_settled_dataset_is_left_alone(agent):
    dataset = extract(agent, "cases.csv", files.csv_bytes([["Question"], ["Hi?"]]))
    assert dataset.status == "ready"
    assert dataset.job_attempts == 1

    dataset_extract(dataset_id=dataset.pk)  # a redelivered message

    dataset.refresh_from_db()
    assert dataset.status == "ready"
    assert dataset.cases.count() == 1
    assert dataset.job_attempts == 1


def test_empty_text_file_fails_as_empty(agent):
    dataset = extract(agent, "empty.md", b"   \n\n")

    assert_failed(dataset, "no text")


def test_a_file_whose_content_is_not_its_type_fails(agent):
    dataset = extract(agent, "fake.pdf", files.pe_executable())

    assert_failed(dataset, "not a PDF")


def test_prose_needs_a_model_and_says_so_while_tables_still_work(agent, no_llm):
    prose = files.pdf_bytes([["Refunds are available within 30 days of purchase."]])

    assert_failed(extract(agent, "policy.pdf", prose), "needs a model", "EVALSITE_LLM_MODEL")
    table = files.docx_bytes([[["Question", "Answer"], ["Refund window?", "30 days"]]])
    assert extract(agent, "plan.docx", table).status == "ready"


def test_jobs_whose_message_was_lost_are_sent_again(agent, settings):
    import redis
    import time_machine
    from django.utils import timezone

    from datasets.jobs import dataset_reap

    settings.EVALSITE_STALE_QUEUE_SECONDS = 120
    never_started = uploaded_dataset(agent, "a.csv", b"Question\nHi?\n")
    running = uploaded_dataset(agent, "b.csv", b"Question\nHi?\n")
    Dataset.objects.filter(pk=running.pk).update(job_started_at=timezone.now())
    broker = redis.Redis.from_url(settings.REDIS_CLIENT_URL)
    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    before = waiting(broker, queue)

    with time_machine.travel(timezone.now() + timezone.timedelta(seconds=300)):
        ids = dataset_reap()

    assert ids == [never_started.pk]
    # The real message on the real broker (kombu LPUSHes; no worker consumes this queue here).
    assert waiting(broker, queue) == before + 1
    message = json.loads(take(broker, queue))
    assert message["headers"]["task"] == "datasets.tasks.dataset_extract"
    # The dataset travels as the task's one argument, as when the job was first sent (datasets.jobs).
    assert message["headers"]["argsrepr"] == f"({never_started.pk},)"

"""The worker's main process loads, before the pool forks, everything a case's model calls need.

A module a pool child imports on its first case is imported again by every child, and its
memory (and the shared pages the import writes to) is then private to each of them: 20-35 MB
a child, measured (bench/bench_worker_memory.py). The preload must leave nothing for the
first agent call and the first judge call to import.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.worker import worker_env

ROOT = Path(__file__).resolve().parent.parent.parent

# Runs in a fresh interpreter: what the worker's main process has when its pool forks
# (Django, the broker's Redis transport, the worker_init preload), then one agent call and
# one judge call against the fake model, as a pool child's first case makes them.
CHILD = """
import json, sys
import django
django.setup()
import kombu.transport.redis  # the broker transport a worker has loaded before worker_init
from evalsite import celery, llm
celery._preload_litellm()
before = set(sys.modules)
llm.complete([{"role": "user", "content": "How long is the refund window?"}], task="agent")
llm.complete_json(
    [{"role": "user", "content": "Score the answer."}],
    task="judge", purpose="judge",
    schema={"type": "object", "properties": {"score": {"type": "number"}}, "required": ["score"]},
)
celery._logging_drained(llm.litellm_module())  # litellm's logging thread looks models up after a call
print("NEW-MODULES " + json.dumps(sorted(set(sys.modules) - before)))
"""


@pytest.mark.worker
def test_a_first_case_imports_nothing_the_worker_preload_did_not(fake_llm):
    completed = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=ROOT, env=worker_env(), capture_output=True, text=True, timeout=300
    )

    assert completed.returncode == 0, completed.stderr[-3000:]
    line = next(line for line in completed.stdout.splitlines() if line.startswith("NEW-MODULES "))
    new = json.loads(line.removeprefix("NEW-MODULES "))
    assert new == [], f"imported by the first case, so again in every pool child: {new}"
    assert len(fake_llm.requests) >= 2, "the calls did not reach the fake model"


# A worker's main process as Celery starts it: evalsite/celery.py sees `celery ... worker` and
# turns the cyclic garbage collector off for the start-up's imports; the preload turns it on.
WORKER_START = """
import gc, sys
sys.argv = [sys.argv[0].replace("-c", "") + "/venv/bin/celery", "-A", "evalsite", "worker"]
import django
django.setup()
off_at_start = not gc.isenabled()
from evalsite import celery
celery._preload_litellm()
print("GC", off_at_start, gc.isenabled())
"""


def test_a_worker_starts_with_the_garbage_collector_off_and_forks_its_pool_with_it_on(fake_llm):
    done = subprocess.run(
        [sys.executable, "-c", WORKER_START], cwd=ROOT, env=worker_env(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "GC True True" in done.stdout, done.stdout[-2000:]


def test_web_and_beat_keep_the_garbage_collector_on(monkeypatch):
    from evalsite import celery

    for argv in (["/srv/.venv/bin/gunicorn", "evalsite.wsgi:application"], ["manage.py", "runserver"],
                 ["/srv/.venv/bin/celery", "-A", "evalsite", "beat"]):  # fmt: skip
        monkeypatch.setattr(sys, "argv", argv)
        assert not celery._starting_a_worker(), argv
    monkeypatch.setattr(sys, "argv", ["/srv/.venv/lib/python3.11/site-packages/celery/__main__.py", "worker"])
    assert celery._starting_a_worker()

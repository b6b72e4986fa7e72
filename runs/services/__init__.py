"""Run services: start (snapshot + first window), execute one case, stop, fail, finish, reap, re-run, verify.

How a run moves (docs/architecture.md, "The run window"):
- run_start copies the dataset into RunCase rows and pre-creates one pending Result per
  (case, repeat, variant), then queues the first `concurrency` of them.
- A queued result carries a token of its own, naming a lane of the window; its task claims
  it with a conditional UPDATE (queued -> running, same token), does the work, and saves
  it in one transaction with the run's counters. That transaction also hands the freed
  slot to the next pending result, one for one, under the run row's lock: the lane claims
  it and runs it in the same process (after EVALSITE_RUN_LANE_SECONDS, through a new task
  message instead). So at most `concurrency` results of a run are ever queued or running,
  and each is scored once.
- A running lane refreshes its claim (a heartbeat thread). The reaper (beat, every
  EVALSITE_REAPER_INTERVAL s) re-queues claims not refreshed for EVALSITE_STALE_CLAIM_SECONDS
  (their worker was killed), queued results whose message never arrived (Redis lost it),
  and fills missing window slots.
"""

from runs.engine.dispatch import run_fail
from runs.engine.execution import MAX_CASE_ATTEMPTS, run_execute_case
from runs.engine.reaper import run_reap
from runs.services.baseline import dataset_baseline_pin, dataset_baseline_unpin
from runs.services.lifecycle import run_finish, run_on_agent_delete, run_stop
from runs.services.rescore import run_rescore
from runs.services.start import (
    AGENT_NOT_RUNNABLE,
    JUDGE_FAILED_PREFLIGHT,
    JUDGE_NOT_PREFLIGHTED,
    PREFLIGHT_LATER,
    PREFLIGHT_REQUIRE,
    PREFLIGHT_RUN,
    run_rerun,
    run_start,
    run_verify_start,
)

__all__ = [
    "AGENT_NOT_RUNNABLE",
    "JUDGE_FAILED_PREFLIGHT",
    "JUDGE_NOT_PREFLIGHTED",
    "PREFLIGHT_LATER",
    "PREFLIGHT_REQUIRE",
    "PREFLIGHT_RUN",
    "dataset_baseline_pin",
    "dataset_baseline_unpin",
    "MAX_CASE_ATTEMPTS",
    "run_execute_case",
    "run_fail",
    "run_finish",
    "run_on_agent_delete",
    "run_reap",
    "run_rerun",
    "run_rescore",
    "run_start",
    "run_stop",
    "run_verify_start",
]

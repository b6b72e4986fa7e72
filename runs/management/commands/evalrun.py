"""`manage.py evalrun`: the CI gate. Start a run of a dataset (through the same service
as the "Run Evaluation" button), optionally wait for it, write reports, and exit with a
code a pipeline can act on:

    0  the pass rate meets the threshold (or, without --wait, the run was started)
    1  the pass rate is below the threshold
    2  the run failed or was stopped (never a pass, whatever its rate), or bad arguments
       (unknown agent or dataset, dataset not Ready, a threshold outside 0-1), or --timeout elapsed

The pass rate counts every repeat of every case as written (smoke-test variants are
reported as robustness, not gated): passed / all of them, so cases that were not run
(a stopped run) count against it.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from agents.models import Agent
from datasets.models import Dataset
from runs import exporters, selectors, services
from runs.models import Run

EXIT_PASSED, EXIT_BELOW, EXIT_ERROR = 0, 1, 2
HEARTBEAT_SECONDS = 30
# --wait returns at most this long after the run (and its summary) is finished.
POLL_SECONDS = 0.25
# What a poll reads: the figures of the progress line and what `summary_pending` looks at.
PROGRESS_FIELDS = ("status", "total", "completed", "passed", "failed", "errored", "summary", "summary_note")


class Command(BaseCommand):
    help = "Run a dataset against an agent and gate on its pass rate (exit 0 pass, 1 below threshold, 2 error)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--agent", required=True, help="Agent id or exact name")
        parser.add_argument("--dataset", required=True, help="Dataset id or exact name (of that agent)")
        parser.add_argument(
            "--threshold", type=float, default=1.0, help="Pass rate needed, 0-1 (default 1.0: every case passes)"
        )
        parser.add_argument("--wait", action="store_true", help="Wait for the run to finish and gate on it")
        parser.add_argument("--output", metavar="DIR", help="Write run-<id>.json and run-<id>.html reports here")
        parser.add_argument("--json", action="store_true", help="Print a JSON result on stdout (progress to stderr)")
        parser.add_argument(
            "--request-key",
            default="",
            help="Idempotency key (e.g. the CI job id): the same key attaches to its first run instead of a new one",
        )
        parser.add_argument("--timeout", type=float, default=3600, help="Give up waiting after this many seconds")
        parser.add_argument("--interval", type=float, default=POLL_SECONDS, help=argparse_hidden())

    def handle(self, *args: Any, **options: Any) -> None:
        self.as_json = options["json"]
        threshold = options["threshold"]
        if not 0 <= threshold <= 1:
            raise CommandError(
                f"--threshold must be between 0 and 1 (e.g. 0.8 for 80%), not {threshold:g}.", returncode=2
            )
        agent = _agent(options["agent"])
        dataset = _dataset(agent, options["dataset"])
        asked_at = timezone.now()
        try:
            run = services.run_start(agent=agent, dataset=dataset, user=None, request_key=options["request_key"])
        except ValidationError as error:
            raise CommandError(" ".join(error.messages), returncode=2) from error
        verb = "Started" if run.created_at >= asked_at else "Attached to"
        self.progress(
            f"{verb} run #{run.pk}: “{dataset.name}” ({run.total} results) against {agent.name} "
            f"version {run.agent_version.number}, scored by the {run.get_scorer_display().lower()}."
        )
        self.progress(f"Run page: {exporters.run_url(run)}")
        if not options["wait"]:
            self.result({"run_id": run.pk, "status": run.status}, f"Run id: {run.pk}")
            return
        run = self.wait(run, timeout=options["timeout"], interval=options["interval"])
        reports = self.write_reports(run, options["output"]) if options["output"] else {}
        code = self.verdict(run, threshold, reports)
        if code != EXIT_PASSED:
            sys.exit(code)

    # ---- waiting --------------------------------------------------------------------

    def wait(self, run: Run, *, timeout: float, interval: float) -> Run:
        started = time.monotonic()
        last_line, last_print = "", 0.0
        while True:
            # One small query a poll (the progress columns only), so polling every
            # POLL_SECONDS costs the database next to nothing; the whole row once at the end.
            for name, value in Run.objects.filter(pk=run.pk).values(*PROGRESS_FIELDS).get().items():
                setattr(run, name, value)
            elapsed = time.monotonic() - started
            line = (
                f"{run.get_status_display()}: {run.completed}/{run.total} finished · {run.passed} passed · "
                f"{run.failed} failed · {run.errored} errors"
            )
            if line != last_line or elapsed - last_print >= HEARTBEAT_SECONDS:
                self.progress(f"[{elapsed:5.0f}s] {line}")
                last_line, last_print = line, elapsed
            # The summary comes last (after Completed): the reports want it, so wait for it too.
            if not run.is_active and not run.summary_pending:
                run.refresh_from_db()
                return run
            if elapsed > timeout:
                self.progress(f"Gave up waiting after {timeout:g} s; run #{run.pk} goes on in the background.")
                sys.exit(EXIT_ERROR)
            time.sleep(interval)

    # ---- reports and verdict -----------------------------------------------------------

    def write_reports(self, run: Run, directory: str) -> dict[str, str]:
        folder = Path(directory)
        folder.mkdir(parents=True, exist_ok=True)
        paths = {"json": folder / f"run-{run.pk}.json", "html": folder / f"run-{run.pk}.html"}
        paths["json"].write_bytes(exporters.run_export_json(run))
        paths["html"].write_text(exporters.run_export_html(run), encoding="utf-8")
        for path in paths.values():
            self.progress(f"Wrote {path}")
        return {kind: str(path) for kind, path in paths.items()}

    def verdict(self, run: Run, threshold: float, reports: dict[str, str]) -> int:
        total = selectors.run_main_total(run=run)
        rate = run.passed / total if total else 0.0
        lines = [f"Results: {run.passed}/{total} passed ({100 * rate:.1f}%)"]
        reason = _unfinished_reason(run)
        if reason:
            # A run that did not run all its cases is no evidence either way: never a pass.
            code = EXIT_ERROR
            lines.append(reason)
        elif rate >= threshold:
            code = EXIT_PASSED
            lines.append(f"Passed: {100 * rate:.1f}% meets the threshold of {100 * threshold:.1f}%.")
        else:
            code = EXIT_BELOW
            lines.append(f"Below the threshold: {100 * rate:.1f}% < {100 * threshold:.1f}%.")
        data = {
            "run_id": run.pk,
            "status": run.status,
            "passed": run.passed,
            "failed": run.failed,
            "errored": run.errored,
            "total": total,
            "pass_rate": round(rate, 4),
            "threshold": threshold,
            "average_score": run.current_average,
            "ok": code == EXIT_PASSED,
            "exit_code": code,
            "reason": reason or lines[-1],
            "reports": reports,
            "url": exporters.run_url(run),
        }
        self.result(data, "\n".join(lines))
        return code

    # ---- output -----------------------------------------------------------------------

    def progress(self, line: str) -> None:
        """Progress goes to stdout, or to stderr when stdout carries the JSON result."""
        stream = self.stderr if self.as_json else self.stdout
        stream.write(line)
        stream.flush()

    def result(self, data: dict[str, Any], text: str) -> None:
        if self.as_json:
            self.stdout.write(json.dumps(data))
        else:
            self.stdout.write(text)
        self.stdout.flush()


def _unfinished_reason(run: Run) -> str:
    """Why the run cannot be gated on (failed or stopped), or "" when it ran to the end."""
    if run.status == Run.Status.FAILED:
        return f"The run failed: {run.error or 'no reason was recorded.'}"
    if run.status == Run.Status.STOPPED:
        cases = selectors.case_outcome_list(run=run)
        missing = sum(1 for outcome in cases if outcome.status == selectors.CASE_SKIPPED)
        when = f" at {timezone.localtime(run.stop_requested_at):%H:%M:%S}" if run.stop_requested_at else ""
        return (
            f"Run #{run.pk} was stopped{when} before it finished: {missing} of {len(cases)} "
            f"case{'s' if len(cases) != 1 else ''} were not run."
        )
    return ""


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


def _agent(value: str) -> Agent:
    agents = Agent.objects.filter(pk=int(value)) if value.isdigit() else Agent.objects.filter(name=value)
    found = list(agents.select_related("team")[:5])
    if not found:
        raise CommandError(f"No agent “{value}”. Give its id or exact name.", returncode=2)
    if len(found) > 1:
        listed = ", ".join(f"{agent.pk} ({agent.team.name})" for agent in found)
        raise CommandError(f"Several agents are called “{value}”: use the id, one of {listed}.", returncode=2)
    return found[0]


def _dataset(agent: Agent, value: str) -> Dataset:
    datasets = agent.datasets.filter(pk=int(value)) if value.isdigit() else agent.datasets.filter(name=value)
    found = list(datasets[:2])
    if not found:
        raise CommandError(f"Agent “{agent.name}” has no dataset “{value}”. Give its id or exact name.", returncode=2)
    if len(found) > 1:
        raise CommandError(f"Several datasets of “{agent.name}” are called “{value}”: use the id.", returncode=2)
    return found[0]

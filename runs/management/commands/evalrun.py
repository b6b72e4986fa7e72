"""`manage.py evalrun`: the CI gate. Start a run of a dataset (through the same service
as the "Run Evaluation" button), optionally wait for it, write reports, and exit with a
code a pipeline can act on:

    0  the pass rate meets the threshold and, with --baseline and --fail-on regression,
       the run is not significantly worse than the baseline (or, without --wait, the run
       was started)
    1  the pass rate is below the threshold, or the paired test says the run is
       significantly worse than the baseline at --alpha
    2  the run failed or was stopped (never a pass, whatever its rate), its judge failed
       preflight (unless --allow-failed-preflight), or bad arguments
       (unknown agent, dataset or baseline, dataset not Ready, a threshold outside 0-1), or
       --timeout elapsed
    4  nothing to gate on: every result needs a judge model (the offline scorer abstained
       on all), or with --ignore-flaky every case of the dataset is flaky

The decision is runs.comparing.gate.gate_decide. The pass rate counts every repeat of every case as
written (smoke-test variants are reported as robustness, not gated): passed / all of them,
so cases that were not run (a stopped run) count against it. Results the offline scorer
abstained on ("Needs a judge model") are neither pass nor fail: counted, named and left out
of the rate. Without --baseline the
threshold defaults to 1.0 (every case passes); with one, only a given --threshold applies.
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

from agents.management.lookup import agent_from_argument
from agents.models import Agent
from datasets.models import Dataset
from evalsite import links
from runs import selectors, services
from runs.comparing.baseline import baseline_run_get
from runs.comparing.gate import FAIL_ON_REGRESSION, gate_decide
from runs.comparing.stats import DEFAULT_ALPHA
from runs.judging.configs import dataset_judge_config
from runs.judging.trust import run_trust_notes
from runs.models import Run
from runs.reports import exporters
from runs.services.preflight import judge_preflight_needed

EXIT_PASSED, EXIT_BELOW, EXIT_ERROR = 0, 1, 2
HEARTBEAT_SECONDS = 30
# --wait returns at most this long after the run (and its summary) is finished.
POLL_SECONDS = 0.25
# What a poll reads: the figures of the progress line and what `summary_pending` looks at.
PROGRESS_FIELDS = (
    "status",
    "total",
    "completed",
    "passed",
    "failed",
    "errored",
    "abstained",
    "summary",
    "summary_note",
)


class Command(BaseCommand):
    help = (
        "Run a dataset against an agent and gate on its pass rate "
        "(exit 0 pass, 1 below threshold, 2 error, 4 nothing to gate on)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--agent", required=True, help="Agent id or exact name")
        parser.add_argument("--dataset", required=True, help="Dataset id or exact name (of that agent)")
        parser.add_argument(
            "--threshold",
            type=float,
            default=None,
            help="Pass rate needed, 0-1 (default 1.0, every case passes; with --baseline, none unless given)",
        )
        parser.add_argument(
            "--baseline",
            metavar="RUN|pinned",
            help="Compare with this run id, or with the dataset's pinned baseline ('pinned'), by a paired test",
        )
        parser.add_argument(
            "--fail-on",
            choices=[FAIL_ON_REGRESSION],
            help="With --baseline: exit 1 when the run is significantly worse than the baseline",
        )
        parser.add_argument(
            "--alpha", type=float, default=DEFAULT_ALPHA, help="Significance level of the paired test (default 0.05)"
        )
        parser.add_argument(
            "--ignore-flaky",
            action="store_true",
            help="Leave the dataset's flaky cases out of the pass rate and the test (they are listed)",
        )
        parser.add_argument(
            "--allow-failed-preflight",
            action="store_true",
            help="Gate on a run whose judge failed preflight (by default it exits 2: its scores are not trustworthy)",
        )
        parser.add_argument(
            "--no-preflight",
            action="store_true",
            help="Start without preflighting a judge not yet preflighted (the run is marked if a later preflight "
            "fails); for benchmarks whose model calls are counted",
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
        if threshold is not None and not 0 <= threshold <= 1:
            raise CommandError(
                f"--threshold must be between 0 and 1 (e.g. 0.8 for 80%), not {threshold:g}.", returncode=2
            )
        if not 0 < options["alpha"] < 1:
            raise CommandError(f"--alpha must be between 0 and 1 (e.g. 0.05), not {options['alpha']:g}.", returncode=2)
        if options["fail_on"] and not options["baseline"]:
            raise CommandError("--fail-on regression needs a --baseline to compare with.", returncode=2)
        agent = agent_from_argument(options["agent"])
        dataset = _dataset(agent, options["dataset"])
        self.baseline = _baseline(dataset, options["baseline"]) if options["baseline"] else None
        if threshold is None and self.baseline is None:
            threshold = 1.0
        asked_at = timezone.now()
        preflight = services.PREFLIGHT_LATER if options["no_preflight"] else services.PREFLIGHT_RUN
        if preflight == services.PREFLIGHT_RUN and judge_preflight_needed(dataset_judge_config(dataset=dataset)):
            self.progress("Preflighting the judge: it scores a small calibration set before its first run…")
        try:
            # A judge that fails its preflight still runs here, marked, and the exit code says so.
            run = services.run_start(
                agent=agent,
                dataset=dataset,
                user=None,
                request_key=options["request_key"],
                preflight=preflight,
                allow_failed_preflight=True,
            )
        except ValidationError as error:
            raise CommandError(" ".join(error.messages), returncode=2) from error
        if run.judge_failed_preflight:
            self.progress("Warning: the judge failed its preflight on the calibration set; its scores are not trusted.")
        verb = "Started" if run.created_at >= asked_at else "Attached to"
        self.progress(
            f"{verb} run #{run.pk}: “{dataset.name}” ({run.total} results) against {agent.name} "
            f"version {run.agent_version.number}, scored by the {run.get_scorer_display().lower()}."
        )
        self.site_url = links.command_site_url()  # the port `make run PORT=...` serves, not 8000
        self.progress(f"Run page: {exporters.run_url(run, self.site_url)}")
        if not options["wait"]:
            self.result({"run_id": run.pk, "status": run.status}, f"Run id: {run.pk}")
            return
        run = self.wait(run, timeout=options["timeout"], interval=options["interval"])
        reports = self.write_reports(run, options["output"]) if options["output"] else {}
        code = self.verdict(run, threshold, reports, options)
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
                + (f" · {run.abstained} need a judge model" if run.abstained else "")
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
        paths["json"].write_bytes(exporters.run_export_json(run, site_url=self.site_url))
        paths["html"].write_text(exporters.run_export_html(run, site_url=self.site_url), encoding="utf-8")
        for path in paths.values():
            self.progress(f"Wrote {path}")
        return {kind: str(path) for kind, path in paths.items()}

    def verdict(self, run: Run, threshold: float | None, reports: dict[str, str], options: dict[str, Any]) -> int:
        decision = gate_decide(
            run=run,
            threshold=threshold,
            baseline=self.baseline,
            fail_on=options["fail_on"] or "",
            alpha=options["alpha"],
            ignore_flaky=options["ignore_flaky"],
            unfinished=_unfinished_reason(run),
            allow_failed_preflight=options.get("allow_failed_preflight", False),
        )
        total = selectors.run_main_total(run=run)
        # Unusable judge answers and answers cut at their limit, said before the verdict (runs/judging/trust.py).
        trust = run_trust_notes(run=run)
        notes = ([f"{trust.unusable} judge answer{'s' if trust.unusable != 1 else ''} unusable: counted as errors."]
                 if trust.unusable else []) + [cut.sentence for cut in trust.cuts]  # fmt: skip
        data = {
            "run_id": run.pk,
            "status": run.status,
            "passed": run.passed,
            "failed": run.failed,
            "errored": run.errored,
            "judge_failed_preflight": run.judge_failed_preflight,
            "total": total,
            "pass_rate": decision.data.pop("pass_rate"),
            "threshold": threshold,
            "average_score": run.current_average,
            "ok": decision.code == EXIT_PASSED,
            "exit_code": decision.code,
            "reason": decision.reason,
            "reports": reports,
            "url": exporters.run_url(run, self.site_url),
            "judge_unusable": trust.unusable,
            "cut": [cut.as_dict() for cut in trust.cuts],
            **decision.data,
        }
        self.result(data, "\n".join([*decision.lines[:-1], *notes, decision.lines[-1]]))
        return decision.code

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
        if run.stop_reason == Run.BUDGET_REACHED:  # the run's cost cap (runs/engine/budget.py)
            when += f": budget reached (${run.agent_cost + run.judge_cost:.4f} of its ${run.budget_cap:.4f} cap),"
        return (
            f"Run #{run.pk} was stopped{when} before it finished: {missing} of {len(cases)} "
            f"case{'s' if len(cases) != 1 else ''} were not run."
        )
    return ""


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


def _baseline(dataset: Dataset, value: str) -> Run:
    """The run to compare with: an id of a run of this dataset, or "pinned" (its pinned baseline)."""
    if value == "pinned":
        pinned = baseline_run_get(dataset_id=dataset.pk)
        if pinned is None:
            raise CommandError(
                f"Dataset “{dataset.name}” has no pinned baseline: pin one on a run's page, or give a run id.",
                returncode=2,
            )
        return pinned
    run = Run.objects.filter(pk=int(value), dataset=dataset).first() if value.isdigit() else None
    if run is None:
        raise CommandError(f"--baseline {value}: give “pinned” or the id of a run of “{dataset.name}”.", returncode=2)
    return run


def _dataset(agent: Agent, value: str) -> Dataset:
    datasets = agent.datasets.filter(pk=int(value)) if value.isdigit() else agent.datasets.filter(name=value)
    found = list(datasets[:2])
    if not found:
        raise CommandError(f"Agent “{agent.name}” has no dataset “{value}”. Give its id or exact name.", returncode=2)
    if len(found) > 1:
        raise CommandError(f"Several datasets of “{agent.name}” are called “{value}”: use the id.", returncode=2)
    return found[0]

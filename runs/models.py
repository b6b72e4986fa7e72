from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q

from datasets.models import DEFAULT_PASS_THRESHOLD


class JudgeConfig(models.Model):
    """What made a score: a dataset's judge model, prompt template, criteria, threshold, scorer set,
    re-sample count and alignment examples at one point in time, numbered per dataset (v1, v2...).

    Made by runs.judging.configs.judge_config_for (get-or-create on the fingerprint, a sha256 of all of
    them), so the same settings always map to the same configuration and any change makes a new one.
    """

    dataset = models.ForeignKey(
        "datasets.Dataset", on_delete=models.SET_NULL, null=True, blank=True, related_name="judge_configs"
    )
    number = models.PositiveIntegerField()
    fingerprint = models.CharField(max_length=64)
    # The model that judges, resolved (the dataset's override or the console's); "" for the offline scorer.
    judge_model = models.CharField(max_length=200, blank=True)
    # The judge's messages with the case's parts left as {placeholders}: instructions, worked
    # examples, rubric, and the user message's sections with the dataset's criteria filled in.
    prompt_template = models.TextField(blank=True)
    criteria = models.JSONField(default=dict, blank=True)
    threshold = models.PositiveSmallIntegerField(default=7)
    scorers = models.JSONField(default=list, blank=True)
    resamples = models.PositiveSmallIntegerField(default=0)
    # Reviewers' overrides shown to the judge: [{question, answer, expected, verdict, note, score}].
    examples = models.JSONField(default=list, blank=True)
    # The Run.scoring keys this configuration sets (a re-score lays them over its source run's).
    settings = models.JSONField(default=dict, blank=True)
    # What the model server says it runs behind judge_model (its reported model id, system
    # fingerprint or model metadata), read at Test connection, preflight or first call; part of
    # the fingerprint, so a model swapped behind one alias is a new configuration.
    model_identity = models.CharField(max_length=300, blank=True)
    # The judge's preflight on the calibration set (runs.judging.preflight): "" not run, "passed" or "failed",
    # with what the judge did on each item, its cost and when.
    preflight_status = models.CharField(max_length=8, blank=True)
    preflight = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["dataset_id", "number"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "fingerprint"], name="unique_judge_config_fingerprint"),
            models.UniqueConstraint(fields=["dataset", "number"], name="unique_judge_config_number"),
        ]

    def __str__(self) -> str:
        return self.label

    @property
    def label(self) -> str:
        """ "judge v3: gpt-4o-mini, custom criteria" """
        if not self.judge_model:
            return f"judge v{self.number}: offline reference scorer"
        features = []
        if self.settings.get("judge_prompt"):
            features.append("custom prompt")
        if any(self.criteria.values()):
            features.append("custom criteria")
        if self.examples:
            features.append(f"{len(self.examples)} review example{'s' if len(self.examples) != 1 else ''}")
        model = self.judge_model.rsplit("/", 1)[-1]
        return f"judge v{self.number}: {model}, {', '.join(features) or 'default prompt'}"

    @property
    def short_fingerprint(self) -> str:
        return self.fingerprint[:12]


class Run(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        COMPLETED = "completed", "Completed"
        FAILED = "failed", "Failed"
        STOPPED = "stopped", "Stopped"

    class Purpose(models.TextChoices):
        RUN = "run", "Evaluation"
        RERUN = "rerun", "Re-run of failed cases"
        VERIFY = "verify", "Verification"
        RESCORE = "rescore", "Re-score"

    class Scorer(models.TextChoices):
        LLM = "llm", "LLM judge"
        OFFLINE = "offline", "Offline reference scorer"

    ACTIVE_STATUSES = (Status.PENDING, Status.RUNNING)
    # Not a column: run_start/run_rerun set it on the run they return when its request key
    # matched an earlier request, so the API answers a replay 200 instead of 201.
    replayed = False
    # Shown while the run's summary is being written (it is written after the run completes).
    SUMMARY_PENDING_NOTE = "Writing the summary…"
    # Run.stop_reason of a run stopped by its cost cap (runs/engine/budget.py).
    BUDGET_REACHED = "budget reached"

    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, related_name="runs")
    agent_version = models.ForeignKey("agents.AgentVersion", on_delete=models.PROTECT, related_name="runs")
    # The dataset may be deleted later; the run keeps its own snapshot (RunCase rows, settings).
    dataset = models.ForeignKey(
        "datasets.Dataset", on_delete=models.SET_NULL, null=True, blank=True, related_name="runs"
    )
    dataset_name = models.CharField(max_length=120)
    parent = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="children")
    purpose = models.CharField(max_length=8, choices=Purpose.choices, default=Purpose.RUN)
    # Scoring settings copied from the dataset at creation (criteria, threshold, repeats, ...).
    scoring = models.JSONField(default=dict, blank=True)
    judge_model = models.CharField(max_length=200, blank=True)
    # The judge configuration that scored this run (runs.judging.configs): set when the run is created.
    judge_config = models.ForeignKey(
        "runs.JudgeConfig", on_delete=models.SET_NULL, null=True, blank=True, related_name="runs"
    )
    scorer = models.CharField(max_length=8, choices=Scorer.choices, default=Scorer.LLM)
    concurrency = models.PositiveSmallIntegerField(default=3)
    # Guards against double submission: the same key never creates a second run.
    request_key = models.CharField(max_length=64, blank=True)

    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    error = models.TextField(blank=True)
    total = models.PositiveIntegerField(default=0)
    completed = models.PositiveIntegerField(default=0)
    passed = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    errored = models.PositiveIntegerField(default=0)
    # Results the offline scorer could not check ("Needs a judge model"): neither pass nor fail.
    abstained = models.PositiveIntegerField(default=0)
    # Started although its judge configuration failed preflight: said on every page, export,
    # API answer and evalrun's exit code.
    judge_failed_preflight = models.BooleanField(default=False)
    average_score = models.FloatField(null=True, blank=True)
    # Sum of the scores counted in passed/failed, so the average is known while the run is going.
    score_total = models.FloatField(default=0)
    # Results whose retrieval-context check failed where the dataset does not let that check fail
    # the case: counted at the finish, so the page can say the check failed without the verdict.
    ungated_checks_failed = models.PositiveIntegerField(default=0)
    robustness = models.FloatField(null=True, blank=True, help_text="Pass rate of smoke-test variants")
    consistency = models.FloatField(null=True, blank=True, help_text="Mean score spread across repeats")
    agent_tokens = models.PositiveIntegerField(default=0)
    judge_tokens = models.PositiveIntegerField(default=0)
    agent_cost = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    judge_cost = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    # The user-simulator's calls for scenario cases (runs/engine/simulator.py), apart from agent and judge.
    simulator_tokens = models.PositiveIntegerField(default=0)
    simulator_cost = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    summary = models.TextField(blank=True)
    summary_note = models.CharField(max_length=300, blank=True)
    # The model that wrote the summary (shown as "Written by"), and what in it disagreed with the
    # run's own figures after one rewrite (runs/judging/summary_check.py): empty when it agreed.
    summary_model = models.CharField(max_length=200, blank=True)
    summary_disagreements = models.JSONField(default=list, blank=True)

    # The hard cost cap (USD): once agent_cost + judge_cost reaches it, no new case starts
    # and the run is Stopped with stop_reason "budget reached". None: no cap.
    budget_cap = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    stop_reason = models.CharField(max_length=100, blank=True)
    stop_requested_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "request_key"], condition=~Q(request_key=""), name="unique_run_request_key"
            ),
        ]
        indexes = [models.Index(fields=["status"])]

    def __str__(self) -> str:
        return f"Run {self.pk} of {self.dataset_name}"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE_STATUSES

    @property
    def progress_percent(self) -> int:
        return round(100 * self.completed / self.total) if self.total else 0

    @property
    def current_average(self) -> float | None:
        """The final average once computed, else the running one from the counters."""
        if self.average_score is not None:
            return self.average_score
        scored = self.passed + self.failed
        return self.score_total / scored if scored else None

    @property
    def summary_pending(self) -> bool:
        """The run has ended but its summary is still to come (keep polling)."""
        return (
            not self.is_active
            and self.status != self.Status.FAILED
            and (self.summary_note == self.SUMMARY_PENDING_NOTE or not (self.summary or self.summary_note))
        )

    @property
    def pass_threshold(self) -> int:
        """The judge's score a case needed to pass, as the run's scoring snapshot says."""
        return self.scoring.get("pass_threshold", DEFAULT_PASS_THRESHOLD)

    @property
    def cost(self) -> Decimal:
        return self.agent_cost + self.judge_cost

    @property
    def pass_rate(self) -> float | None:
        scored = self.passed + self.failed + self.errored
        return self.passed / scored if scored else None


class RunCase(models.Model):
    """A test case as it was when the run was created: the run's snapshot of its dataset."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="cases")
    # The run's own order (0-based); a re-run numbers its copies from 0.
    position = models.PositiveIntegerField()
    # The case's number in its dataset (1-based, as the dataset page shows it), kept by
    # re-runs and verifications: "Case 11" of a re-run is case 11 of the dataset.
    number = models.PositiveIntegerField(default=0)
    source_case = models.ForeignKey(
        "datasets.TestCase", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    case_id = models.CharField(max_length=100, blank=True)
    question = models.TextField()
    expected_answer = models.TextField(blank=True)
    # Every other case field (turns, expected_tools, trajectory_mode, tags, documents, ...).
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["run", "position"], name="unique_run_case_position")]

    def __str__(self) -> str:
        return self.question[:80]

    @property
    def display_number(self) -> int:
        return self.number or self.position + 1

    def copy_fields(self) -> dict[str, Any]:
        """What a copy of this case in another run (a re-run, a re-score) keeps: the same
        case as it was asked here, not as the dataset has it now."""
        return {
            "source_case_id": self.source_case_id,
            "number": self.display_number,
            "case_id": self.case_id,
            "question": self.question,
            "expected_answer": self.expected_answer,
            "data": self.data,
        }


class Result(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        PASS = "pass", "Pass"
        FAIL = "fail", "Fail"
        ERROR = "error", "Error"
        SKIPPED = "skipped", "Skipped"
        # The offline scorer cannot check this expectation (it describes behaviour, not facts):
        # neither pass nor fail, left out of pass rates, comparisons and gates.
        ABSTAINED = "abstained", "Needs a judge model"

    class ErrorKind(models.TextChoices):
        NONE = "", "None"
        AGENT = "agent", "Agent error"
        JUDGE = "judge", "Judge error"
        # The judge answered, but its answer failed the checks of runs.judging.checks (placeholder,
        # schema text, a copy of the prompt, reasoning against its score): never a verdict.
        JUDGE_UNUSABLE = "judge_unusable", "Judge answer unusable"

    FINISHED_STATUSES = (Status.PASS, Status.FAIL, Status.ERROR, Status.ABSTAINED)
    # A scenario case when no model can play the user (runs.services.start): skipped with
    # this label, and left out of the pass rate, which counts what could run.
    NEEDS_SIMULATOR = (
        "Needs a simulator model: a scenario case is played by a model that acts as the user, and none is configured."
    )
    NEEDS_SIMULATOR_Q = Q(status=Status.SKIPPED, error=NEEDS_SIMULATOR)
    # Queued (a task is on its way) and running (a worker claimed it) count against the run's window.
    IN_FLIGHT_STATUSES = (Status.QUEUED, Status.RUNNING)

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="results")
    case = models.ForeignKey(RunCase, on_delete=models.CASCADE, related_name="results")
    repeat = models.PositiveSmallIntegerField(default=0)
    # 0 is the case as written; 1..n are smoke-test paraphrases of its question.
    variant = models.PositiveSmallIntegerField(default=0)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING)
    # The dispatch token: only the task message carrying it may claim the row, so a stale
    # or duplicated message (a Redis redelivery, a reaper re-queue) finds nothing to do.
    token = models.CharField(max_length=32, blank=True)
    queued_at = models.DateTimeField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    # The worker whose process holds the claim (evalsite.workers.WORKER_ID): when its heartbeat
    # stops, the reaper re-queues the case at once instead of waiting out the claim's timeout.
    claimed_by = models.CharField(max_length=200, blank=True)
    # How many times the agent was asked about this result, the call under way included: a
    # claim counts one when its lane takes the case in hand, not when it claims it ahead.
    attempts = models.PositiveSmallIntegerField(default=0)
    # Held by its lane ahead of its case in hand, the agent not yet asked about it for this
    # claim (runs/engine/lane.py): its attempt counts when the lane takes it up (issue 48).
    claimed_ahead = models.BooleanField(default=False)

    class RepeatCause(models.TextChoices):
        """Why the agent (and the judge) were asked about a result again (issue 35): "after ..."."""

        WORKER_LOST = "worker_lost", "a worker that stopped (killed or out of memory)"
        WORKER_PROCESS_LOST = "redelivered", "a worker process that stopped (killed or out of memory)"
        BROKER_LOST = "broker_lost", "a worker's lost connection to Redis"
        NO_HEARTBEAT = "no_heartbeat", "a worker that stopped answering"
        DATABASE = "database", "a database error"

    # One entry per time the agent was asked about this result again (attempts - 1 of them):
    # [{"cause": RepeatCause, "attempt": 2}]. Shown on the run page and in the exports.
    repeats = models.JSONField(default=list, blank=True)

    question = models.TextField(blank=True, help_text="The question asked (the paraphrase for variants)")
    actual_answer = models.TextField(blank=True)
    conversation = models.JSONField(default=list, blank=True)
    tool_calls = models.JSONField(default=list, blank=True)
    retrieval_context = models.JSONField(default=list, blank=True)
    trace_id = models.CharField(max_length=200, blank=True)
    score = models.FloatField(null=True, blank=True)
    verdict = models.CharField(max_length=40, blank=True)
    reasoning = models.TextField(blank=True)
    error = models.TextField(blank=True)
    error_kind = models.CharField(max_length=16, choices=ErrorKind.choices, blank=True, default="")
    # Which model answers ended at their token limit (finish_reason "length"), each with the
    # limit: [{"call": "agent" | "judge", "limit": 256}]. Shown on the card, exports and API.
    cut = models.JSONField(default=list, blank=True)
    # [{"name": "trajectory", "score": 1.0, "passed": true, "detail": "..."}]
    scorers = models.JSONField(default=list, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    agent_tokens = models.PositiveIntegerField(default=0)
    judge_tokens = models.PositiveIntegerField(default=0)
    agent_cost = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    judge_cost = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    simulator_tokens = models.PositiveIntegerField(default=0)
    simulator_cost = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    # How a scenario case's conversation went ({} for scripted cases; runs/engine/simulator.py):
    # {"ended_by": "simulator" | "turn_limit", "goal": "reached" | "abandoned" | "",
    #  "reason": "...", "user_turns": n, "max_turns": n, "failing_turn": n | None}.
    # Its turns are in `conversation`, each with "duration_ms" (and "tool_calls" on replies).
    scenario = models.JSONField(default=dict, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Judge stability near the threshold (runs.judging.stability): every score the judge gave, first one
    # first, when it was asked again; the score above is their median. judge_stable says whether
    # all of them fell on the same side of the threshold (None: asked once).
    judge_samples = models.JSONField(default=list, blank=True)
    judge_stable = models.BooleanField(null=True, blank=True)
    # A re-score's result: the result of the source run whose answer it judged again.
    rescored_from = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="rescores")

    class Meta:
        ordering = ["case__position", "repeat", "variant"]
        constraints = [
            models.UniqueConstraint(fields=["case", "repeat", "variant"], name="unique_result_per_case_repeat_variant"),
        ]
        # (run, status, id) serves the window refill: "the next pending result of this run"
        # is one index probe, however many results the run has.
        indexes = [models.Index(fields=["run", "status", "id"]), models.Index(fields=["run", "finished_at"])]

    def __str__(self) -> str:
        return f"Result {self.pk} ({self.status})"

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED_STATUSES

    @property
    def needs_simulator(self) -> bool:
        return self.status == self.Status.SKIPPED and self.error == self.NEEDS_SIMULATOR


class DatasetBaseline(models.Model):
    """The run a dataset's new runs are measured against (pinned from a run page, used by
    the run page's baseline box and by `evalrun --baseline pinned`). One per dataset."""

    dataset = models.OneToOneField("datasets.Dataset", on_delete=models.CASCADE, related_name="baseline")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    pinned_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    pinned_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"Baseline of dataset {self.dataset_id}: run {self.run_id}"

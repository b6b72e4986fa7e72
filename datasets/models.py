import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

# A case passes when the judge scores it at least this (0-10), unless its dataset says otherwise.
DEFAULT_PASS_THRESHOLD = 7
# Bounds of the judge settings of issue 18 (re-samples near the threshold, alignment examples).
RESAMPLES_MAX = 4
ALIGNMENT_MAX = 10


def _document_path(instance: "Document", filename: str) -> str:
    # Stored names are server-generated; the user's file name is kept only in original_name.
    return f"documents/{instance.team_id}/{uuid.uuid4().hex}.{instance.file_type}"


class Dataset(models.Model):
    class Status(models.TextChoices):
        EXTRACTING = "extracting", "Extracting"
        # An upload read and waiting for the user to confirm its column mapping (and the
        # 500-case limit); confirming creates the cases (datasets.extraction.mapping).
        REVIEW = "review", "Confirm mapping"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"

    class Source(models.TextChoices):
        MANUAL = "manual", "Created by hand"
        UPLOAD = "upload", "Uploaded file"
        GENERATED = "generated", "Generated with AI"
        IMPORT = "import", "Imported"

    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, related_name="datasets")
    name = models.CharField(max_length=120)
    description = models.TextField(blank=True)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.READY)
    failure_reason = models.TextField(blank=True)
    # A non-fatal note for the user, e.g. "The document had 612 cases; the first 500 were kept."
    notice = models.TextField(blank=True)
    # What an import changed or doubts, each naming the file and the sheet/row/page:
    # [{"where": "plan.xlsx, Cases rows 4, 7", "message": "..."}]. Status reads "Ready with warnings".
    warnings = models.JSONField(default=list, blank=True)
    # The mapping step of an upload: the tables found (header row, field per column,
    # first rows), the case count, and once confirmed the user's choice ("chosen").
    mapping = models.JSONField(default=dict, blank=True)
    source = models.CharField(max_length=12, choices=Source.choices, default=Source.MANUAL)
    source_name = models.CharField(max_length=255, blank=True, help_text="Uploaded file name")
    # The uploaded file is each extracted case's source (provenance), never an input: an
    # agent that reads it reads the expected answers. Only when the team asked for it in
    # the upload wizard ("questions about this contract") is it also attached to the cases.
    agent_reads_source = models.BooleanField(default=False)
    # The EvalSet's own id when the dataset came from (or was exported to) an EvalSet JSON
    # file, so an export then import keeps it.
    eval_set_id = models.CharField(max_length=200, blank=True)
    # Generation parameters: {"count": 10, "instructions": "..."}.
    generation = models.JSONField(default=dict, blank=True)
    # Background job attempts, counted in the database so a job that kills its worker
    # every time stops after a few tries instead of being redelivered forever.
    job_attempts = models.PositiveSmallIntegerField(default=0)
    job_started_at = models.DateTimeField(null=True, blank=True)

    # Scoring settings.
    acceptance_criteria = models.TextField(blank=True)
    rejection_criteria = models.TextField(blank=True)
    evaluation_criteria = models.TextField(blank=True)
    judge_model = models.CharField(max_length=200, blank=True)
    judge_prompt = models.TextField(blank=True, help_text="Replaces the default judge instructions")
    pass_threshold = models.PositiveSmallIntegerField(default=DEFAULT_PASS_THRESHOLD)
    number_of_requests = models.PositiveSmallIntegerField(default=1)
    jaccard_enabled = models.BooleanField(default=True)
    vector_enabled = models.BooleanField(default=False)
    # A failed retrieval-context check fails the case (off: the check is shown, and counted on the
    # run page, as information that does not change the verdict).
    context_gates = models.BooleanField(default=False)
    # Extra judge calls for a score next to the pass threshold (0 turns it off); the median counts.
    judge_resamples = models.PositiveSmallIntegerField(default=2)
    # Reviewers' most recent overrides shown to the judge as worked examples (0: off, up to 10).
    alignment_examples = models.PositiveSmallIntegerField(default=0)

    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "name"], name="unique_dataset_name_per_agent"),
            models.CheckConstraint(
                condition=Q(pass_threshold__gte=0, pass_threshold__lte=10), name="dataset_threshold_0_10"
            ),
            models.CheckConstraint(
                condition=Q(number_of_requests__gte=1, number_of_requests__lte=10), name="dataset_repeats_1_10"
            ),
            models.CheckConstraint(condition=Q(judge_resamples__lte=RESAMPLES_MAX), name="dataset_resamples_0_4"),
            models.CheckConstraint(
                condition=Q(alignment_examples__lte=ALIGNMENT_MAX), name="dataset_alignment_examples_0_10"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_settled(self) -> bool:
        return self.status != self.Status.EXTRACTING

    @property
    def status_label(self) -> str:
        if self.status == self.Status.READY and self.warnings:
            return "Ready with warnings"
        return self.get_status_display()


class Document(models.Model):
    class FileType(models.TextChoices):
        PDF = "pdf", "PDF"
        DOCX = "docx", "Word"
        XLSX = "xlsx", "Excel"
        XLS = "xls", "Excel 97-2003"
        CSV = "csv", "CSV"
        MD = "md", "Markdown"
        JSON = "json", "JSON"

    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="documents")
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, null=True, blank=True, related_name="documents")
    file = models.FileField(upload_to=_document_path, max_length=255)
    original_name = models.CharField(max_length=255)
    file_type = models.CharField(max_length=8, choices=FileType.choices)
    size = models.PositiveBigIntegerField(default=0)
    sha256 = models.CharField(max_length=64, blank=True)
    text = models.TextField(blank=True, help_text="Extracted plain text")
    # What the sandbox read in the file (datasets/extraction/reading.py), kept while the upload
    # waits for its mapping so that confirming it does not read the file again; then cleared.
    reading = models.JSONField(null=True, blank=True, editable=False)
    generated = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["original_name"]

    def __str__(self) -> str:
        return self.original_name


class TestCase(models.Model):
    class TrajectoryMode(models.TextChoices):
        STRICT = "strict", "Strict (same tools, same order)"
        UNORDERED = "unordered", "Unordered (same tools, any order)"
        SUPERSET = "superset", "Superset (expected tools and maybe more)"
        SUBSET = "subset", "Subset (only expected tools, maybe fewer)"

    __test__ = False  # not a pytest class

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="cases")
    position = models.PositiveIntegerField(default=0)
    question = models.TextField()
    expected_answer = models.TextField(blank=True)
    document_context = models.TextField(blank=True)
    # The case's ATTACHMENTS: documents that are part of the question (a generated invoice,
    # a contract the user shares). The only documents an agent under test ever receives.
    documents = models.ManyToManyField(Document, blank=True, related_name="cases", verbose_name="attachments")

    case_id = models.CharField(max_length=100, blank=True, help_text="Stable id, unique in the dataset")
    # Multi-turn cases: the user turns that come BEFORE `question`, in order, each with an
    # optional expected reply: [{"user": "...", "expected": "..."}]. The conversation is
    # turns[0].user, turns[1].user, ..., then `question` last; `expected_answer` is the
    # expected final reply. Empty for single-turn cases. (datasets.fields.case_fields_clean)
    turns = models.JSONField(default=list, blank=True)
    # The expected tool trajectory over the whole conversation: [{"name": "...", "args": {...}}].
    # `args` lists only the arguments to check ({} checks none), when check_tool_args is on.
    expected_tools = models.JSONField(default=list, blank=True)
    trajectory_mode = models.CharField(max_length=10, choices=TrajectoryMode.choices, default=TrajectoryMode.STRICT)
    check_tool_args = models.BooleanField(default=False)
    expected_context = models.JSONField(default=list, blank=True)
    judge_guideline = models.TextField(blank=True)
    tags = models.JSONField(default=list, blank=True)
    smoke_count = models.PositiveSmallIntegerField(null=True, blank=True)
    smoke_guidance = models.TextField(blank=True)
    # A user-simulator scenario ({} for a scripted case): {"goal", "plan", "persona",
    # "max_turns", "success_criteria"}; `question` is its starting prompt, and a simulator
    # model plays the user from there (runs/engine/simulator.py). (datasets.fields._scenario)
    scenario = models.JSONField(default=dict, blank=True)
    # What the case tests, for generated cases ("Refund policy, rule 2").
    # Stability across the dataset's runs, written by runs (runs.comparing.flaky) when a
    # run finishes: verdict flips between consecutive results with the same agent version,
    # case and judge, out of the chances to flip.
    flips = models.PositiveIntegerField(default=0)
    flip_chances = models.PositiveIntegerField(default=0)
    tests_rule = models.CharField(max_length=300, blank=True)

    # The case's SOURCE (provenance, read-only in the UI): the uploaded file it was read
    # from, where in it, and the evidence. Shown to the team and opened in the preview at
    # that place; never sent to an agent (see `documents` for what is).
    source_document = models.ForeignKey(
        Document, on_delete=models.SET_NULL, null=True, blank=True, related_name="sourced_cases"
    )
    source_file = models.CharField(max_length=255, blank=True)
    source_location = models.CharField(max_length=100, blank=True, help_text="page 3, Sheet1 row 12, ...")
    source_span = models.TextField(blank=True)
    # Eval-set fields Evalsite keeps but does not score (ADK `session_input`, 10xgraph
    # `expected_node_order`), so a JSON import exports back without losing them.
    extra = models.JSONField(default=dict, blank=True)
    # Columns of the source row mapped to no field ({"Priority": "High"}), shown and exported with the case.
    metadata = models.JSONField(default=dict, blank=True)
    # What the import changed or doubts about this case ("No expected answer: ...").
    import_warnings = models.JSONField(default=list, blank=True)

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["position", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["dataset", "case_id"], condition=~Q(case_id=""), name="unique_case_id_per_dataset"
            ),
            models.CheckConstraint(
                condition=Q(smoke_count__isnull=True) | Q(smoke_count__gte=1, smoke_count__lte=10),
                name="case_smoke_count_1_10",
            ),
        ]

    def __str__(self) -> str:
        return self.question[:80]

    @property
    def flip_rate(self) -> float | None:
        return self.flips / self.flip_chances if self.flip_chances else None

    @property
    def is_flaky(self) -> bool:
        """Its verdict flips more often than EVALSITE_FLAKY_FLIP_RATE with nothing changed."""
        rate = self.flip_rate
        return rate is not None and rate > settings.EVALSITE_FLAKY_FLIP_RATE

    @classmethod
    def flaky_filter(cls) -> Q:
        """The same rule as is_flaky, for a queryset: flips > rate x chances."""
        return Q(flip_chances__gt=0, flips__gt=models.F("flip_chances") * settings.EVALSITE_FLAKY_FLIP_RATE)


class RuleMap(models.Model):
    """A model's reading of which agent rules a dataset's cases test (datasets.coverage).

    Without one, coverage maps cases to the version's rules by word overlap, on the fly.
    With a model, a job rephrases the version's rules into testable statements and asks
    which rules each case exercises; the latest finished map of (dataset, version) is used.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Mapping"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="rule_maps")
    version = models.ForeignKey("agents.AgentVersion", on_delete=models.CASCADE, related_name="rule_maps")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    # [{"id", "section", "text", "topic"}]: the model's testable statements, ids as agents.rules.rule_id.
    rules = models.JSONField(default=list, blank=True)
    # {"<case pk>": ["G-3fa2c1", ...]}
    links = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    tokens = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    # Rules tied to at least one case when the map finished, by the model's map and by the
    # word map: {"model": 0, "model_rules": 39, "words": 10, "word_rules": 39}.
    tied = models.JSONField(default=dict, blank=True)
    # A finished map is used only when adopted: one that ties fewer rules than the word map is
    # a proposal shown beside it, until a person chooses it (datasets.coverage).
    adopted = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"Rule map of {self.dataset} for v{self.version_id}"

    @property
    def is_proposal(self) -> bool:
        return self.status == self.Status.DONE and not self.adopted

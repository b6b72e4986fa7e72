"""The runs API's request and response schemas (runs/api.py): what each operation takes and
answers, and so what the OpenAPI document at /api/docs says."""

from datetime import datetime
from typing import Any, Literal

from ninja import Field, Schema

from evalsite.schemas import StrictSchema
from runs.models import Run

RunStatus = Literal["pending", "running", "completed", "failed", "stopped"]


class RunStartIn(StrictSchema):
    request_key: str = Field("", description="Same key, same run: a replay answers 200 with the first run")


class RerunIn(StrictSchema):
    request_key: str = ""
    version: int | None = Field(None, description="Agent version number; the run's own version when empty")


class RescoreIn(StrictSchema):
    request_key: str = ""
    judge_config: int | None = Field(
        None,
        description="Number (v1, v2...) of a judge configuration of the run's dataset; empty: its current settings",
    )


class ErrorOut(Schema):
    detail: str


class JudgeConfigOut(Schema):
    id: int
    number: int = Field(description="Per dataset: v1, v2...")
    label: str = Field(description='e.g. "judge v3: gpt-4o-mini, custom criteria"')
    fingerprint: str = Field(description="sha256 of the judge model, prompt template, criteria, threshold, scorers")
    judge_model: str
    threshold: int
    scorers: list[str]
    resamples: int
    examples: int = Field(description="Reviewer examples in its prompt")

    @staticmethod
    def resolve_examples(config: Any) -> int:
        return len(config.examples)


class RunOut(Schema):
    id: int
    agent_id: int
    dataset_id: int | None
    dataset_name: str
    agent_version: int
    purpose: str = Field(description="run | rerun | verify | rescore")
    parent_id: int | None
    judge: JudgeConfigOut | None = Field(description="The judge configuration that scored it")
    status: str
    error: str
    scorer: str
    judge_model: str
    concurrency: int
    total: int
    completed: int
    passed: int
    failed: int
    errored: int
    average_score: float | None
    robustness: float | None
    consistency: float | None
    agent_tokens: int
    judge_tokens: int
    agent_cost: float
    judge_cost: float
    simulator_tokens: int = Field(description="The user simulator of scenario cases, apart from agent and judge")
    simulator_cost: float
    summary: str
    summary_note: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @staticmethod
    def resolve_agent_version(run: Run) -> int:
        return run.agent_version.number

    @staticmethod
    def resolve_judge(run: Run) -> Any:
        return run.judge_config

    @staticmethod
    def resolve_average_score(run: Run) -> float | None:
        return run.current_average


class ResultOut(Schema):
    id: int
    case_position: int = Field(description="The case's number in the run, from 1")
    case_id: str
    repeat: int = Field(description="From 1")
    variant: int = Field(description="0: the case as written; 1..n: its smoke-test paraphrases")
    status: str
    question: str
    expected_answer: str
    actual_answer: str
    conversation: list[dict[str, Any]]
    tool_calls: list[dict[str, Any]]
    retrieval_context: list[str]
    trace_id: str
    score: float | None
    verdict: str
    reasoning: str
    error: str
    scorers: list[dict[str, Any]]
    judge_samples: list[float] = Field(description="Every judge score when it was asked again near the threshold")
    judge_stable: bool | None = Field(description="Whether those samples agree on pass or fail; null: asked once")
    rescored_from_id: int | None = Field(description="A re-score's result: the result whose answer it judged again")
    duration_ms: int | None
    agent_tokens: int
    judge_tokens: int
    agent_cost: float
    judge_cost: float
    simulator_tokens: int
    simulator_cost: float
    scenario: dict[str, Any] = Field(
        description="A scenario case's ending: ended_by (simulator | turn_limit), goal (reached | abandoned), "
        "reason, user_turns, max_turns, failing_turn; {} for scripted cases"
    )

    @staticmethod
    def resolve_case_position(result: Any) -> int:
        return result.case.position + 1

    @staticmethod
    def resolve_case_id(result: Any) -> str:
        return result.case.case_id

    @staticmethod
    def resolve_repeat(result: Any) -> int:
        return result.repeat + 1

    @staticmethod
    def resolve_expected_answer(result: Any) -> str:
        return result.case.expected_answer


class RunDetailOut(RunOut):
    results: list[ResultOut] = Field(description="One page of results, in case order")
    results_count: int
    results_next: str | None = Field(description="The next page of results, or null")

    # run_detail sets the page on the run (Run.results is the reverse relation, hence the names).
    @staticmethod
    def resolve_results(run: Run) -> list[Any]:
        return getattr(run, "page_results")  # noqa: B009 (not a Run attribute for mypy)

    @staticmethod
    def resolve_results_count(run: Run) -> int:
        return getattr(run, "page_count")  # noqa: B009 (not a Run attribute for mypy)

    @staticmethod
    def resolve_results_next(run: Run) -> str | None:
        return getattr(run, "page_next")  # noqa: B009 (not a Run attribute for mypy)


class RunStatusOut(Schema):
    """What a poller needs, from the run row alone."""

    id: int
    status: str
    finished: bool
    error: str
    total: int
    completed: int
    passed: int
    failed: int
    errored: int
    average_score: float | None

    @staticmethod
    def resolve_finished(run: Run) -> bool:
        return not run.is_active

    @staticmethod
    def resolve_average_score(run: Run) -> float | None:
        return run.current_average


class SideOut(Schema):
    number: int
    status: str
    score: float | None


class CaseRowOut(Schema):
    question: str
    case_id: str
    a: SideOut | None
    b: SideOut | None
    change: str = Field(description="regression | fix | better | worse | same | unscored | only_a | only_b")
    delta: float | None
    changed_fields: list[str]


class TotalsOut(Schema):
    passed: int
    failed: int
    errored: int
    scored: int
    pass_rate: float | None
    average: float | None
    cost: float
    duration: float | None


class PairedTestOut(Schema):
    cases: int = Field(description="Cases scored in both runs (the test covers these only)")
    fixes: int = Field(description="Failed in the baseline, pass in the run")
    breaks: int = Field(description="Passed in the baseline, fail in the run")
    p_value: float = Field(description="Exact McNemar, two-sided, on the fixes and breaks")
    alpha: float
    significant: bool
    significantly_worse: bool
    significantly_better: bool
    mean_difference: float | None = Field(description="Mean over cases of (run's mean score - baseline's)")
    interval: list[float] | None = Field(description="Paired bootstrap 95% interval of mean_difference (seeded)")
    sentence: str
    interval_sentence: str


class ComparisonOut(Schema):
    a: RunOut
    b: RunOut
    comparable: bool = Field(description="False when something besides the agent changed (see differences)")
    differences: list[str]
    notes: list[str]
    compared: int = Field(description="Cases scored in both runs")
    test: PairedTestOut
    judges_differ: str | None = Field(
        None, alias="judges", description="Set when the judges differ: then changes are not fixes or regressions"
    )
    totals_a: TotalsOut
    totals_b: TotalsOut
    regressions: list[CaseRowOut]
    fixes: list[CaseRowOut]
    rows: list[CaseRowOut]

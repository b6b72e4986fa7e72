"""The runs API's request and response schemas (runs/api.py): what each operation takes and
answers, and so what the OpenAPI document at /api/docs says."""

from datetime import datetime
from typing import Any, Literal

from ninja import Field, Schema

from evalsite.schemas import StrictSchema
from runs.judging.trust import run_trust_notes
from runs.models import Run
from runs.reports import tools

RunStatus = Literal["pending", "running", "completed", "failed", "stopped"]


class RunStartIn(StrictSchema):
    request_key: str = Field("", description="Same key, same run: a replay answers 200 with the first run")
    allow_failed_preflight: bool = Field(
        False,
        description="Start even though the judge failed its preflight; the run is marked judge_failed_preflight",
    )


class PreflightRefusedOut(Schema):
    detail: str
    code: str = Field(description="judge_not_preflighted (its preflight has started: retry) | judge_failed_preflight")
    retry_after: int | None = Field(None, description="Seconds to wait before starting again (preflight running)")
    preflight: dict[str, Any] = Field(description="The judge's preflight: status, reasons, items, cost ({} if none)")


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
    model_identity: str = Field(description="What the model server said it runs behind judge_model")
    preflight_status: str = Field(description='"" (not preflighted), "passed" or "failed"')

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
    abstained: int = Field(
        description="Results the offline scorer could not check (status abstained, 'Needs a judge model'): "
        "neither passed nor failed, left out of the pass rate"
    )
    judge_failed_preflight: bool = Field(
        description="Started although its judge failed preflight: scores not trustworthy"
    )
    average_score: float | None
    robustness: float | None
    consistency: float | None
    agent_tokens: int
    judge_tokens: int
    agent_cost: float
    judge_cost: float
    simulator_tokens: int = Field(description="The user simulator of scenario cases, apart from agent and judge")
    simulator_cost: float
    ungated_checks_failed: int = Field(
        description="Results whose retrieval-context check failed without changing the verdict (dataset setting)"
    )
    summary: str
    summary_note: str
    summary_model: str = Field(description="The model that wrote the summary (a model's prose, not the run's figures)")
    summary_disagreements: list[str] = Field(
        description="What the summary states that the run's own figures contradict (empty: it agreed)"
    )
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
    status: str = Field(description="pass | fail | error | abstained (needs a judge model) | skipped | pending...")
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
    error_kind: str = Field(description="'' | agent | judge | judge_unusable (the judge's answer failed its checks)")
    cut: list[dict[str, Any]] = Field(
        description="Model answers that ended at their token limit: [{call: agent | judge | ..., limit}]"
    )
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
    tool_diagnosis: dict[str, list[str]] | None = Field(
        description="For a case that expects tools: the tools matched, missing, extra and called with other "
        "arguments, in the case's trajectory mode (the card and the exports say the same); null otherwise"
    )

    @staticmethod
    def resolve_tool_diagnosis(result: Any) -> dict[str, list[str]] | None:
        diagnosis = tools.result_diagnosis(result)
        return diagnosis.as_dict() if diagnosis else None

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


class TrustOut(Schema):
    abstained: int
    judge_unusable: int = Field(description="Results whose judge answer failed its checks (counted as errors)")
    cut: list[dict[str, Any]] = Field(description="Answers cut at their token limit: [{call, limit, count, setting}]")
    judge_failed_preflight: bool
    notes: list[str] = Field(description="The same, in sentences, as the run page says them")


class RunDetailOut(RunOut):
    trust: TrustOut = Field(description="What the run's figures leave out or cannot vouch for")
    results: list[ResultOut] = Field(description="One page of results, in case order")
    results_count: int
    results_next: str | None = Field(description="The next page of results, or null")

    # run_detail sets the page on the run (Run.results is the reverse relation, hence the names).
    @staticmethod
    def resolve_trust(run: Run) -> dict[str, Any]:
        notes = run_trust_notes(run=run)
        return {**notes.as_dict(), "notes": notes.lines()}

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
    abstained: int
    judge_failed_preflight: bool
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
    abstained: int = Field(description="Cases that need a judge model: left out of scored and pass_rate")
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


class EstimatePartOut(Schema):
    label: str = Field(description="Agent, Judge, Judge re-asks (near the line), User simulator, Paraphrases")
    calls: int
    prompt_tokens: int = Field(description="Per call")
    completion_tokens: int = Field(description="Per call")
    model: str
    cost: float | None = Field(description="USD for every call at the central estimate; null: no known price")
    low: float = Field(description="The range's low end as a share of the central figure")
    high: float
    basis: str = Field(description="What the figures come from: earlier runs (which) or the prompt's size")


class EstimateOut(Schema):
    cases: int
    results: int = Field(description="Cases x repeats, plus smoke-test variants")
    judge: JudgeConfigOut | None = Field(description="The judge configuration the run would be scored by")
    cost_low: float
    cost_high: float
    tokens_low: int
    tokens_high: int
    calls: int
    seconds_low: float | None
    seconds_high: float | None
    unpriced: list[str] = Field(description="Models with no known price, left out of the cost")
    parts: list[EstimatePartOut]

    @staticmethod
    def resolve_judge(estimate: Any) -> Any:
        return estimate.judge_config

    @staticmethod
    def resolve_seconds_low(estimate: Any) -> float | None:
        return estimate.seconds_range[0] if estimate.seconds_range else None

    @staticmethod
    def resolve_seconds_high(estimate: Any) -> float | None:
        return estimate.seconds_range[1] if estimate.seconds_range else None

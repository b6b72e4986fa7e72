"""Reads for the run page's "Suggested changes" panel: its state, applied versions and
verifications; and the rules the services, the panel and the dialog share (which runs need
suggestions, a lost job, which agents can take a new version)."""

from __future__ import annotations

import copy
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import timedelta

from django.db.models import QuerySet
from django.urls import reverse
from django.utils import timezone

from agents.diff import FieldDiff, version_diff
from agents.models import Agent, AgentVersion
from runs.comparing.pairing import CHANGE_FIX, CHANGE_REGRESSION, SCORED, pairing_test, run_pairing
from runs.comparing.stats import PairedTest, mcnemar_exact
from runs.judging.configs import judges_differ
from runs.models import Result, Run
from runs.selectors import CASE_PASS, case_outcomes
from suggestions.models import Suggestion, SuggestionGeneration

# Verify runs shown on a run's panel, newest first; older ones stay in the run history.
VERIFICATIONS_SHOWN = 3
# A completed run whose average is below this needs suggestions even when every case passed.
PASSING_AVERAGE = 7.0
# A job queued or running this long was lost (its task outlives the hard time limit, 960 s):
# the page offers to try again instead of showing "generating" forever.
GENERATION_STALE_AFTER = timedelta(minutes=20)


def run_needs_suggestions(run: Run) -> bool:
    if run.status != Run.Status.COMPLETED:
        return False
    weak_average = run.average_score is not None and run.average_score < PASSING_AVERAGE
    return run.failed + run.errored > 0 or weak_average


def generation_is_stale(generation: SuggestionGeneration) -> bool:
    return generation.is_active and generation.queued_at < timezone.now() - GENERATION_STALE_AFTER


def suggestion_apply_blocker(*, agent: Agent) -> str:
    """Why suggestions cannot become a new version of this agent, or "" when they can: the one
    rule behind the service's refusal, the dialog's and the panel's disabled Apply."""
    if agent.kind == Agent.Kind.HTTP:
        return "HTTP agents are configured elsewhere: download the change request instead."
    return ""


class PanelState:
    ACTIVE = "active"  # the run is still going
    UNAVAILABLE = "unavailable"  # failed or stopped: nothing to learn from reliably
    NONE_NEEDED = "none_needed"  # everything passed with a good average
    NOT_STARTED = "not_started"  # completed before suggestions were wired up, or never queued
    GENERATING = "generating"
    STALLED = "stalled"  # queued or running for too long: the job was lost
    ERROR = "error"
    EMPTY = "empty"  # the job ran and found nothing to suggest
    READY = "ready"


@dataclass
class CaseChange:
    """A case whose outcome changed: numbered as on the original run, linked to the verify run's card."""

    parent_position: int
    position: int
    question: str
    number: int = 0  # the case's number in its dataset, the same on both runs


@dataclass
class VerifyComparison:
    run: Run  # the verify run
    parent: Run
    compared: int  # cases of the verify run that were scored in both runs
    total: int  # cases in the verify run
    sampled_passing: int  # cases that passed before (all of them in a full verify)
    failing_before: int
    passed_before: int
    passed_after: int
    failed_after: int
    fixes: list[CaseChange]
    regressions: list[CaseChange]
    average_before: float | None
    average_after: float | None
    compare_url: str
    parent_total: int  # cases in the original run
    test: PairedTest | None = None  # the compare page's paired test, over the same cases
    judges: str | None = None  # set when the two runs' judges differ (runs.judging.configs)

    @property
    def full(self) -> bool:
        return self.total >= self.parent_total

    @property
    def score_delta(self) -> float | None:
        if self.average_before is None or self.average_after is None:
            return None
        return self.average_after - self.average_before

    @property
    def pass_delta(self) -> int:
        return self.passed_after - self.passed_before

    @property
    def evidence(self) -> str:
        """When the change helped but the test cannot tell it from chance: that, in plain words,
        and what would make it tell ("" otherwise)."""
        test = self.test
        if test is None or self.judges or test.significant or test.fixes <= test.breaks:
            return ""
        needed = fixes_needed(breaks=test.breaks, alpha=test.alpha)
        fixes = f"{test.fixes} fix{'es' if test.fixes != 1 else ''}"
        breaks = f"{test.breaks or 'no'} regression{'s' if test.breaks != 1 else ''}"
        cases = f"{test.cases} case{'s' if test.cases != 1 else ''}"
        return (
            f"{fixes} and {breaks} on {cases} is a good sign, but not yet proof: a change that made no "
            f"difference would still split the changed verdicts this unevenly {_odds(test.p_value)} "
            f"({test.p_text}). The exact test counts the cases whose verdict changed; with {breaks} it needs at "
            f"least {needed} fixes to call the change real (p < {test.alpha:g}). More cases that exercise what "
            "changed would show it; running each case more times makes every verdict steadier, but the test "
            "still counts cases."
        )


@dataclass
class AppliedVersion:
    version: AgentVersion
    previous: AgentVersion | None
    diff: list[FieldDiff]
    suggestions: list[Suggestion]


@dataclass
class SuggestionPanel:
    agent: Agent
    run: Run
    state: str
    suggestions: list[Suggestion] = field(default_factory=list)
    generation: SuggestionGeneration | None = None
    applied: list[AppliedVersion] = field(default_factory=list)
    verifications: list[VerifyComparison] = field(default_factory=list)
    # When this run is itself a verification: how it compares with the run it verifies.
    verifies: VerifyComparison | None = None
    # The version a Verify would test: the newest one made from this run's suggestions
    # (for HTTP agents, whose changes are deployed elsewhere, the current version).
    verify_version: AgentVersion | None = None
    failing_cases: int = 0
    passing_cases: int = 0

    @property
    def polling(self) -> bool:
        # Not while the run is going (ACTIVE): the run page's poll brings the panel when the
        # run ends, so the page never shows final suggestions beside "Running" and Stop.
        generating = self.state == PanelState.GENERATING
        return (
            generating
            or any(v.run.is_active for v in self.verifications)
            or bool(self.verifies and self.verifies.parent.is_active)
        )

    @property
    def proposed(self) -> list[Suggestion]:
        return [s for s in self.suggestions if s.state == Suggestion.State.PROPOSED]

    @property
    def offline(self) -> bool:
        return any(s.offline for s in self.suggestions)

    @property
    def is_http(self) -> bool:
        return self.agent.kind == Agent.Kind.HTTP

    @property
    def apply_blocker(self) -> str:
        return suggestion_apply_blocker(agent=self.agent)

    @property
    def total_cases(self) -> int:
        return self.failing_cases + self.passing_cases


def suggestion_list(*, run: Run) -> QuerySet[Suggestion]:
    """The run's suggestions in order, with their motivating cases and applied version (3 queries)."""
    return (
        Suggestion.objects.filter(run=run)
        .select_related("applied_version__created_by")
        .prefetch_related("cases")
        .order_by("position", "id")
    )


def suggestion_panel_get(*, agent: Agent, run: Run) -> SuggestionPanel:
    panel = SuggestionPanel(agent=agent, run=run, state=PanelState.READY)
    if run.purpose == Run.Purpose.VERIFY and run.parent_id:
        parent = Run.objects.filter(pk=run.parent_id, agent=agent).first()
        panel.verifies = verify_comparison_get(parent=parent, run=run) if parent else None
    if run.is_active:
        panel.state = PanelState.ACTIVE
        return panel
    panel.suggestions = list(suggestion_list(run=run))
    panel.generation = SuggestionGeneration.objects.filter(run=run).first()
    panel.state = _state(run, panel.suggestions, panel.generation)
    if panel.suggestions:
        panel.applied = _applied_versions(panel.suggestions)
        outcomes = case_outcomes(run=run)
        panel.passing_cases = sum(1 for outcome in outcomes.values() if outcome == Result.Status.PASS)
        panel.failing_cases = len(outcomes) - panel.passing_cases
        if panel.is_http:
            panel.verify_version = agent.current_version
        elif panel.applied:
            panel.verify_version = panel.applied[0].version
    verify_runs = (
        Run.objects.filter(parent=run, purpose=Run.Purpose.VERIFY)
        .select_related("agent_version")
        .order_by("-created_at", "-id")[:VERIFICATIONS_SHOWN]
    )
    panel.verifications = [verify_comparison_get(parent=run, run=child) for child in verify_runs]
    return panel


def _state(run: Run, suggestions: list[Suggestion], generation: SuggestionGeneration | None) -> str:
    if run.status != Run.Status.COMPLETED:
        return PanelState.UNAVAILABLE
    if suggestions:
        return PanelState.READY
    if generation is None:
        return PanelState.NOT_STARTED if run_needs_suggestions(run) else PanelState.NONE_NEEDED
    if generation.is_active:
        return PanelState.STALLED if generation_is_stale(generation) else PanelState.GENERATING
    if generation.status == SuggestionGeneration.Status.FAILED:
        return PanelState.ERROR
    return PanelState.EMPTY if run_needs_suggestions(run) else PanelState.NONE_NEEDED


def _applied_versions(suggestions: list[Suggestion]) -> list[AppliedVersion]:
    """The versions made from these suggestions, newest first, each with its diff to the one before."""
    by_version: dict[int, list[Suggestion]] = defaultdict(list)
    versions: dict[int, AgentVersion] = {}
    for suggestion in suggestions:
        if suggestion.applied_version is not None:
            by_version[suggestion.applied_version.pk].append(suggestion)
            versions[suggestion.applied_version.pk] = suggestion.applied_version
    applied = []
    for version in sorted(versions.values(), key=lambda v: v.number, reverse=True):
        # Applying always builds on the current version, which is the newest one (a roll back
        # is saved as a new version too), so the version before is number - 1.
        previous = AgentVersion.objects.filter(agent_id=version.agent_id, number=version.number - 1).first()
        diff = version_diff(previous, version) if previous else []
        applied.append(AppliedVersion(version, previous, diff, by_version[version.pk]))
    return applied


def verify_comparison_get(*, parent: Run, run: Run) -> VerifyComparison:
    """The verify run against the run it verifies, case by case.

    Cases are paired, and fixes and regressions named, by runs.comparing.pairing: the same module as
    the compare page, so the panel and "Compare runs" always agree.
    """
    pairing = run_pairing(a=parent, b=run)
    fixes, regressions = [], []
    passed_before = passed_after = failed_after = failing_before = sampled_passing = 0
    scores_before: list[float] = []
    scores_after: list[float] = []
    for pair in pairing.pairs:
        old, new = pair.outcome_a, pair.outcome_b
        if old is not None and old.status in SCORED:
            sampled_passing += old.status == CASE_PASS
            failing_before += old.status != CASE_PASS
        if not pair.scored or old is None or new is None:
            continue  # not scored in one of the runs (skipped, or still running)
        passed_before += old.status == CASE_PASS
        passed_after += new.status == CASE_PASS
        failed_after += new.status != CASE_PASS
        if old.score is not None and new.score is not None:
            scores_before.append(old.score)
            scores_after.append(new.score)
        change = CaseChange(
            pair.case_a.position, pair.case_b.position, pair.case_b.question, pair.case_b.display_number
        )
        if pair.change == CHANGE_FIX:
            fixes.append(change)
        elif pair.change == CHANGE_REGRESSION:
            regressions.append(change)
    return VerifyComparison(
        run=run,
        parent=parent,
        compared=len(pairing.shared),
        total=len(pairing.pairs),
        sampled_passing=sampled_passing,
        failing_before=failing_before,
        passed_before=passed_before,
        passed_after=passed_after,
        failed_after=failed_after,
        fixes=fixes,
        regressions=regressions,
        average_before=_mean(scores_before),
        average_after=_mean(scores_after),
        compare_url=_compare_url(parent, run),
        parent_total=len(pairing.outcomes_a),
        test=pairing_test(pairing) if not run.is_active else None,
        judges=judges_differ(parent, run),
    )


def fixes_needed(*, breaks: int, alpha: float) -> int:
    """The fewest fixes that, with `breaks` regressions, the exact McNemar test calls significant."""
    fixes = breaks + 1
    while mcnemar_exact(fixes, breaks) >= alpha:
        fixes += 1
    return fixes


def _odds(p_value: float) -> str:
    """A p-value as odds a reader can picture: "1 time in 4"."""
    return f"about 1 time in {max(2, round(1 / p_value))}" if p_value > 0 else "almost never"


def _mean(scores: list[float]) -> float | None:
    return sum(scores) / len(scores) if scores else None


def _compare_url(parent: Run, run: Run) -> str:
    """The runs' comparison page, the parent run against its verify run."""
    return reverse("runs:compare", args=[parent.agent_id]) + f"?a={parent.pk}&b={run.pk}"


def preview_diff(*, version: AgentVersion, field_name: str, text: str) -> FieldDiff | None:
    """The diff of one field of `version` against the text it would get (None when unchanged)."""
    proposed = copy.copy(version)
    setattr(proposed, field_name, text)
    return next(iter(version_diff(version, proposed)), None)

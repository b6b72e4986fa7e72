"""Reads shared by the run pages, the exports, the CLI and the API.

The run page works per case, not per result: a case may have several results (repeats,
smoke-test variants), and its card, its filter (passed, failed, error, flaky) and its
place in the comparison come from all of them. `case_outcome_list` derives every case's
outcome from one narrow query over the run's results, so a page or a poll costs the
same number of queries whether the run has 10 results or 10,000.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Case, Count, OuterRef, Q, QuerySet, Subquery, Value, When
from django.db.models.functions import Floor
from django.shortcuts import get_object_or_404

from agents.models import Agent
from runs.judging.trust import cut_label, cut_setting
from runs.models import DatasetBaseline, Result, Run, RunCase

# A case's outcome, the run page's pages and counts, and the poll's cursor live in
# runs/outcomes.py; every caller reads them from here.
from runs.outcomes import (  # noqa: F401 (re-exported)
    CARDS_PER_PAGE,
    CASE_ABSTAINED,
    CASE_ERROR,
    CASE_FAIL,
    CASE_PASS,
    CASE_PENDING,
    CASE_SKIPPED,
    FILTERS,
    SORTS,
    CaseOutcome,
    CasePage,
    StatusCounts,
    case_counts,
    case_filter_counts,
    case_outcome_list,
    case_outcome_range,
    case_outcomes,
    case_page,
    case_page_read,
    one_result_per_case,
    run_status_counts,
    seen_decode,
    seen_encode,
)

# Relations the result cards show that belong to apps above runs (the reviews app adds a
# result's reviews and the case's current dataset row). Apps append here in their
# AppConfig.ready(); runs never imports them. Each prefetch is one query per page of cards.
CARD_PREFETCHES: list[Any] = []
CARD_SELECT_RELATED: list[str] = []  # the same, for relations one join away (no extra query)
# What a card never shows: not read for a page of cards (the retrieved passages can be long).
CARD_DEFERRED = ("retrieval_context", "token", "claimed_by", "rescored_from")


# ---- runs ------------------------------------------------------------------------


def run_list(*, agent: Agent, query: str = "") -> QuerySet[Run]:
    """The agent's runs, newest first; `query` matches the dataset name or a status."""
    runs = Run.objects.filter(agent=agent).select_related("agent_version", "created_by", "judge_config")
    query = query.strip()
    if query:
        statuses = [value for value, label in Run.Status.choices if label.lower().startswith(query.lower())]
        runs = runs.filter(Q(dataset_name__icontains=query) | Q(status__in=statuses))
    return runs


def run_get(*, agent: Agent, run_id: int, with_baseline: bool = False) -> Run:
    """The agent's run, or 404. `with_baseline` annotates `baseline_run_id`, its dataset's
    pinned baseline (None when there is none), in the same query: the run page's baseline box."""
    runs = run_list(agent=agent)
    if with_baseline:
        pinned = DatasetBaseline.objects.filter(dataset_id=OuterRef("dataset_id")).values("run_id")[:1]
        runs = runs.annotate(baseline_run_id=Subquery(pinned))
    return get_object_or_404(runs, pk=run_id)


def run_get_with_agent(*, user: User | AnonymousUser, agent_id: int, run_id: int, with_baseline: bool = False) -> Run:
    """`run_get` of an agent of the user's teams, with `run.agent` (and its team and current
    version) in the same query: the run page's first read. 404 for anyone outside the team."""
    if isinstance(user, AnonymousUser):
        runs = Run.objects.none()
    else:
        runs = Run.objects.filter(agent_id=agent_id, agent__team__memberships__user=user).select_related(
            "agent__team", "agent__current_version", "agent_version", "created_by", "judge_config"
        )
    if with_baseline:
        pinned = DatasetBaseline.objects.filter(dataset_id=OuterRef("dataset_id")).values("run_id")[:1]
        runs = runs.annotate(baseline_run_id=Subquery(pinned))
    return get_object_or_404(runs, pk=run_id)


def run_get_for_user(*, user: User | AnonymousUser, run_id: int) -> Run:
    """A run of any agent of the user's teams, or 404 (never 403: outsiders learn nothing)."""
    if isinstance(user, AnonymousUser):
        runs = Run.objects.none()
    else:
        runs = Run.objects.filter(agent__team__memberships__user=user).select_related(
            "agent", "agent_version", "judge_config"
        )
    return get_object_or_404(runs, pk=run_id)


def run_duration_seconds(run: Run, now: datetime | None = None) -> float | None:
    """From the first case started (or creation) to the end, or to `now` while it runs."""
    start = run.started_at or run.created_at
    end = run.finished_at or now
    if start is None or end is None:
        return None
    return max(0.0, (end - start).total_seconds())


def run_related_list(*, run: Run) -> QuerySet[Run]:
    """Runs made from this one (re-runs and verifications), newest first."""
    return Run.objects.filter(parent=run).select_related("agent_version").order_by("-created_at", "-id")


def run_compare_candidates(*, run: Run) -> QuerySet[Run]:
    """Other runs of the same dataset, to compare with (newest first)."""
    if run.dataset_id is None:
        return Run.objects.none()
    return Run.objects.filter(agent_id=run.agent_id, dataset_id=run.dataset_id).exclude(pk=run.pk)


def run_compare_default(*, run: Run) -> Run | None:
    """The run to compare this one with: the latest earlier run of its dataset, else the newest later one."""
    earlier_first = Case(When(created_at__lt=run.created_at, then=Value(0)), default=Value(1))
    return run_compare_candidates(run=run).order_by(earlier_first, "-created_at", "-id").first()


@dataclass
class RunRepeats:
    """How many times the agent was asked about a result again, and after what (issue 35)."""

    total: int
    causes: list[tuple[str, int]]  # (label, times), most first


def run_repeats(*, run: Run) -> RunRepeats:
    """Every repeat call of this run (a lost worker, a lost broker connection, a database
    error): each asked the agent, then the judge, about the same result a second time."""
    total = 0
    counts: dict[str, int] = {}
    for attempts, repeats in Result.objects.filter(run=run, attempts__gt=1).values_list("attempts", "repeats"):
        total += attempts - 1
        for entry in (repeats or [])[: attempts - 1]:
            counts[entry.get("cause", "")] = counts.get(entry.get("cause", ""), 0) + 1
    labels = dict(Result.RepeatCause.choices)
    causes = [(labels.get(cause, "an unrecorded cause"), n) for cause, n in counts.items()]
    unrecorded = total - sum(counts.values())
    if unrecorded > 0:  # results from before causes were recorded
        causes.append(("an unrecorded cause", unrecorded))
    return RunRepeats(total=total, causes=sorted(causes, key=lambda item: -item[1]))


def run_main_total(*, run: Run) -> int:
    """How many results count in the pass rate: every repeat of every case, variants excluded,
    and the abstentions ("Needs a judge model"), which are neither pass nor fail."""
    results = Result.objects.filter(run=run, variant=0).exclude(Result.NEEDS_SIMULATOR_Q)
    return results.exclude(status=Result.Status.ABSTAINED).count()


@dataclass
class RunCounts:
    """A run's figures under the one definition Evalsite uses, and the other as a detail.

    The definition: per request, every repeat of every case as written (what the run's
    counters, the CI gate, the API and the exports count; smoke variants are apart). The
    detail: per case, where a case passes only when every one of its repeats passed (what
    the cards, the filters and the comparison show).
    """

    requests: int
    passed: int
    failed: int
    errored: int
    skipped: int
    cases: int
    cases_passed: int
    cases_failed: int
    cases_errored: int
    cases_skipped: int
    cases_flaky: int
    repeats: int
    # "Needs a judge model": the offline scorer could not check them; out of every pass rate.
    abstained: int = 0
    cases_abstained: int = 0

    @property
    def pass_rate(self) -> float | None:
        counted = self.requests - self.abstained
        return self.passed / counted if counted else None

    @property
    def case_pass_rate(self) -> float | None:
        counted = self.cases - self.cases_abstained
        return self.cases_passed / counted if counted else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "passed": self.passed,
            "failed": self.failed,
            "errored": self.errored,
            "abstained": self.abstained,
            "skipped": self.skipped,
            "pass_rate": None if self.pass_rate is None else round(self.pass_rate, 4),
            "cases": {
                "total": self.cases,
                "passed": self.cases_passed,
                "failed": self.cases_failed,
                "errored": self.cases_errored,
                "abstained": self.cases_abstained,
                "skipped": self.cases_skipped,
                "flaky": self.cases_flaky,
                "pass_rate": None if self.case_pass_rate is None else round(self.case_pass_rate, 4),
            },
        }


def run_counts(
    *, run: Run, outcomes: list[CaseOutcome] | None = None, counts: dict[str, int] | None = None
) -> RunCounts:
    """Both definitions of the run's counts (one aggregate query; the per-case ones from the
    outcomes or the `case_counts` given, else counted in the database)."""
    # Scenario cases no model could play are no requests: they neither pass nor fail.
    main = (
        Result.objects.filter(run=run, variant=0)
        .exclude(Result.NEEDS_SIMULATOR_Q)
        .aggregate(
            requests=Count("id"),
            passed=Count("id", filter=Q(status=Result.Status.PASS)),
            failed=Count("id", filter=Q(status=Result.Status.FAIL)),
            errored=Count("id", filter=Q(status=Result.Status.ERROR)),
            skipped=Count("id", filter=Q(status=Result.Status.SKIPPED)),
            abstained=Count("id", filter=Q(status=Result.Status.ABSTAINED)),
        )
    )
    cases = counts or (case_filter_counts(outcomes) if outcomes is not None else case_counts(run=run))
    return RunCounts(
        **main,
        cases=cases["all"],
        cases_passed=cases["passed"],
        cases_failed=cases["failed"],
        cases_errored=cases["error"],
        cases_skipped=cases["not_run"],
        cases_flaky=cases["flaky"],
        cases_abstained=cases.get("abstained", 0),
        repeats=max(1, int(run.scoring.get("number_of_requests") or 1)),
    )


def result_list(*, run: Run) -> QuerySet[Result]:
    """Every result of the run in case order, with its case (one query, no N+1)."""
    return Result.objects.filter(run=run).select_related("case").order_by("case__position", "repeat", "variant")


@dataclass
class CaseCard:
    """Everything one result card shows. Its derived figures are computed once per card (a card's
    template reads several of them more than once)."""

    case: RunCase
    outcome: CaseOutcome
    attempts: list[Result]  # the case as written, one per repeat
    variants: list[Result]  # smoke-test paraphrases

    @cached_property
    def primary(self) -> Result | None:
        return self.attempts[0] if self.attempts else None

    @property
    def single(self) -> bool:
        """One attempt (no repeats): its verdict shows on the card's line."""
        return len(self.attempts) == 1

    @property
    def repeated(self) -> bool:
        return len(self.attempts) > 1

    @cached_property
    def failed_checks(self) -> list[dict[str, Any]]:
        """The deterministic checks (the tool trajectory; retrieval context where the dataset says
        so) that failed the case whatever its score, one row per check (from the first attempt
        where it failed)."""
        from runs.judging.scoring import GATING_SCORERS

        failed: dict[str, dict[str, Any]] = {}
        for attempt in self.attempts:
            for row in attempt.scorers or []:
                gates = row.get("gates") or row.get("name") in GATING_SCORERS  # rows before "gates" was stored
                if gates and row.get("passed") is False:
                    failed.setdefault(str(row["name"]), row)
        return list(failed.values())

    @cached_property
    def cuts(self) -> list[dict[str, Any]]:
        """The first attempt's model answers that ended at their token limit, as the card marks them."""
        primary = self.primary
        return [
            {
                "label": cut_label(cut),
                "limit": cut.get("limit") or "limit",
                "title": f"It ended at its token limit; raise {cut_setting(cut)} to give it room.",
            }
            for cut in (primary.cut if primary else None) or []
        ]

    @cached_property
    def spread(self) -> float | None:
        scores = [r.score for r in self.attempts if r.score is not None and r.is_finished]
        return round(max(scores) - min(scores), 1) if len(scores) > 1 else None

    @cached_property
    def documents(self) -> list[dict[str, Any]]:
        """The snapshot's documents, shaped for datasets/partials/document_chip.html."""
        return [
            {"pk": doc.get("id"), "original_name": doc.get("name") or "document", "file_type": doc.get("file_type", "")}
            for doc in self.case.data.get("documents") or []
        ]

    @cached_property
    def source_case(self) -> dict[str, Any] | None:
        return {"pk": self.case.source_case_id} if self.case.source_case_id else None

    @cached_property
    def tags(self) -> list[str]:
        return [str(tag) for tag in self.case.data.get("tags") or []]

    @cached_property
    def is_scenario(self) -> bool:
        """A simulated user played it: its card shows the whole chat (runs/partials/result_scenario.html)."""
        return bool(self.case.data.get("scenario"))

    @cached_property
    def earlier_turns(self) -> list[dict[str, str]]:
        """A multi-turn case's exchange before its last question, as the agent saw it."""
        if self.is_scenario:
            return []
        primary = self.primary
        conversation = list(primary.conversation) if primary and primary.conversation else []
        return conversation[:-2] if len(conversation) >= 2 else conversation

    @cached_property
    def variants_passed(self) -> int:
        return sum(1 for r in self.variants if r.status == Result.Status.PASS)

    @cached_property
    def variants_run(self) -> int:
        return sum(1 for r in self.variants if r.is_finished)


def case_card_list(*, run: Run, outcomes: list[CaseOutcome]) -> list[CaseCard]:
    """Cards for these cases (finished ones; slots need none): one query however many."""
    wanted = [outcome for outcome in outcomes if outcome.done]
    if not wanted:
        return []
    results: dict[int, list[Result]] = defaultdict(list)
    # By case alone: the cases are the run's (its outcomes), and "run = ? AND case IN (...)" makes
    # SQLite walk the run's index, every result of the run (5,000 cases: 3 ms instead of 0.5).
    queryset = Result.objects.filter(case_id__in=[outcome.case_pk for outcome in wanted])
    # The dataset case too: its card shows whether it is flaky across runs (one join, no query per card).
    queryset = queryset.select_related("case__source_case", *CARD_SELECT_RELATED).prefetch_related(*CARD_PREFETCHES)
    queryset = queryset.defer(*CARD_DEFERRED)
    for result in queryset.order_by("case_id", "variant", "repeat"):
        if result.run_id == run.pk:
            results[result.case_id].append(result)
    cards = []
    for outcome in wanted:
        rows = results[outcome.case_pk]
        cards.append(
            CaseCard(
                case=rows[0].case,
                outcome=outcome,
                attempts=[r for r in rows if r.variant == 0],
                variants=[r for r in rows if r.variant > 0],
            )
        )
    return cards


# ---- charts' data ------------------------------------------------------------------


def run_scores(*, run: Run) -> list[float]:
    """The scores of the finished results of the cases as written (variants excluded)."""
    scores = _finished_scores(run).order_by().values_list("score", flat=True)
    # score__isnull=False already drops the NULLs; the check only tells the type checker.
    return [score for score in scores if score is not None]


def run_score_bins(*, run: Run) -> list[int]:
    """`run_scores` counted per whole point 0-10 (6.7 counts in 6): the histogram's bars,
    grouped in the database (one query, eleven rows at most)."""
    counts = [0] * 11
    rows = _finished_scores(run).annotate(bin=Floor("score")).values("bin").annotate(n=Count("id")).order_by()
    for row in rows:
        counts[min(10, max(0, int(row["bin"])))] += row["n"]
    return counts


def _finished_scores(run: Run) -> QuerySet[Result]:
    return Result.objects.filter(run=run, variant=0, score__isnull=False, status__in=Result.FINISHED_STATUSES)


def tag_outcome_counts(*, run: Run, status: StatusCounts | None = None) -> list[tuple[list[str], str, int]]:
    """(tags, case status, cases) for the run's cases, grouped: the pass rate per tag. When
    each case has one result, grouped in the database by the case's tags and its status
    (one row per tag set and status); otherwise from every case's outcome."""
    if not one_result_per_case(*(status or run_status_counts(run=run))):
        outcomes = case_outcome_list(run=run, with_tags=True)
        return [(outcome.tags, outcome.status, 1) for outcome in outcomes]
    rows = (
        Result.objects.filter(run=run, status__in=Result.FINISHED_STATUSES)
        .values("case__data__tags", "status")
        .annotate(n=Count("id"))
        .order_by()
    )
    return [([str(tag) for tag in row["case__data__tags"] or []], str(row["status"]), row["n"]) for row in rows]

"""Reads shared by the run pages, the exports, the CLI and the API.

The run page works per case, not per result: a case may have several results (repeats,
smoke-test variants), and its card, its filter (passed, failed, error, flaky) and its
place in the comparison come from all of them. `case_outcome_list` derives every case's
outcome from one narrow query over the run's results, so a page or a poll costs the
same number of queries whether the run has 10 results or 10,000.
"""

from __future__ import annotations

import base64
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import connections
from django.db.models import Case, Count, F, OuterRef, Q, QuerySet, Subquery, Sum, Value, When
from django.shortcuts import get_object_or_404

from agents.models import Agent
from runs.models import DatasetBaseline, Result, Run, RunCase

# Case-level statuses. A case passes only when every repeat passed; otherwise the worst
# finished status wins (error over fail), as in case_outcomes.
CASE_PASS, CASE_FAIL, CASE_ERROR = "pass", "fail", "error"
CASE_SKIPPED = "skipped"  # no repeat ran (the run was stopped or failed first)
CASE_PENDING = "pending"  # something of the case is still to run
_UNFINISHED = (Result.Status.PENDING, *Result.IN_FLIGHT_STATUSES)

FILTERS = {
    "all": "All",
    "passed": "Passed",
    "failed": "Failed",
    "error": "Error",
    "not_run": "Not run",  # a stopped or failed run's cases that never ran
    "flaky": "Flaky repeats",  # its repeats in this run disagree (across runs: datasets flaky_mark)
}
SORTS = {
    "position": "Case order",
    "score": "Lowest score first",
    "-score": "Highest score first",
    "duration": "Slowest first",
}
CARDS_PER_PAGE = 100
# Relations the result cards show that belong to apps above runs (the reviews app adds a
# result's reviews and the case's current dataset row). Apps append here in their
# AppConfig.ready(); runs never imports them. Each prefetch is one query per page of cards.
CARD_PREFETCHES: list[Any] = []
CARD_SELECT_RELATED: list[str] = []  # the same, for relations one join away (no extra query)


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


def run_reexecutions(*, run: Run) -> int:
    """How many times this run's cases were executed again because their worker was lost
    (kill -9, OOM, a lost broker connection): each may have asked the agent a second time."""
    extra = Result.objects.filter(run=run, attempts__gt=1).aggregate(n=Sum(F("attempts") - 1))["n"]
    return int(extra or 0)


def run_main_total(*, run: Run) -> int:
    """How many results count in the pass rate: every repeat of every case, variants excluded."""
    return Result.objects.filter(run=run, variant=0).exclude(Result.NEEDS_SIMULATOR_Q).count()


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

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.requests if self.requests else None

    @property
    def case_pass_rate(self) -> float | None:
        return self.cases_passed / self.cases if self.cases else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "passed": self.passed,
            "failed": self.failed,
            "errored": self.errored,
            "skipped": self.skipped,
            "pass_rate": None if self.pass_rate is None else round(self.pass_rate, 4),
            "cases": {
                "total": self.cases,
                "passed": self.cases_passed,
                "failed": self.cases_failed,
                "errored": self.cases_errored,
                "skipped": self.cases_skipped,
                "flaky": self.cases_flaky,
                "pass_rate": None if self.case_pass_rate is None else round(self.case_pass_rate, 4),
            },
        }


def run_counts(*, run: Run, outcomes: list[CaseOutcome]) -> RunCounts:
    """Both definitions of the run's counts (one aggregate query; the outcomes are the cases')."""
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
        )
    )
    cases = case_filter_counts(outcomes)
    return RunCounts(
        **main,
        cases=len(outcomes),
        cases_passed=cases["passed"],
        cases_failed=cases["failed"],
        cases_errored=cases["error"],
        cases_skipped=sum(1 for outcome in outcomes if outcome.status == CASE_SKIPPED),
        cases_flaky=cases["flaky"],
        repeats=max(1, int(run.scoring.get("number_of_requests") or 1)),
    )


def result_list(*, run: Run) -> QuerySet[Result]:
    """Every result of the run in case order, with its case (one query, no N+1)."""
    return Result.objects.filter(run=run).select_related("case").order_by("case__position", "repeat", "variant")


# ---- cases: outcomes, filters, pages ---------------------------------------------


@dataclass(slots=True)
class CaseOutcome:
    """One case of a run, summarised from its results."""

    case_pk: int
    position: int
    status: str = CASE_PENDING
    # The case's number in its dataset (RunCase.number; 0 on rows from before it existed).
    case_number: int = 0
    done: bool = False
    flaky: bool = False
    score: float | None = None
    duration_ms: int | None = None
    tags: list[str] = field(default_factory=list)

    @property
    def number(self) -> int:
        return self.case_number or self.position + 1

    def matches(self, name: str) -> bool:
        if name == "passed":
            return self.status == CASE_PASS
        if name == "failed":
            return self.status == CASE_FAIL
        if name == "error":
            return self.status == CASE_ERROR
        if name == "not_run":
            return self.status == CASE_SKIPPED
        if name == "flaky":
            return self.flaky
        return True


# One row per case: its position, how many of its results are unfinished, the worst and
# best status of its repeats (1 pass, 2 fail, 3 error), and its mean score and duration.
# Hand-written because it is the poll's hot path: on 1,000 cases it runs about three times
# faster than the ORM's equivalent (aggregate FILTER clauses), and skips per-value converters.
_OUTCOME_SQL = """
SELECT r.case_id, MIN(c.position),
  SUM(CASE WHEN r.status IN (%s, %s, %s) THEN 1 ELSE 0 END),
  MAX(CASE WHEN r.variant = 0 THEN (CASE r.status WHEN %s THEN 1 WHEN %s THEN 2 WHEN %s THEN 3 END) END),
  MIN(CASE WHEN r.variant = 0 THEN (CASE r.status WHEN %s THEN 1 WHEN %s THEN 2 WHEN %s THEN 3 END) END),
  AVG(CASE WHEN r.variant = 0 AND r.status IN (%s, %s, %s) THEN r.score END),
  AVG(CASE WHEN r.variant = 0 AND r.status IN (%s, %s, %s) THEN r.duration_ms END),
  MIN(c.number)
FROM {result} r INNER JOIN {case} c ON c.id = r.case_id
WHERE r.run_id = %s
GROUP BY r.case_id
ORDER BY 2
"""
_RANKED = (Result.Status.PASS, Result.Status.FAIL, Result.Status.ERROR)
_BY_RANK = {1: CASE_PASS, 2: CASE_FAIL, 3: CASE_ERROR}


def case_outcome_list(*, run: Run, with_tags: bool = False) -> list[CaseOutcome]:
    """Every case of the run with its outcome, in case order: one query (two with tags)."""
    sql = _OUTCOME_SQL.format(result=Result._meta.db_table, case=RunCase._meta.db_table)
    params = [*_UNFINISHED, *_RANKED, *_RANKED, *_RANKED, *_RANKED, run.pk]
    with connections[Result.objects.db].cursor() as cursor:
        cursor.execute(sql, [str(value) for value in params[:-1]] + [run.pk])
        rows = cursor.fetchall()
    tags: dict[int, list[str]] = {}
    if with_tags:
        tags = {
            pk: list(data.get("tags") or []) for pk, data in RunCase.objects.filter(run=run).values_list("id", "data")
        }
    return [_outcome(row, tags.get(row[0])) for row in rows]


def case_outcomes(*, run: Run) -> dict[int, str]:
    """{position: "pass" | "fail" | "error"} for the run's scored cases: `case_outcome_list`'s rule
    (pass only when every repeat passed, else the worst; smoke variants left out), keyed by
    position. The one rule for the run page, the compare page, Verify and suggestions."""
    scored = (CASE_PASS, CASE_FAIL, CASE_ERROR)
    return {outcome.position: outcome.status for outcome in case_outcome_list(run=run) if outcome.status in scored}


def _outcome(row: tuple[Any, ...], tags: list[str] | None) -> CaseOutcome:
    case_pk, position, unfinished, worst, best, score, duration, number = row
    return CaseOutcome(
        case_pk,
        position,
        CASE_PENDING if unfinished else _BY_RANK.get(worst, CASE_SKIPPED),
        int(number or 0),
        not unfinished,
        # Repeats that disagree: one passed and another did not.
        best == 1 and (worst or 0) > 1,
        None if score is None else round(float(score), 1),
        None if duration is None else round(float(duration)),
        [str(tag) for tag in tags] if tags else [],
    )


def case_filter_counts(outcomes: list[CaseOutcome]) -> dict[str, int]:
    counts = dict.fromkeys(FILTERS, 0)
    counts["all"] = len(outcomes)
    names = {CASE_PASS: "passed", CASE_FAIL: "failed", CASE_ERROR: "error", CASE_SKIPPED: "not_run"}
    for outcome in outcomes:
        if outcome.status in names:
            counts[names[outcome.status]] += 1
        counts["flaky"] += outcome.flaky
    return counts


@dataclass
class CasePage:
    """The cases one request shows, and how to ask for the rest."""

    outcomes: list[CaseOutcome]
    # Position order: cases are paged by position, so cards can be filled in place as they
    # finish; `next_after` is the first position of the next page. Other orders page by offset.
    next_after: int | None = None
    next_offset: int | None = None
    # The positions this page and the ones before it cover (live updates stop there).
    upto: int | None = None


def case_page(outcomes: list[CaseOutcome], *, filter_name: str, sort: str, after: int = 0, offset: int = 0) -> CasePage:
    """One page of cards. In case order, cases still running are kept as empty slots so
    a poll can fill them in place; sorted views show finished cases only."""
    if sort == "position":
        chosen = [o for o in outcomes if o.position >= after and (not o.done or o.matches(filter_name))]
        page = chosen[:CARDS_PER_PAGE]
        more = len(chosen) > CARDS_PER_PAGE
        upto = page[-1].position + 1 if more else None
        return CasePage(page, next_after=upto, upto=upto)
    # Sorted by score or time, cases that never ran have nothing to sort on: only their own filter shows them.
    chosen = [
        o
        for o in outcomes
        if o.done and (o.status != CASE_SKIPPED or filter_name == "not_run") and o.matches(filter_name)
    ]
    chosen.sort(key=_sort_key(sort))
    page = chosen[offset : offset + CARDS_PER_PAGE]
    more = len(chosen) > offset + CARDS_PER_PAGE
    return CasePage(page, next_offset=offset + CARDS_PER_PAGE if more else None)


def _sort_key(sort: str) -> Any:
    missing = float("inf")
    if sort == "score":
        return lambda o: (o.score if o.score is not None else -1.0, o.position)
    if sort == "-score":
        return lambda o: (-(o.score if o.score is not None else -1.0), o.position)
    return lambda o: (-(o.duration_ms if o.duration_ms is not None else -missing), o.position)


@dataclass
class CaseCard:
    """Everything one result card shows."""

    case: RunCase
    outcome: CaseOutcome
    attempts: list[Result]  # the case as written, one per repeat
    variants: list[Result]  # smoke-test paraphrases

    @property
    def primary(self) -> Result | None:
        return self.attempts[0] if self.attempts else None

    @property
    def failed_checks(self) -> list[dict[str, Any]]:
        """The deterministic checks (the tool trajectory) that failed the case whatever its
        score, one row per check (from the first attempt where it failed)."""
        from runs.scoring import GATING_SCORERS

        failed: dict[str, dict[str, Any]] = {}
        for attempt in self.attempts:
            for row in attempt.scorers or []:
                if row.get("name") in GATING_SCORERS and row.get("passed") is False:
                    failed.setdefault(str(row["name"]), row)
        return list(failed.values())

    @property
    def spread(self) -> float | None:
        scores = [r.score for r in self.attempts if r.score is not None and r.is_finished]
        return round(max(scores) - min(scores), 1) if len(scores) > 1 else None

    @property
    def documents(self) -> list[dict[str, Any]]:
        """The snapshot's documents, shaped for datasets/partials/document_chip.html."""
        return [
            {"pk": doc.get("id"), "original_name": doc.get("name") or "document", "file_type": doc.get("file_type", "")}
            for doc in self.case.data.get("documents") or []
        ]

    @property
    def source_case(self) -> dict[str, Any] | None:
        return {"pk": self.case.source_case_id} if self.case.source_case_id else None

    @property
    def tags(self) -> list[str]:
        return [str(tag) for tag in self.case.data.get("tags") or []]

    @property
    def is_scenario(self) -> bool:
        """A simulated user played it: its card shows the whole chat (runs/partials/result_scenario.html)."""
        return bool(self.case.data.get("scenario"))

    @property
    def earlier_turns(self) -> list[dict[str, str]]:
        """A multi-turn case's exchange before its last question, as the agent saw it."""
        if self.is_scenario:
            return []
        primary = self.primary
        conversation = list(primary.conversation) if primary and primary.conversation else []
        return conversation[:-2] if len(conversation) >= 2 else conversation

    @property
    def variants_passed(self) -> int:
        return sum(1 for r in self.variants if r.status == Result.Status.PASS)

    @property
    def variants_run(self) -> int:
        return sum(1 for r in self.variants if r.is_finished)


def case_card_list(*, run: Run, outcomes: list[CaseOutcome]) -> list[CaseCard]:
    """Cards for these cases (finished ones; slots need none): one query however many."""
    wanted = [outcome for outcome in outcomes if outcome.done]
    if not wanted:
        return []
    results: dict[int, list[Result]] = defaultdict(list)
    queryset = Result.objects.filter(run=run, case_id__in=[outcome.case_pk for outcome in wanted])
    # The dataset case too: its card shows whether it is flaky across runs (one join, no query per card).
    queryset = queryset.select_related("case__source_case", *CARD_SELECT_RELATED).prefetch_related(*CARD_PREFETCHES)
    for result in queryset.order_by("case_id", "variant", "repeat"):
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


# ---- the poll's cursor: which cases the page already shows finished ----------------


def seen_encode(positions: set[int] | list[int]) -> str:
    """A bitmap of case positions, URL-safe: 1,000 cases take 168 characters.

    The run page sends it with each poll. A cursor on finished_at would be smaller but
    not exact: a worker stamps finished_at before its transaction commits, so a case can
    become visible with an older timestamp than one already shown, and be missed.
    """
    if not positions:
        return ""
    bits = bytearray(max(positions) // 8 + 1)
    for position in positions:
        bits[position // 8] |= 1 << (position % 8)
    return base64.urlsafe_b64encode(bytes(bits)).decode().rstrip("=")


def seen_decode(value: str) -> set[int]:
    value = (value or "").strip()[:20_000]
    if not value:
        return set()
    try:
        bits = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except ValueError:
        return set()
    return {index * 8 + bit for index, byte in enumerate(bits) for bit in range(8) if byte >> bit & 1}


# ---- charts' data ------------------------------------------------------------------


def run_scores(*, run: Run) -> list[float]:
    """The scores of the finished results of the cases as written (variants excluded)."""
    scores = (
        Result.objects.filter(run=run, variant=0, score__isnull=False, status__in=Result.FINISHED_STATUSES)
        .order_by()
        .values_list("score", flat=True)
    )
    # score__isnull=False already drops the NULLs; the check only tells the type checker.
    return [score for score in scores if score is not None]

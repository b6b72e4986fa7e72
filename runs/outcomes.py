"""A run's cases and their outcomes: what the run page, its poll, the comparison and the
exports show per case (runs.selectors re-exports all of it).

A case may have several results (repeats, smoke-test variants); its outcome comes from all of
them (pass only when every repeat passed, else the worst; variants left out). Whole-run reads
(`case_outcome_list`) serve the comparison, the exports and sorted views. The run page and its
poll read only what they show: one page of cases (`case_page_read`), the range the page has
loaded (`case_outcome_range`), and the filter counts in one aggregate query (`case_counts`), so
neither grows with the number of results.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

from django.db import connections

from runs.models import Result, Run, RunCase

# Case-level statuses. A case passes only when every repeat passed; otherwise the worst
# finished status wins (error over fail), as in case_outcomes.
CASE_PASS, CASE_FAIL, CASE_ERROR = "pass", "fail", "error"
# The offline scorer could not check it (Result.Status.ABSTAINED): neither pass nor fail.
CASE_ABSTAINED = "abstained"
CASE_SKIPPED = "skipped"  # no repeat ran (the run was stopped or failed first)
CASE_PENDING = "pending"  # something of the case is still to run
_UNFINISHED = (Result.Status.PENDING, *Result.IN_FLIGHT_STATUSES)

FILTERS = {
    "all": "All",
    "passed": "Passed",
    "failed": "Failed",
    "error": "Error",
    "abstained": "Needs a judge model",
    "not_run": "Not run",  # a stopped or failed run's cases that never ran
    "flaky": "Flaky repeats",  # its repeats in this run disagree (across runs: datasets flaky_mark)
}
SORTS = {
    "position": "Case order",
    "score": "Lowest score first",
    "-score": "Highest score first",
    "duration": "Slowest first",
}
CARDS_PER_PAGE = 25


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
        if name == "abstained":
            return self.status == CASE_ABSTAINED
        if name == "not_run":
            return self.status == CASE_SKIPPED
        if name == "flaky":
            return self.flaky
        return True


# A result's rank among its case's repeats (1 pass, 2 fail, 3 error, 4 abstained: _RANKED).
_RANK_SQL = "(CASE r.status WHEN %s THEN 1 WHEN %s THEN 2 WHEN %s THEN 3 WHEN %s THEN 4 END)"
# One row per case: its position, how many of its results are unfinished, the worst and
# best status of its repeats (1 pass, 2 fail, 3 error, 4 abstained), and its mean score and duration.
# Hand-written because it is the poll's hot path: on 1,000 cases it runs about three times
# faster than the ORM's equivalent (aggregate FILTER clauses), and skips per-value converters.
# A case's outcome from its results, the same columns for the whole run and for a page.
_OUTCOME_COLUMNS = """  SUM(CASE WHEN r.status IN (%s, %s, %s) THEN 1 ELSE 0 END),
  MAX(CASE WHEN r.variant = 0 THEN {rank} END),
  MIN(CASE WHEN r.variant = 0 THEN {rank} END),
  AVG(CASE WHEN r.variant = 0 AND r.status IN (%s, %s, %s, %s) THEN r.score END),
  AVG(CASE WHEN r.variant = 0 AND r.status IN (%s, %s, %s, %s) THEN r.duration_ms END),
  MIN(c.number)""".replace("{rank}", _RANK_SQL)
_OUTCOME_SQL = """
SELECT r.case_id, MIN(c.position),
{outcome_columns}
FROM {result} r INNER JOIN {case} c ON c.id = r.case_id
WHERE r.run_id = %s
GROUP BY r.case_id
ORDER BY 2
"""
# An abstention ranks last: an offline result is the same on every repeat, so a case is
# abstained whole; a repeat that passed beside it makes the case flaky, never a pass.
_RANKED = (Result.Status.PASS, Result.Status.FAIL, Result.Status.ERROR, Result.Status.ABSTAINED)
_BY_RANK = {1: CASE_PASS, 2: CASE_FAIL, 3: CASE_ERROR, 4: CASE_ABSTAINED}


def case_outcome_list(*, run: Run, with_tags: bool = False) -> list[CaseOutcome]:
    """Every case of the run with its outcome, in case order: one query (two with tags)."""
    sql = _OUTCOME_SQL.format(
        result=Result._meta.db_table, case=RunCase._meta.db_table, outcome_columns=_OUTCOME_COLUMNS
    )
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
    names[CASE_ABSTAINED] = "abstained"
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


# ---- what the run page reads: one page, the loaded range, the counts ----------------

# The same row as _OUTCOME_SQL, driven from the run's cases in position order (the unique
# (run, position) index) and each case's results (the (case, repeat, variant) index): a page
# or a range costs what it returns. {where} narrows the positions, {having} the outcomes.
_CASE_ROWS_SQL = """
SELECT MIN(c.id), c.position,
{outcome_columns}
FROM {case} c INNER JOIN {result} r ON r.case_id = c.id
WHERE c.run_id = %s AND c.position >= %s{where}
GROUP BY c.position{having}
ORDER BY c.position{limit}
"""
# The aggregates of _CASE_ROWS_SQL again, for HAVING (PostgreSQL does not take aliases there).
_UNFINISHED_SUM = "SUM(CASE WHEN r.status IN (%s, %s, %s) THEN 1 ELSE 0 END)"
_WORST = f"MAX(CASE WHEN r.variant = 0 THEN {_RANK_SQL} END)"
_BEST = f"MIN(CASE WHEN r.variant = 0 THEN {_RANK_SQL} END)"
_RANK = {"passed": 1, "failed": 2, "error": 3, "abstained": 4}


def _row_params() -> list[str]:
    return [str(value) for value in (*_UNFINISHED, *_RANKED, *_RANKED, *_RANKED, *_RANKED)]


def _case_rows(run: Run, *, start: int, stop: int | None = None, filter_name: str = "all", limit: int = 0) -> list:
    where, having, limit_sql = "", "", ""
    params: list[Any] = [*_row_params(), run.pk, start]
    if stop is not None:
        where = " AND c.position < %s"
        params.append(stop)
    if filter_name in FILTERS and filter_name != "all":
        # Cases still running stay in (as slots a poll fills), and the ones the filter picks.
        unfinished, worst, best = _UNFINISHED_SUM, _WORST, _BEST
        statuses = [str(value) for value in _UNFINISHED]
        ranked = [str(value) for value in _RANKED]
        extra: list[Any]
        if filter_name in _RANK:
            picked, extra = f"({unfinished} = 0 AND {worst} = %s)", [*statuses, *ranked, _RANK[filter_name]]
        elif filter_name == "not_run":
            picked, extra = f"({unfinished} = 0 AND {worst} IS NULL)", [*statuses, *ranked]
        else:  # flaky: a repeat passed and another did not
            picked, extra = f"({best} = 1 AND {worst} > 1)", [*ranked, *ranked]
        having = f" HAVING {unfinished} > 0 OR {picked}"
        params += [*statuses, *extra]
    if limit:
        limit_sql = " LIMIT %s"
        params.append(limit)
    sql = _CASE_ROWS_SQL.format(
        case=RunCase._meta.db_table,
        result=Result._meta.db_table,
        outcome_columns=_OUTCOME_COLUMNS,
        where=where,
        having=having,
        limit=limit_sql,
    )
    with connections[Result.objects.db].cursor() as cursor:
        cursor.execute(sql, params)
        return [_outcome(row, None) for row in cursor.fetchall()]


def case_outcome_range(*, run: Run, start: int = 0, stop: int | None = None) -> list[CaseOutcome]:
    """The outcomes of the cases at positions start <= p < stop (stop None: to the end), in
    order: what the run page's poll reads, the range its loaded pages cover (one query)."""
    return _case_rows(run, start=start, stop=stop)


def case_page_read(*, run: Run, filter_name: str, sort: str, after: int = 0, offset: int = 0) -> CasePage:
    """`case_page` read from the database: in case order, one query for the page alone
    (the cases from `after` that are still running or that the filter picks). Sorted views
    are snapshots of every finished case: they rank the whole run (`case_outcome_list`)."""
    if sort != "position":
        return case_page(case_outcome_list(run=run), filter_name=filter_name, sort=sort, offset=offset)
    page = _case_rows(run, start=after, filter_name=filter_name, limit=CARDS_PER_PAGE + 1)
    more = len(page) > CARDS_PER_PAGE
    page = page[:CARDS_PER_PAGE]
    upto = page[-1].position + 1 if more else None
    return CasePage(page, next_after=upto, upto=upto)


# Per status, how many results; and how many cases the run has (a scalar subquery, once).
_STATUS_COUNTS_SQL = """
SELECT r.status, COUNT(*), (SELECT COUNT(*) FROM {case} c WHERE c.run_id = %s)
FROM {result} r WHERE r.run_id = %s GROUP BY r.status
"""
# Per case (its unfinished results, worst and best repeat), then counted: the run's filter
# counts when a case has several results (repeats, variants). One pass over the run's results.
_CASE_COUNTS_SQL = """
SELECT COUNT(*),
  SUM(CASE WHEN u = 0 AND w = 1 THEN 1 ELSE 0 END), SUM(CASE WHEN u = 0 AND w = 2 THEN 1 ELSE 0 END),
  SUM(CASE WHEN u = 0 AND w = 3 THEN 1 ELSE 0 END), SUM(CASE WHEN u = 0 AND w IS NULL THEN 1 ELSE 0 END),
  SUM(CASE WHEN b = 1 AND w > 1 THEN 1 ELSE 0 END), SUM(CASE WHEN u = 0 AND w = 4 THEN 1 ELSE 0 END)
FROM (
  SELECT r.case_id, SUM(CASE WHEN r.status IN (%s, %s, %s) THEN 1 ELSE 0 END) AS u,
    MAX(CASE WHEN r.variant = 0 THEN {rank} END) AS w,
    MIN(CASE WHEN r.variant = 0 THEN {rank} END) AS b
  FROM {result} r WHERE r.run_id = %s GROUP BY r.case_id
) per_case
""".replace("{rank}", _RANK_SQL)


StatusCounts = tuple[dict[str, int], int]  # ({status: results}, cases)


def run_status_counts(*, run: Run) -> StatusCounts:
    """({status: results}, cases) of the run: one query on the (run, status) index."""
    sql = _STATUS_COUNTS_SQL.format(case=RunCase._meta.db_table, result=Result._meta.db_table)
    with connections[Result.objects.db].cursor() as cursor:
        cursor.execute(sql, [run.pk, run.pk])
        rows = cursor.fetchall()
    return {str(status): int(count) for status, count, _ in rows}, int(rows[0][2]) if rows else 0


def one_result_per_case(by_status: dict[str, int], cases: int) -> bool:
    """Whether each case has exactly one result (no repeats, no variants), from
    `run_status_counts`: every case has at least one result, so equal totals say so."""
    return sum(by_status.values()) == cases


def case_counts(*, run: Run, status: StatusCounts | None = None) -> dict[str, int]:
    """`case_filter_counts` of the whole run, counted in the database: one query when each
    case has one result (its status is the case's), two otherwise. Nothing per case in Python.
    `status`: the run's `run_status_counts`, when the caller has them."""
    by_status, cases = status or run_status_counts(run=run)
    counts = dict.fromkeys(FILTERS, 0)
    if one_result_per_case(by_status, cases):
        # The result's status is the case's, and nothing can be flaky.
        counts.update(
            all=cases,
            passed=by_status.get(Result.Status.PASS, 0),
            failed=by_status.get(Result.Status.FAIL, 0),
            error=by_status.get(Result.Status.ERROR, 0),
            abstained=by_status.get(Result.Status.ABSTAINED, 0),
            not_run=by_status.get(Result.Status.SKIPPED, 0),
        )
        return counts
    sql = _CASE_COUNTS_SQL.format(result=Result._meta.db_table)
    with connections[Result.objects.db].cursor() as cursor:
        cursor.execute(sql, [*_row_params()[: 3 + 2 * len(_RANKED)], run.pk])
        total, passed, failed, error, not_run, flaky, abstained = cursor.fetchone()
    counts.update(all=total, passed=passed or 0, failed=failed or 0, error=error or 0, not_run=not_run or 0)
    counts["abstained"] = abstained or 0
    counts["flaky"] = flaky or 0
    return counts


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

"""What the run page shows, for its views (runs/views.py): one page of result cards with the
filter counts, the live poll's changes, the summary figures and the charts.

Every read is bounded by what the page shows, never by the size of the run: the page reads
its own cases (`case_page_read`), the poll the range the page has loaded (`case_outcome_range`),
and the counts are aggregates in the database (`case_counts`). So a run of 5,000 cases costs a
page or a poll what a run of 50 does. What needs every result (the charts) is grouped in the
database, and kept once the run is over.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.core.cache import cache
from django.utils import timezone

from agents.models import Agent
from runs import charts, selectors
from runs.models import Run

# A finished run's charts never change: kept this long (a day) once drawn.
CHARTS_CACHE_SECONDS = 24 * 3600


def results_context(
    agent: Agent, run: Run, view: dict[str, Any], *, counts: dict[str, int] | None = None
) -> dict[str, Any]:
    """One page of cards (finished cases) and slots (running ones), the filters and "load more"."""
    page = selectors.case_page_read(
        run=run, filter_name=view["filter"], sort=view["sort"], after=view["after"], offset=view["offset"]
    )
    counts = counts if counts is not None else selectors.case_counts(run=run)
    cards = {card.outcome.case_pk: card for card in selectors.case_card_list(run=run, outcomes=page.outcomes)}
    base = {"filter": view["filter"], "sort": view["sort"], **({"expand": "1"} if view["expand"] else {})}
    more_params = (
        {**base, "after": page.next_after} if page.next_after is not None else {**base, "offset": page.next_offset}
    )
    return {
        "agent": agent,
        "run": run,
        "view": view,
        # Cards for finished cases, empty slots (filled by the poll) for the rest.
        "items": [(outcome, cards.get(outcome.case_pk)) for outcome in page.outcomes],
        "filter_tabs": filter_tabs(counts),
        "sorts": selectors.SORTS,
        "has_more": page.next_after is not None or page.next_offset is not None,
        "more_query": urlencode(more_params),
        "upto": page.upto if view["sort"] == "position" else None,
        "seen": selectors.seen_encode(_page_seen(run, view, page)),
        "live": run.is_active or run.summary_pending,
        "first_page": not view["after"] and not view["offset"],
        "case_total": counts["all"],
    }


def _page_seen(run: Run, view: dict[str, Any], page: selectors.CasePage) -> set[int]:
    """The finished cases of the positions this page covers (after <= p < upto), which the
    poll then leaves alone. Sorted views are snapshots the poll adds nothing to: none."""
    if view["sort"] != "position":
        return set()
    if view["filter"] == "all":  # the page holds every case of its range
        covered = page.outcomes
    else:  # the page holds the cases the filter picks: the others of its range are read
        covered = selectors.case_outcome_range(run=run, start=view["after"], stop=page.upto)
    return {outcome.position for outcome in covered if outcome.done}


def filter_tabs(counts: dict[str, int]) -> list[tuple[str, str, int]]:
    return [(name, label, counts[name]) for name, label in selectors.FILTERS.items()]


def live_context(agent: Agent, run: Run, view: dict[str, Any]) -> dict[str, Any]:
    """The poll's changes since the page's cursor: the cards of cases finished since (in the
    range the page has loaded), slots to drop, the counts, the new cursor and the summary."""
    seen = selectors.seen_decode(view["seen"])
    if view["sort"] == "position":
        loaded = selectors.case_outcome_range(run=run, start=0, stop=view["upto"])
        fresh = [o for o in loaded if o.done and o.position not in seen]
        seen = {o.position for o in loaded if o.done}
    else:  # sorted views are snapshots: nothing is filled in live
        fresh = []
    status = selectors.run_status_counts(run=run)
    counts = selectors.case_counts(run=run, status=status)
    return {
        "agent": agent,
        "run": run,
        "view": view,
        "status_counts": status,
        "cards": selectors.case_card_list(run=run, outcomes=[o for o in fresh if o.matches(view["filter"])]),
        "removed": [o.position for o in fresh if not o.matches(view["filter"])],
        "filter_tabs": filter_tabs(counts),
        "seen": selectors.seen_encode(seen),
        "settled": not run.is_active and not run.summary_pending,
        "oob": True,
        "fresh": bool(fresh),
        **summary_context(run, counts),
    }


def summary_context(run: Run, counts: dict[str, int]) -> dict[str, Any]:
    repeats = int(run.scoring.get("number_of_requests") or 1)
    return {
        "duration": selectors.run_duration_seconds(run, now=timezone.now()),
        "repeats": repeats,
        # With repeats, the per-case figures are shown beside the per-request counts.
        "figures": selectors.run_counts(run=run, counts=counts) if repeats > 1 else None,
    }


def charts_context(run: Run, status: selectors.StatusCounts | None = None) -> dict[str, Any]:
    """The score histogram and the pass rate per tag, grouped in the database; drawn once
    for a run that is over (its results no longer change). `status`: `run_status_counts`."""
    if run.is_active:
        return {**_charts(run, status), "charts_ready": True}
    key = f"runs:charts:{run.pk}:{run.status}:{run.completed}:{run.finished_at and run.finished_at.isoformat()}"
    drawn = cache.get(key)
    if drawn is None:
        drawn = _charts(run, status)
        cache.set(key, drawn, CHARTS_CACHE_SECONDS)
    return {**drawn, "charts_ready": True}


def _charts(run: Run, status: selectors.StatusCounts | None) -> dict[str, Any]:
    bins = selectors.run_score_bins(run=run)
    return {
        "histogram": charts.score_histogram_of_bins(bins, threshold=run.pass_threshold),
        "tag_chart": charts.tag_pass_rates_of_counts(selectors.tag_outcome_counts(run=run, status=status)),
    }

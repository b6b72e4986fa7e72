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
from runs import selectors
from runs.engine.stall import run_stall
from runs.judging.trust import run_trust_notes
from runs.models import Run
from runs.reports import charts

# A finished run's charts never change: kept this long (a day) once drawn.
CHARTS_CACHE_SECONDS = 24 * 3600

# The run page's tabs (?tab=...): the result cards first, each other panel one click away.
# Only the tab shown is read, so a panel not shown costs the page no query.
TABS = {
    "results": ("Results", "Results"),
    "review": ("Human review", "Review"),
    "charts": ("Charts", "Charts"),
    "baseline": ("Baseline", "Baseline"),
    "suggestions": ("Suggested changes", "Suggestions"),
}  # name: (label, its short form on a phone)
DEFAULT_TAB = "results"
# The tabs that show the result cards: the review tab has its figures above them, since a
# reviewer reviews on the cards (j / k, a, o).
CARD_TABS = frozenset({"results", "review"})


def tab_get(query: Any) -> str:
    """The tab a request asks for (`?tab=`), the results when it names none we know."""
    tab = query.get("tab", "")
    return tab if tab in TABS else DEFAULT_TAB


def tab_links(tab: str, case_total: int) -> list[dict[str, Any]]:
    """The tab bar: each tab's label, its query (the results have none) and whether it is shown."""
    return [
        {
            "name": name,
            "label": label,
            "short": short,
            "query": "" if name == DEFAULT_TAB else f"?tab={name}",
            "current": name == tab,
            "count": case_total if name == DEFAULT_TAB else None,
        }
        for name, (label, short) in TABS.items()
    ]


def first_failing(items: list[tuple[Any, Any]]) -> int | None:
    """The position of the page's first failed (or errored) case, whose card opens on load."""
    for outcome, card in items:
        if card is not None and outcome.status in ("fail", "error"):
            return int(outcome.position)
    return None


def results_context(
    agent: Agent, run: Run, view: dict[str, Any], *, counts: dict[str, int] | None = None, tab: str = DEFAULT_TAB
) -> dict[str, Any]:
    """One page of cards (finished cases) and slots (running ones), the filters and "load more".
    `tab`: the card tab they show on, which their links keep (results, the default, is left out)."""
    page = selectors.case_page_read(
        run=run, filter_name=view["filter"], sort=view["sort"], after=view["after"], offset=view["offset"]
    )
    counts = counts if counts is not None else selectors.case_counts(run=run)
    cards = {card.outcome.case_pk: card for card in selectors.case_card_list(run=run, outcomes=page.outcomes)}
    list_tab = tab if tab in CARD_TABS and tab != DEFAULT_TAB else ""
    base = {
        "filter": view["filter"],
        "sort": view["sort"],
        **({"expand": "1"} if view["expand"] else {}),
        **({"tab": list_tab} if list_tab else {}),
    }
    more_params = (
        {**base, "after": page.next_after} if page.next_after is not None else {**base, "offset": page.next_offset}
    )
    # Cards for finished cases, empty slots (filled by the poll) for the rest.
    items = [(outcome, cards.get(outcome.case_pk)) for outcome in page.outcomes]
    first_page = not view["after"] and not view["offset"]
    return {
        "agent": agent,
        "run": run,
        "view": view,
        "items": items,
        "list_tab": list_tab,
        # The first failure is what a reader opens first: its card is open on load.
        "open_position": first_failing(items) if first_page else None,
        "filter_tabs": filter_tabs(counts),
        "sorts": selectors.SORTS,
        "has_more": page.next_after is not None or page.next_offset is not None,
        "more_query": urlencode(more_params),
        "upto": page.upto if view["sort"] == "position" else None,
        "seen": selectors.seen_encode(_page_seen(run, view, page)),
        "live": run.is_active or run.summary_pending,
        "first_page": first_page,
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
    # "Needs a judge model" only where the offline scorer abstained: a judged run has none.
    return [
        (name, label, counts[name])
        for name, label in selectors.FILTERS.items()
        if name != "abstained" or counts.get(name)
    ]


def live_context(agent: Agent, run: Run, view: dict[str, Any], *, tab: str = DEFAULT_TAB) -> dict[str, Any]:
    """The poll's changes since the page's cursor: the cards of cases finished since (in the
    range the page has loaded), slots to drop, the counts, the new cursor and the summary.
    On a tab without the cards there are none to fill: none is read."""
    seen = selectors.seen_decode(view["seen"])
    if tab not in CARD_TABS:
        fresh = []
    elif view["sort"] == "position":
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
        "tab": tab,
        "cards_shown": tab in CARD_TABS,
        "list_tab": tab if tab in CARD_TABS and tab != DEFAULT_TAB else "",
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
        # What the figures leave out or cannot vouch for (runs/judging/trust.py), named beside them.
        "trust": run_trust_notes(run=run),
        "stall": run_stall(run=run),
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

"""Every contributor to every extension point (docs/architecture.md, "Apps and dependencies"):
what a lower app lets the apps above it add, and who adds it.

A lower app never imports the apps above it, so what they add to its pages, exports and
flows is registered at start-up. This test is the one place that lists all of it: a new
contributor, or one that stops registering, fails here until the list (and the table in
docs/architecture.md) says so. Whatever the run page's view shows beyond runs' own data comes
from these lists and from the templates it includes (reviews' partials and tags)."""

from __future__ import annotations

from agents import hooks as agent_hooks
from datasets import services as dataset_services
from runs import hooks as run_hooks
from runs import selectors
from runs.judging import configs
from runs.reports import exporters


def _names(callables: list) -> list[str]:
    return [f"{item.__module__}.{item.__qualname__}" for item in callables]


def test_the_run_pages_cards_read_what_reviews_adds():
    assert [prefetch.prefetch_to for prefetch in selectors.CARD_PREFETCHES] == ["reviews"]
    assert selectors.CARD_SELECT_RELATED == ["case__source_case"]


def test_the_exports_carry_the_reviewers_columns_and_section():
    assert [(ext.name, ext.columns, ext.template) for ext in exporters.EXPORT_EXTENSIONS] == [
        (
            "reviews",
            ("reviewed_verdict", "reviews", "reviewers", "review_notes"),
            "reviews/partials/report_reviews.html",
        )
    ]


def test_the_judge_is_shown_the_reviewers_overrides():
    assert _names(configs._providers) == ["reviews.selectors.alignment_examples"]


def test_a_finished_run_queues_its_suggestions():
    assert _names(run_hooks._run_finished) == ["suggestions.services.generation.suggestion_generation_on_run_finished"]


def test_deleting_an_agent_asks_datasets_then_runs():
    assert _names(agent_hooks._before_delete) == [
        "datasets.services.dataset_on_agent_delete",
        "runs.services.lifecycle.run_on_agent_delete",
    ]


def test_a_datasets_scoring_change_makes_its_judge_configuration():
    assert _names(dataset_services._scoring_changed_hooks) == ["runs.judging.configs.dataset_scoring_changed"]

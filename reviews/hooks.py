"""What reviews adds to the run pages and exports through runs' hooks (runs never imports
reviews): the cards' reviews and current case, the reviewer columns of every export."""

from __future__ import annotations

from typing import Any


def register() -> None:
    from runs import selectors
    from runs.reports import exporters

    if any(getattr(item, "prefetch_to", None) == "reviews" for item in selectors.CARD_PREFETCHES):
        return  # ready() ran twice (the test runner may call it again)
    from reviews.selectors import alignment_examples, reviews_prefetch
    from runs.judging.configs import register_alignment_examples_provider

    # The judge's worked examples (a dataset's opt-in setting): its reviewers' overrides.
    register_alignment_examples_provider(alignment_examples)
    selectors.CARD_PREFETCHES.append(reviews_prefetch())
    # The card says when the dataset's case changed after the run: its current row, by a join.
    selectors.CARD_SELECT_RELATED.append("case__source_case")
    exporters.EXPORT_EXTENSIONS.append(
        exporters.ExportExtension(
            name="reviews",
            columns=REVIEW_COLUMNS,
            cells=_cells,
            results=_results,
            summary=_summary,
            template="reviews/partials/report_reviews.html",
        )
    )


REVIEW_COLUMNS = ("reviewed_verdict", "reviews", "reviewers", "review_notes")


def _reviews_by_result(run: Any) -> dict[int, list[Any]]:
    from reviews.models import Review

    grouped: dict[int, list[Any]] = {}
    for review in Review.objects.filter(result__run=run).select_related("reviewer").order_by("created_at", "id"):
        grouped.setdefault(review.result_id, []).append(review)
    return grouped


def _verdict(review: Any) -> str:
    return "agree" if review.agrees else ("pass" if review.passed else "fail")


def _cells(run: Any) -> dict[int, list[Any]]:
    from reviews.selectors import latest_verdict

    cells = {}
    for result_id, reviews in _reviews_by_result(run).items():
        latest = latest_verdict(reviews)
        cells[result_id] = [
            "" if latest is None else ("pass" if latest else "fail"),
            len(reviews),
            "; ".join(
                f"{r.reviewer.get_username()}: {_verdict(r)}" + (f" {r.score:g}/10" if r.score is not None else "")
                for r in reviews
            ),
            "; ".join(f"{r.reviewer.get_username()}: {r.note}" for r in reviews if r.note),
        ]
    return cells


def _results(run: Any) -> dict[int, Any]:
    return {
        result_id: [
            {
                "reviewer": r.reviewer.get_username(),
                "agrees": r.agrees,
                "passed": r.passed,
                "score": r.score,
                "note": r.note,
                "updated_at": r.updated_at.isoformat(),
            }
            for r in reviews
        ]
        for result_id, reviews in _reviews_by_result(run).items()
    }


def _summary(run: Any) -> dict[str, Any]:
    from reviews.selectors import agreement_groups, run_review_figures

    groups = agreement_groups(runs=[run])
    return {
        **run_review_figures(run=run).as_dict(),
        "agreement": groups[0].as_dict() if groups else None,
    }

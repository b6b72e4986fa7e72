"""Reads for the review pages, the run figures, the agreement figures, exports and the API."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Prefetch, Q, QuerySet

from agents.models import Agent
from datasets.models import Dataset
from reviews.agreement import Agreement, Pair, ReviewerAgreement, agreement, reviewer_agreement
from reviews.models import CaseEdit, Review
from runs.models import JudgeConfig, Result, Run

JUDGED = (Result.Status.PASS, Result.Status.FAIL)
# The agreement pages read the reviewed results of this many of an agent's latest runs.
AGREEMENT_RUNS = 200
# The agent's review queue reads its latest finished runs.
AGENT_QUEUE_RUNS = 10


def judge_key(run: Run) -> tuple[str, str]:
    """Which judge configuration scored the run: (key, readable label). The run's JudgeConfig
    (its fingerprint and label, runs.judging.configs); a run from before judges were recorded falls
    back to its judge model, scorer and a hash of its scoring settings."""
    config = run.judge_config  # callers load it with the runs (select_related)
    if config is not None:
        return config.fingerprint, config.label
    raw = json.dumps([run.judge_model, run.scorer, run.scoring], sort_keys=True, default=str)
    digest = hashlib.sha256(raw.encode()).hexdigest()[:10]
    model = "offline reference scorer" if run.scorer == Run.Scorer.OFFLINE else run.judge_model or "default judge model"
    return digest, f"{model} · settings {digest[:6]}"


def reviews_prefetch() -> Prefetch:
    return Prefetch("reviews", queryset=Review.objects.select_related("reviewer").order_by("created_at", "id"))


def result_reviews_list(*, run: Run) -> QuerySet[Result]:
    """The run's results in case order, with their reviews (two queries)."""
    return (
        Result.objects.filter(run=run)
        .select_related("case")
        .prefetch_related(reviews_prefetch())
        .order_by("case__position", "repeat", "variant")
    )


def review_get_for_result(*, result: Result, reviewer: User) -> Review | None:
    return Review.objects.filter(result=result, reviewer=reviewer).first()


# ---- a run's figures --------------------------------------------------------------------


@dataclass
class RunReviewFigures:
    requests: int  # results of the cases as written (every repeat) that ran
    judge_passed: int
    reviewed: int  # of those, how many at least one person reviewed
    reviewed_passed: int  # passes once the reviewers' verdicts replace the judge's where given
    overridden: int  # reviewed results where the (latest) reviewer disagrees with the judge
    reviewers: ReviewerAgreement
    # Results the offline scorer abstained on ("Needs a judge model"): out of the judge's figure,
    # and out of the reviewed one until a person gives them a verdict.
    abstained: int = 0
    abstained_reviewed: int = 0

    @property
    def judge_counted(self) -> int:
        return self.requests - self.abstained

    @property
    def reviewed_counted(self) -> int:
        return self.requests - self.abstained + self.abstained_reviewed

    not_run: int = 0  # results a stop (by hand or at the budget) left unrun: in no figure

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "judge_passed": self.judge_passed,
            "reviewed": self.reviewed,
            "reviewed_passed": self.reviewed_passed,
            "overridden": self.overridden,
            "abstained": self.abstained,
            "judge_counted": self.judge_counted,
            "reviewed_counted": self.reviewed_counted,
            "not_run": self.not_run,
            "between_reviewers": {
                "results": self.reviewers.results,
                "pairs": self.reviewers.pairs,
                "agreed": self.reviewers.agreed,
            },
        }


def latest_verdict(reviews: list[Review]) -> bool | None:
    """The verdict that counts for a result several people reviewed: the latest review's."""
    if not reviews:
        return None
    return max(reviews, key=lambda review: (review.updated_at, review.pk)).passed


def run_review_figures(*, run: Run) -> RunReviewFigures:
    """The judge's pass count beside the reviewed one ("judge 7/10, reviewed 6/10, 4 reviewed").
    The judge's own figures never change: only the reviewed ones do. One query: each result
    of the cases as written, once per review of it (once when it has none)."""
    rows = (
        Result.objects.filter(run=run, variant=0)
        .order_by()
        .values_list("id", "status", "reviews__id", "reviews__passed", "reviews__updated_at")
    )
    statuses: dict[int, str] = {}
    not_run: set[int] = set()
    by_result: dict[int, list[tuple[Any, int, bool]]] = defaultdict(list)
    for result_id, status, review_id, passed, updated_at in rows:
        if status not in Result.FINISHED_STATUSES:  # not run (yet): stopped, skipped, pending
            not_run.add(result_id)
            continue
        statuses[result_id] = status
        if review_id is not None:
            by_result[result_id].append((updated_at, review_id, passed))
    judge_passed = reviewed_passed = overridden = abstained = abstained_reviewed = 0
    for result_id, status in statuses.items():
        judge_pass = status == Result.Status.PASS
        judge_passed += judge_pass
        reviews = by_result.get(result_id)
        verdict = max(reviews)[2] if reviews else None  # the latest review counts
        if status == Result.Status.ABSTAINED:
            abstained += 1
            abstained_reviewed += verdict is not None
        reviewed_passed += judge_pass if verdict is None else verdict
        overridden += verdict is not None and (status not in JUDGED or verdict != judge_pass)
    return RunReviewFigures(
        requests=len(statuses),
        judge_passed=judge_passed,
        reviewed=len(by_result),
        reviewed_passed=reviewed_passed,
        overridden=overridden,
        abstained=abstained,
        abstained_reviewed=abstained_reviewed,
        reviewers=reviewer_agreement([[passed for _, _, passed in reviews] for reviews in by_result.values()]),
        not_run=len(not_run),
    )


# ---- agreement --------------------------------------------------------------------------


def pair_of(result: Result, review: Review) -> Pair | None:
    """The judge's and the reviewer's view of a result; None when the judge gave no verdict."""
    if result.status not in JUDGED:
        return None
    judge_pass = result.status == Result.Status.PASS
    reviewer_score = result.score if review.agrees else review.score
    return Pair(judge_pass, result.score, review.passed, reviewer_score)


@dataclass
class Disagreement:
    result: Result
    review: Review
    run: Run


@dataclass
class AgreementGroup:
    """The agreement figures of one judge configuration (or of one tag within it)."""

    key: str
    label: str
    figures: Agreement
    reviewers: ReviewerAgreement
    runs: int = 0
    disagreements: list[Disagreement] = field(default_factory=list)
    tags: list[tuple[str, Agreement]] = field(default_factory=list)
    # The configuration itself (None for runs from before judges were recorded): its
    # preflight and model identity are shown beside the figures.
    config: JudgeConfig | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "judge_config": self.key,
            "label": self.label,
            "runs": self.runs,
            **self.figures.as_dict(),
            "between_reviewers": {
                "results": self.reviewers.results,
                "pairs": self.reviewers.pairs,
                "agreed": self.reviewers.agreed,
            },
            "by_tag": [{"tag": tag, **figures.as_dict()} for tag, figures in self.tags],
            "disagreements": [
                {
                    "run_id": item.run.pk,
                    "result_id": item.result.pk,
                    "case_number": item.result.case.display_number,
                    "judge": item.result.status,
                    "judge_score": item.result.score,
                    "reviewer": item.review.reviewer.get_username(),
                    "reviewer_verdict": "pass" if item.review.passed else "fail",
                    "reviewer_score": item.review.score,
                    "note": item.review.note,
                }
                for item in self.disagreements
            ],
        }


def _reviewed_results(runs: list[Run]) -> list[Result]:
    """Results people reviewed, and the re-scores of those results: a re-score judges the same
    answers again, so its judge is measured against the reviews of the result it re-judged."""
    rescored_reviews = Prefetch(
        "rescored_from__reviews", queryset=Review.objects.select_related("reviewer").order_by("created_at", "id")
    )
    return list(
        Result.objects.filter(Q(reviews__isnull=False) | Q(rescored_from__reviews__isnull=False), run__in=runs)
        .distinct()
        .select_related("case", "rescored_from")
        .prefetch_related(reviews_prefetch(), rescored_reviews)
        .order_by("run_id", "case__position", "repeat", "variant")
    )


def _reviews_of(result: Result) -> list[Review]:
    """The reviews that judge this result's answer: its own, or for a re-score its source's."""
    own = list(result.reviews.all())
    if own or result.rescored_from is None:
        return own
    return list(result.rescored_from.reviews.all())


def agreement_groups(*, runs: list[Run], tag: str = "") -> list[AgreementGroup]:
    """Agreement per judge configuration over these runs' reviewed results (three queries)."""
    by_run = {run.pk: run for run in runs}
    grouped: dict[str, list[tuple[Result, Run]]] = defaultdict(list)
    labels: dict[str, str] = {}
    run_keys: dict[str, set[int]] = defaultdict(set)
    for result in _reviewed_results(runs):
        if tag and tag not in (result.case.data.get("tags") or []):
            continue
        run = by_run[result.run_id]
        key, labels[key] = judge_key(run)
        grouped[key].append((result, run))
        run_keys[key].add(run.pk)
    groups = [_group(key, labels[key], rows) for key, rows in grouped.items()]
    for group in groups:
        group.runs = len(run_keys[group.key])
        group.config = grouped[group.key][0][1].judge_config
    return sorted(groups, key=lambda group: -group.figures.reviewed)


def _group(key: str, label: str, rows: list[tuple[Result, Run]]) -> AgreementGroup:
    pairs: list[Pair] = []
    per_tag: dict[str, list[Pair]] = defaultdict(list)
    disagreements: list[Disagreement] = []
    verdicts: list[list[bool]] = []
    for result, run in rows:
        reviews = _reviews_of(result)
        verdicts.append([review.passed for review in reviews])
        for review in reviews:
            pair = pair_of(result, review)
            if pair is None:
                continue
            pairs.append(pair)
            for tag in result.case.data.get("tags") or []:
                per_tag[str(tag)].append(pair)
            if pair.judge_pass != pair.reviewer_pass:
                disagreements.append(Disagreement(result, review, run))
    tags = sorted(((tag, agreement(items)) for tag, items in per_tag.items()), key=lambda item: -item[1].reviewed)
    return AgreementGroup(key, label, agreement(pairs), reviewer_agreement(verdicts), 0, disagreements, tags)


def agent_queue_runs(*, agent: Agent) -> list[Run]:
    return list(Run.objects.filter(agent=agent).exclude(status__in=Run.ACTIVE_STATUSES)[:AGENT_QUEUE_RUNS])


def agent_agreement_runs(*, agent: Agent) -> list[Run]:
    return list(
        Run.objects.filter(agent=agent).select_related("judge_config").order_by("-created_at", "-id")[:AGREEMENT_RUNS]
    )


@dataclass
class AgreementPoint:
    run: Run
    figures: Agreement


def agreement_over_time(*, runs: list[Run]) -> list[AgreementPoint]:
    """Per run with reviews, oldest first: how often the judge and the reviewers agreed."""
    by_run: dict[int, list[Pair]] = defaultdict(list)
    for result in _reviewed_results(runs):
        for review in result.reviews.all():
            pair = pair_of(result, review)
            if pair is not None:
                by_run[result.run_id].append(pair)
    ordered = sorted((run for run in runs if run.pk in by_run), key=lambda run: (run.created_at, run.pk))
    return [AgreementPoint(run, agreement(by_run[run.pk])) for run in ordered]


def case_edits_for(*, case_ids: list[int]) -> dict[int, list[CaseEdit]]:
    edits: dict[int, list[CaseEdit]] = defaultdict(list)
    for edit in CaseEdit.objects.filter(case_id__in=case_ids).select_related("edited_by"):
        edits[edit.case_id].append(edit)
    return edits


def alignment_examples(dataset: Dataset, limit: int) -> list[dict[str, Any]]:
    """The dataset's newest reviewer overrides (the reviewer's verdict is not the judge's), as
    the judge's worked examples (runs.judging.configs.register_alignment_examples_provider). The expected
    answer is the case's current one: a correction from a card counts."""
    overrides = (
        Review.objects.filter(result__run__dataset=dataset, agrees=False)
        .select_related("result__case__source_case")
        .order_by("-updated_at", "-id")
    )
    examples: list[dict[str, Any]] = []
    for review in overrides[: limit * 4]:
        result = review.result
        if review.passed == (result.status == Result.Status.PASS):
            continue  # the score was corrected, not the verdict
        case = result.case
        expected = case.source_case.expected_answer if case.source_case is not None else case.expected_answer
        examples.append(
            {
                "question": result.question or case.question,
                "answer": result.actual_answer,
                "expected": expected,
                "verdict": "pass" if review.passed else "fail",
                "note": review.note,
                "score": review.score,
            }
        )
        if len(examples) == limit:
            break
    return examples

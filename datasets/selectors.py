"""Reads shared by the dataset pages, the JSON API and other apps."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from django.db.models import Count, Exists, OuterRef, Q, QuerySet

from agents.models import Agent
from datasets.models import Dataset, RuleMap, TestCase

if TYPE_CHECKING:
    # django-stubs (a dev requirement) types annotated rows; only the checker imports it.
    from django_stubs_ext import WithAnnotations

    class CaseCount(TypedDict):
        case_count: int

    DatasetWithCount = WithAnnotations[Dataset, CaseCount]

# At most this many words of a search are used; each must match somewhere.
MAX_SEARCH_TERMS = 8


def dataset_list(*, agent: Agent) -> QuerySet[DatasetWithCount]:
    """The agent's datasets, newest first, each with `case_count`."""
    return (
        Dataset.objects.filter(agent=agent)
        .select_related("created_by")
        .annotate(case_count=Count("cases"))
        .order_by("-created_at", "-id")
    )


def dataset_get(*, agent: Agent, dataset_id: int) -> DatasetWithCount | None:
    # has_rule_map: whether a model mapped its cases to rules (the rule chips skip that query if not).
    finished_maps = RuleMap.objects.filter(dataset=OuterRef("pk"), status=RuleMap.Status.DONE)
    dataset = dataset_list(agent=agent).filter(pk=dataset_id).annotate(has_rule_map=Exists(finished_maps)).first()
    if dataset is not None:
        dataset.agent = agent  # already loaded and checked; saves a query per use
    return dataset


def case_search(*, dataset: Dataset, query: str = "", flaky: bool = False) -> QuerySet[TestCase]:
    """The dataset's cases in order, narrowed to those matching every word of `query` in
    the question, expected answer, document context, judge guideline or case id (and, with
    `flaky`, to the flaky ones). Documents are prefetched
    so a page of rows costs a fixed number of queries however many cases there are."""
    cases = (
        TestCase.objects.filter(dataset=dataset)
        .select_related("source_document")
        .prefetch_related("documents")
        .order_by("position", "id")
    )
    for term in query.split()[:MAX_SEARCH_TERMS]:
        cases = cases.filter(
            Q(question__icontains=term)
            | Q(expected_answer__icontains=term)
            | Q(document_context__icontains=term)
            | Q(judge_guideline__icontains=term)
            | Q(case_id__icontains=term)
        )
    if flaky:
        cases = cases.filter(TestCase.flaky_filter())
    return cases


def dataset_run_blocker(*, dataset: Dataset, case_count: int) -> str:
    """Why the dataset cannot be run now, or "" when it can."""
    if dataset.status == Dataset.Status.EXTRACTING:
        return "Test cases are still being extracted. You can run the dataset once it is Ready."
    if dataset.status == Dataset.Status.REVIEW:
        return "Confirm the column mapping of the uploaded file first: that creates the test cases."
    if dataset.status == Dataset.Status.FAILED:
        return "This dataset failed to build, so it cannot be run. Upload the fixed file again or make a new dataset."
    if case_count == 0:
        return "Add at least one test case to run an evaluation."
    return ""


def case_index(*, case: TestCase) -> int:
    """The case's 0-based place in its dataset's order (position, then id)."""
    return case.dataset.cases.filter(Q(position__lt=case.position) | Q(position=case.position, id__lt=case.pk)).count()

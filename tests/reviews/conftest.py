"""A finished run of ten results with a dataset behind it, built straight in the database."""

import pytest

from runs.models import Result
from tests.factories import DatasetFactory, TestCaseFactory
from tests.runs.review_helpers import CaseSpec, build_run


@pytest.fixture
def dataset(agent):
    return DatasetFactory(agent=agent, name="Refund policy")


@pytest.fixture
def ten_run(agent, dataset):
    """Ten cases, one result each: 7 pass (scores 9, 9, 7.5, 7.5, 9, 10, 9), 3 fail (2, 3, 1); the two 7.5s sit
    within a point of the line (7)."""
    scores = [("pass", 9.0)] * 2 + [("pass", 7.5)] * 2 + [("pass", 9.0), ("pass", 10.0), ("pass", 9.0)]
    scores += [("fail", 2.0), ("fail", 3.0), ("fail", 1.0)]
    specs = []
    for index, (state, score) in enumerate(scores):
        case = TestCaseFactory(dataset=dataset, position=index, question=f"Question {index + 1}?")
        specs.append(
            CaseSpec(
                question=case.question,
                expected=case.expected_answer,
                repeats=[(state, score)],
                tags=["refunds"] if index % 2 == 0 else ["billing"],
                source_case_id=case.pk,
            )
        )
    return build_run(agent=agent, dataset=dataset, cases=specs)


def results_of(run) -> list[Result]:
    return list(Result.objects.filter(run=run).select_related("case").order_by("case__position", "repeat", "variant"))

import pytest
from django.core.exceptions import ValidationError

from runs import services
from runs.models import Result, Run
from tests.runs.conftest import drive

pytestmark = pytest.mark.django_db


@pytest.fixture
def finished_run(make_dataset, alice, no_llm):
    questions = ["How long is the refund window?", "What is the support phone number?", "When is support open?"]
    dataset = make_dataset(3, questions=questions)
    return drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))


def test_it_reruns_only_the_failed_cases_with_the_same_snapshot(finished_run, alice):
    assert (finished_run.passed, finished_run.failed) == (1, 2)

    child = drive(services.run_rerun(run=finished_run, user=alice))

    assert child.parent == finished_run
    assert child.purpose == Run.Purpose.RERUN
    assert child.agent_version == finished_run.agent_version
    assert child.scoring == finished_run.scoring
    assert list(child.cases.values_list("question", flat=True)) == [
        "What is the support phone number?",
        "When is support open?",
    ]
    assert child.total == 2
    assert child.status == Run.Status.COMPLETED
    assert Result.objects.filter(run=finished_run).count() == 3  # the parent is untouched


def test_the_same_request_key_never_makes_a_second_rerun(finished_run, alice):
    first = services.run_rerun(run=finished_run, user=alice, request_key="again")
    second = services.run_rerun(run=finished_run, user=alice, request_key="again")
    assert first.pk == second.pk


def test_a_run_without_failures_has_nothing_to_rerun(make_dataset, alice, no_llm):
    dataset = make_dataset(1)
    run = drive(services.run_start(agent=dataset.agent, dataset=dataset, user=alice))
    with pytest.raises(ValidationError, match="no failed cases"):
        services.run_rerun(run=run, user=alice)


def test_an_active_run_cannot_be_rerun(make_dataset, alice, no_llm):
    dataset = make_dataset(1)
    run = services.run_start(agent=dataset.agent, dataset=dataset, user=alice)
    with pytest.raises(ValidationError, match="Wait for the run to finish"):
        services.run_rerun(run=run, user=alice)


def test_a_rerun_keeps_each_cases_dataset_number_in_pages_comparisons_and_exports(finished_run, alice, client_alice):
    """Cases 2 and 3 of the dataset failed: in the re-run they are still "Case 2" and "Case 3"."""
    import csv
    import io
    import json

    from django.urls import reverse

    from runs.comparing import comparison
    from runs.reports import exporters

    child = drive(services.run_rerun(run=finished_run, user=alice))
    assert list(child.cases.values_list("number", flat=True)) == [2, 3]
    grandchild = drive(services.run_rerun(run=child, user=alice))
    assert list(grandchild.cases.values_list("number", flat=True)) == [2, 3]

    page = client_alice.get(reverse("runs:detail", args=[child.agent_id, child.pk])).content.decode()
    assert ">Case 2</span>" in page and ">Case 3</span>" in page and ">Case 1</span>" not in page

    compared = comparison.run_compare(a=finished_run, b=child)
    assert sorted(row.b.number for row in compared.rows if row.b) == [2, 3]
    assert sorted(row.a.number for row in compared.rows if row.a and row.b) == [2, 3]

    exported = json.loads(exporters.run_export_json(child))
    assert [result["case"]["number"] for result in exported["results"]] == [2, 3]
    rows = list(csv.DictReader(io.StringIO(exporters.run_export_csv(child))))
    assert [row["case_number"] for row in rows] == ["2", "3"]
    assert "#2" in exporters.run_export_html(child)

"""Dataset and test case services: names, the per-agent limit, bulk creation, moves."""

import pytest
from django.core.exceptions import ValidationError

from datasets import selectors, services
from datasets.models import Dataset, Document, TestCase
from tests.factories import AgentFactory, DatasetFactory, TestCaseFactory


@pytest.mark.django_db
def test_dataset_create_cleans_the_name_and_applies_settings(agent, alice):
    dataset = services.dataset_create(
        agent=agent, user=alice, name="  Smoke   set ", pass_threshold=9, vector_enabled="true"
    )

    assert dataset.name == "Smoke set"
    assert dataset.pass_threshold == 9 and dataset.vector_enabled is True
    assert dataset.status == Dataset.Status.READY and dataset.created_by == alice


@pytest.mark.django_db
def test_names_are_unique_per_agent_ignoring_case_but_free_across_agents(agent, alice, team):
    services.dataset_create(agent=agent, user=alice, name="Refunds")

    with pytest.raises(ValidationError) as exc:
        services.dataset_create(agent=agent, user=alice, name="REFUNDS")
    assert "name" in exc.value.message_dict
    assert services.dataset_create(agent=AgentFactory(team=team), user=alice, name="Refunds").pk


@pytest.mark.django_db
def test_at_most_100_datasets_per_agent(agent, alice):
    Dataset.objects.bulk_create(Dataset(agent=agent, name=f"Set {i}") for i in range(100))

    with pytest.raises(ValidationError) as exc:
        services.dataset_create(agent=agent, user=alice, name="One too many")

    assert "already has 100 datasets" in exc.value.messages[0]
    assert agent.datasets.count() == 100


@pytest.mark.django_db
def test_bad_scoring_settings_are_refused(agent, alice):
    with pytest.raises(ValidationError) as exc:
        services.dataset_create(agent=agent, user=alice, name="x", pass_threshold=11, number_of_requests=0)

    assert set(exc.value.message_dict) == {"pass_threshold", "number_of_requests"}


@pytest.mark.django_db
def test_rename_refuses_a_taken_name_but_allows_a_case_change_of_its_own(agent):
    dataset = DatasetFactory(agent=agent, name="Refunds")
    DatasetFactory(agent=agent, name="Smoke")

    assert services.dataset_rename(dataset=dataset, name="refunds").name == "refunds"
    with pytest.raises(ValidationError):
        services.dataset_rename(dataset=dataset, name="smoke")


@pytest.mark.django_db
def test_case_create_appends_and_links_documents(agent):
    dataset = DatasetFactory(agent=agent)
    TestCaseFactory(dataset=dataset, position=7)
    document = Document.objects.create(team=agent.team, dataset=dataset, original_name="a.pdf", file_type="pdf")

    case = services.case_create(dataset=dataset, question="Q", documents=[document])

    assert case.position == 8
    assert list(case.documents.all()) == [document]


@pytest.mark.django_db
def test_case_bulk_create_is_all_or_nothing_and_names_the_bad_case(agent):
    dataset = DatasetFactory(agent=agent)

    with pytest.raises(ValidationError) as exc:
        services.case_bulk_create(dataset=dataset, cases=[{"question": "ok"}, {"question": ""}])

    assert exc.value.messages == ["Case 2: Question: Write the question the agent should answer."]
    assert not TestCase.objects.exists()


@pytest.mark.django_db
def test_case_bulk_create_refuses_case_ids_already_in_the_dataset(agent):
    dataset = DatasetFactory(agent=agent)
    TestCaseFactory(dataset=dataset, case_id="a")

    with pytest.raises(ValidationError):
        services.case_bulk_create(dataset=dataset, cases=[{"question": "q", "case_id": "a"}])


@pytest.mark.django_db
def test_case_bulk_create_keeps_order_and_documents(agent):
    dataset = DatasetFactory(agent=agent)
    document = Document.objects.create(team=agent.team, dataset=dataset, original_name="a.xlsx", file_type="xlsx")

    created = services.case_bulk_create(
        dataset=dataset, cases=[{"question": "one"}, {"question": "two", "documents": [document], "tags": "x"}]
    )

    assert [case.position for case in created] == [0, 1]
    assert list(dataset.cases.get(question="two").documents.all()) == [document]
    assert dataset.cases.get(question="two").tags == ["x"]


@pytest.mark.django_db
def test_case_update_changes_only_the_given_fields(agent):
    case = TestCaseFactory(dataset=DatasetFactory(agent=agent), question="Q", expected_answer="A", tags=["t"])

    services.case_update(case=case, expected_answer="B")

    case.refresh_from_db()
    assert (case.question, case.expected_answer, case.tags) == ("Q", "B", ["t"])


@pytest.mark.django_db
def test_case_update_refuses_another_cases_id(agent):
    dataset = DatasetFactory(agent=agent)
    TestCaseFactory(dataset=dataset, case_id="a")
    case = TestCaseFactory(dataset=dataset, case_id="b")

    with pytest.raises(ValidationError) as exc:
        services.case_update(case=case, case_id="a")

    assert "case_id" in exc.value.message_dict
    assert services.case_update(case=case, case_id="b").case_id == "b"


@pytest.mark.django_db
def test_case_move_renumbers_and_clamps(agent):
    dataset = DatasetFactory(agent=agent)
    a, b, c = (TestCaseFactory(dataset=dataset, question=q, position=5) for q in "abc")

    assert services.case_move(case=c, to_index=-3) == 0
    assert selectors.case_index(case=TestCase.objects.get(pk=a.pk)) == 1
    assert services.case_move(case=TestCase.objects.get(pk=a.pk), to_index=99) == 2
    assert list(dataset.cases.values_list("question", flat=True)) == ["c", "b", "a"]

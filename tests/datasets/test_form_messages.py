"""One message per problem, named by the field's label (issue 14 item 17)."""

import pytest
from django.core.exceptions import ValidationError
from django.http import QueryDict
from django.urls import reverse

from datasets import services
from datasets.forms import CaseForm, DatasetCreateForm
from tests.factories import DatasetFactory

HTMX = {"HTTP_HX_REQUEST": "true"}


def test_a_121_character_name_gets_only_the_length_message():
    form = DatasetCreateForm({"name": "x" * 121})
    assert not form.is_valid()
    assert form.errors == {"name": ["Use at most 120 characters (it has 121)."]}


@pytest.mark.django_db
def test_the_create_page_shows_the_length_message_alone(client_alice, agent):
    html = client_alice.post(reverse("datasets:create", args=[agent.pk]), {"name": "y" * 121}, **HTMX).content.decode()
    assert html.count("Use at most 120 characters (it has 121).") == 1
    assert "Give the dataset a name." not in html


def test_the_case_form_summary_uses_labels():
    form = CaseForm(QueryDict("question=&smoke_count=11"))
    assert not form.is_valid()
    summary = form.error_summary
    assert any(message.startswith("Question: ") for message in summary), summary
    assert any(message.startswith("Smoke-test paraphrases: ") for message in summary), summary
    assert not any(message.startswith(("question:", "smoke_count:")) for message in summary)
    assert len(summary) == len(set(summary))


@pytest.mark.django_db
def test_bulk_create_errors_name_the_case_and_the_fields_label():
    dataset = DatasetFactory()
    with pytest.raises(ValidationError) as caught:
        services.case_bulk_create(
            dataset=dataset, cases=[{"question": "Fine"}, {"question": "", "expected_answer": "A"}]
        )
    assert caught.value.messages == ["Case 2: Question: Write the question the agent should answer."]

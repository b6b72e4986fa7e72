"""datasets.fields.CASE_FIELDS is the one list of a test case's fields: the model, the case
form, the CSV export and import and the EvalSet extension all agree with it."""

import pytest
from django.db import connection

from datasets.csv_import import CSV_COLUMNS
from datasets.exporters import CSV_HEADER
from datasets.fields import (
    CASE_EDITABLE_FIELDS,
    CASE_FIELD_NAMES,
    EVAL_SET_EXTENSION_FIELDS,
    SCORING_FIELDS,
    case_field_label,
)
from datasets.forms import CaseForm, DatasetSettingsForm
from datasets.jobs import EXTRACT, GENERATE, job_enqueue
from datasets.models import Dataset, TestCase

# Columns of the row that are not case content: identity, order, relations, timestamps, and the
# verdict flips that runs count onto the case (runs.comparing.flaky), which no one edits or exports.
NOT_CASE_FIELDS = {"id", "dataset", "position", "documents", "source_document", "created_at", "updated_at"}
NOT_CASE_FIELDS |= {"flips", "flip_chances"}


def test_every_content_column_of_a_test_case_is_a_case_field():
    columns = {field.name for field in TestCase._meta.get_fields() if field.concrete or field.many_to_many}

    assert set(CASE_FIELD_NAMES) == columns - NOT_CASE_FIELDS


def test_the_case_form_edits_exactly_the_editable_fields():
    assert set(CaseForm.base_fields) - set(CaseForm.PART_FIELDS) == set(CASE_EDITABLE_FIELDS)
    # The scenario's inputs are parts of the one scenario field.
    assert all(name.startswith("scenario_") for name in CaseForm.PART_FIELDS)


def test_the_case_form_labels_fields_as_messages_name_them():
    form = CaseForm()

    assert {name: str(form[name].label) for name in CASE_EDITABLE_FIELDS} == {
        name: case_field_label(name) for name in CASE_EDITABLE_FIELDS
    }


def test_every_exported_column_is_read_back_by_its_own_name():
    assert {name: CSV_COLUMNS[name] for name in CSV_HEADER} == {name: name for name in CSV_HEADER}
    assert "extra" not in CSV_HEADER  # kept only through EvalSet JSON


def test_the_eval_set_extension_holds_what_the_eval_set_shape_has_no_place_for():
    native = {"case_id", "question", "expected_answer", "turns", "expected_tools", "tags", "extra"}

    assert set(EVAL_SET_EXTENSION_FIELDS) == set(CASE_FIELD_NAMES) - native


def test_the_settings_form_edits_exactly_the_scoring_fields():
    assert tuple(DatasetSettingsForm.base_fields) == SCORING_FIELDS
    assert set(SCORING_FIELDS) <= {field.name for field in Dataset._meta.get_fields()}


@pytest.mark.django_db
@pytest.mark.parametrize("kind", [EXTRACT, GENERATE], ids=["extract", "generate"])
def test_a_job_is_sent_after_commit_and_a_broker_error_then_is_logged_not_raised(kind):
    # The test runs inside a transaction: the callback waits for a commit that never comes.
    before = len(connection.run_on_commit)

    job_enqueue(kind, 1)

    (_, callback, robust), *_ = connection.run_on_commit[before:]
    assert robust
    assert callback.func == kind.task.delay and callback.args == (1,)

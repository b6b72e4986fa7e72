"""Migration 0003: extracted cases' uploaded file moves from their attachments to their source."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("datasets", "0002_testcase_extra")]
AFTER = [("datasets", "0003_case_source_document")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_the_uploaded_file_becomes_the_source_and_other_attachments_stay():
    old = _migrate(BEFORE)
    Team = old.get_model("accounts", "Team")
    Agent = old.get_model("agents", "Agent")
    Dataset = old.get_model("datasets", "Dataset")
    Document = old.get_model("datasets", "Document")
    TestCase = old.get_model("datasets", "TestCase")
    team = Team.objects.create(name="T")
    agent = Agent.objects.create(team=team, name="A", kind="knowledge")
    upload = Dataset.objects.create(agent=agent, name="Up", source="upload", status="ready")
    plan = Document.objects.create(team=team, dataset=upload, original_name="plan.xlsx", file_type="xlsx")
    extra = Document.objects.create(team=team, dataset=upload, original_name="invoice.pdf", file_type="pdf")
    extracted = TestCase.objects.create(
        dataset=upload, question="Q1", source_file="plan.xlsx", source_location="S row 2"
    )
    extracted.documents.add(plan, extra)
    generated = Dataset.objects.create(agent=agent, name="Gen", source="generated", status="ready")
    invoice = Document.objects.create(
        team=team, dataset=generated, original_name="inv.docx", file_type="docx", generated=True
    )
    gen_case = TestCase.objects.create(dataset=generated, question="Q2")
    gen_case.documents.add(invoice)

    new = _migrate(AFTER)
    TestCase = new.get_model("datasets", "TestCase")
    moved = TestCase.objects.get(pk=extracted.pk)
    assert moved.source_document_id == plan.pk
    assert sorted(moved.documents.values_list("original_name", flat=True)) == ["invoice.pdf"]
    kept = TestCase.objects.get(pk=gen_case.pk)
    assert kept.source_document_id is None
    assert list(kept.documents.values_list("original_name", flat=True)) == ["inv.docx"]

    back = _migrate(BEFORE)
    TestCase = back.get_model("datasets", "TestCase")
    assert sorted(TestCase.objects.get(pk=extracted.pk).documents.values_list("original_name", flat=True)) == [
        "invoice.pdf",
        "plan.xlsx",
    ]
    # Leave the database as the other tests expect it: every app at its latest migration.
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

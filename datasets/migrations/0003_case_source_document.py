"""Split a case's source (the uploaded file it was read from) from its attachments.

Until now every case extracted from an upload had the uploaded file among its
documents, so it reached the agent under test, expected answers included. The file
moves to the new `source_document`; runs keep their snapshots as they were.
"""

from django.db import migrations, models
import django.db.models.deletion


def _source_documents(apps):
    Dataset = apps.get_model("datasets", "Dataset")
    Document = apps.get_model("datasets", "Document")
    for dataset_id in Dataset.objects.filter(source="upload").values_list("pk", flat=True):
        # The file a dataset was extracted from is its first document (datasets.documents.is_source_document).
        document = Document.objects.filter(dataset_id=dataset_id).order_by("pk").first()
        if document is not None:
            yield dataset_id, document


def forwards(apps, schema_editor):
    TestCase = apps.get_model("datasets", "TestCase")
    Link = TestCase.documents.through
    for dataset_id, document in _source_documents(apps):
        links = Link.objects.filter(testcase__dataset_id=dataset_id, document_id=document.pk)
        case_ids = list(links.values_list("testcase_id", flat=True))
        if case_ids:
            TestCase.objects.filter(pk__in=case_ids).update(source_document=document)
            links.delete()
        # Extracted cases that had lost the link keep their provenance by name.
        TestCase.objects.filter(
            dataset_id=dataset_id, source_document__isnull=True, source_file=document.original_name
        ).exclude(source_file="").update(source_document=document)


def backwards(apps, schema_editor):
    TestCase = apps.get_model("datasets", "TestCase")
    Link = TestCase.documents.through
    for _dataset_id, document in _source_documents(apps):
        cases = TestCase.objects.filter(source_document=document)
        Link.objects.bulk_create(
            [Link(testcase_id=pk, document_id=document.pk) for pk in cases.values_list("pk", flat=True)],
            ignore_conflicts=True,
        )


class Migration(migrations.Migration):
    dependencies = [
        ("datasets", "0002_testcase_extra"),
    ]

    operations = [
        migrations.AddField(
            model_name="dataset",
            name="agent_reads_source",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="dataset",
            name="eval_set_id",
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.AddField(
            model_name="testcase",
            name="source_document",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="sourced_cases",
                to="datasets.document",
            ),
        ),
        migrations.AlterField(
            model_name="testcase",
            name="documents",
            field=models.ManyToManyField(
                blank=True, related_name="cases", to="datasets.document", verbose_name="attachments"
            ),
        ),
        migrations.RunPython(forwards, backwards),
    ]

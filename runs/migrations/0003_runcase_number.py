"""RunCase.number: the case's number in its dataset, kept by re-runs and verifications.

Existing rows: a first run's number is its position + 1; a re-run's is the number of
the parent's case it copied (matched on the dataset case, then the case id, then the
question, as runs.comparison matches them), else its position + 1.
"""

from django.db import migrations, models
from django.db.models import F


def backfill(apps, schema_editor):
    RunCase = apps.get_model("runs", "RunCase")
    Run = apps.get_model("runs", "Run")
    RunCase.objects.update(number=F("position") + 1)
    for run in Run.objects.exclude(parent=None).order_by("id").iterator():
        parent_cases = list(RunCase.objects.filter(run_id=run.parent_id))
        by_source = {c.source_case_id: c.number for c in parent_cases if c.source_case_id}
        by_id = {c.case_id: c.number for c in parent_cases if c.case_id}
        by_question = {c.question.strip(): c.number for c in parent_cases}
        for case in RunCase.objects.filter(run=run):
            number = (
                by_source.get(case.source_case_id) or by_id.get(case.case_id) or by_question.get(case.question.strip())
            )
            if number and number != case.number:
                RunCase.objects.filter(pk=case.pk).update(number=number)


class Migration(migrations.Migration):
    dependencies = [("runs", "0002_engine_claims")]

    operations = [
        migrations.AddField(
            model_name="runcase",
            name="number",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]

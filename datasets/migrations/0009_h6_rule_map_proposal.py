from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("datasets", "0008_testcase_scenario"),
    ]

    operations = [
        migrations.AddField(
            model_name="rulemap",
            name="tied",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="rulemap",
            name="adopted",
            field=models.BooleanField(default=True),
        ),
    ]

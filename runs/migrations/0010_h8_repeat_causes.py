from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0009_trust_fields"),
    ]

    operations = [
        migrations.AddField(
            model_name="result",
            name="repeats",
            field=models.JSONField(blank=True, default=list),
        ),
    ]

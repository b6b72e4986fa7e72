from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0011_merge_repeats_and_summary"),
    ]

    operations = [
        migrations.AddField(
            model_name="result",
            name="claimed_ahead",
            field=models.BooleanField(default=False),
        ),
    ]

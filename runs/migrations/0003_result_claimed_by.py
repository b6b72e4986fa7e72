from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("runs", "0002_engine_claims")]

    operations = [
        migrations.AddField(
            model_name="result",
            name="claimed_by",
            field=models.CharField(blank=True, max_length=200),
        ),
    ]

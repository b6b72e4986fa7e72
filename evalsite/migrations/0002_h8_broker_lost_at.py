from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("evalsite", "0001_workerheartbeat"),
    ]

    operations = [
        migrations.AddField(
            model_name="workerheartbeat",
            name="broker_lost_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]

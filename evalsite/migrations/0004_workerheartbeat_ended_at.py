from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("evalsite", "0003_ha_idempotencykey"),
    ]

    operations = [
        migrations.AddField(
            model_name="workerheartbeat",
            name="ended_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]

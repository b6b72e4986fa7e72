from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("suggestions", "0003_generation")]

    operations = [
        migrations.AddField(
            model_name="suggestiongeneration",
            name="notes",
            field=models.JSONField(blank=True, default=list),
        ),
    ]

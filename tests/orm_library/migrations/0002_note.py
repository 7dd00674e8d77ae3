import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("orm_library", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="Note",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("object_id", models.PositiveBigIntegerField()),
                ("text", models.CharField(max_length=200)),
                ("content_type", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE,
                                                   to="contenttypes.contenttype")),
            ],
        ),
    ]

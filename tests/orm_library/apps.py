from django.apps import AppConfig


class OrmLibraryConfig(AppConfig):
    name = "orm_library"
    default_auto_field = "django.db.models.BigAutoField"

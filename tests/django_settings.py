"""Django settings for tests/test_django.py and tests/test_strawberry.py only.

They configure Django with these values in a fixture (never
through DJANGO_SETTINGS_MODULE), so other test modules are unaffected.  The
app under test is the example project's ``books`` app; the database is an
in-memory SQLite database, which Django keeps per thread: the test client
runs each request on the test's thread, so requests see the test's rows.
"""
import importlib.util

SECRET_KEY = "tests-only"
DEBUG = False
ALLOWED_HOSTS = ["testserver"]
# graphene_django (for GraphiQL's template) where it is installed: the
# strawberry tests also run where it is not (graphql-core 3.3).
INSTALLED_APPS = ["django.contrib.contenttypes",  # orm_library's notes: generic relations
                  *(["graphene_django"] if importlib.util.find_spec("graphene_django") else []), "books",
                  "orm_library"]
MIDDLEWARE = ["dataloader_sync.django.DataLoaderMiddleware"]
DATALOADER_SYNC_REGISTRY_FACTORY = "books.loaders.make_registry"
ROOT_URLCONF = "library_site.urls"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
# PostgreSQL for the ORM tests (tests/orm_library) where its driver is installed:
# tests/postgres_server.py starts a server and fills in HOST, PORT and NAME
# before the first connection (use_for_django).
if importlib.util.find_spec("psycopg"):
    DATABASES["postgres"] = {"ENGINE": "django.db.backends.postgresql", "NAME": "", "HOST": "", "PORT": "",
                             "USER": "postgres"}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True}]
# REST framework (tests/test_rest_framework*.py): no authentication, so that no view needs
# django.contrib.auth; the JSON renderer first, as by default
REST_FRAMEWORK = {"DEFAULT_AUTHENTICATION_CLASSES": [], "DEFAULT_PERMISSION_CLASSES": [],
                  "UNAUTHENTICATED_USER": None}
GRAPHENE = {"SCHEMA": "books.schema.schema"}

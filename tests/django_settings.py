"""Django settings for tests/test_django.py only.

test_django.py configures Django with these values in a fixture (never
through DJANGO_SETTINGS_MODULE), so other test modules are unaffected.  The
app under test is the example project's ``books`` app; the database is an
in-memory SQLite database, which Django keeps per thread: the test client
runs each request on the test's thread, so requests see the test's rows.
"""
SECRET_KEY = "tests-only"
DEBUG = False
ALLOWED_HOSTS = ["testserver"]
INSTALLED_APPS = ["graphene_django", "books"]
MIDDLEWARE = ["dataloader_sync.django.DataLoaderMiddleware"]
DATALOADER_SYNC_REGISTRY_FACTORY = "books.loaders.make_registry"
ROOT_URLCONF = "library_site.urls"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True}]
GRAPHENE = {"SCHEMA": "books.schema.schema"}

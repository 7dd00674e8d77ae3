"""Settings of the example project: the least Django needs, plus dataloader_sync.

Not for production (the secret key is public, DEBUG is on).
"""
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = "example-only-not-secret"
DEBUG = True
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

INSTALLED_APPS = [
    "django.contrib.staticfiles",  # GraphiQL's page
    "graphene_django",
    "books",
]

MIDDLEWARE = [
    "django.middleware.common.CommonMiddleware",
    # request.loaders: a new registry per request, closed with the response.
    "dataloader_sync.django.DataLoaderMiddleware",
]

# make_registry(request) -> DataLoaderRegistry, called once per request.
DATALOADER_SYNC_REGISTRY_FACTORY = "books.loaders.make_registry"

# Optional: share the loaders' rows across requests and processes through
# Django's cache framework (books.loaders.value_cache). A CACHES alias, e.g.
# "default" (local memory unless CACHES says otherwise; a Redis or memcached
# backend shares across processes and hosts); None: every request loads alone.
BOOKS_VALUE_CACHE = None
BOOKS_VALUE_CACHE_TTL = 60  # seconds

ROOT_URLCONF = "library_site.urls"
WSGI_APPLICATION = "library_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {"context_processors": ["django.template.context_processors.request"]},
    }
]

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": BASE_DIR / "db.sqlite3",
    }
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
STATIC_URL = "static/"

GRAPHENE = {"SCHEMA": "books.schema.schema"}

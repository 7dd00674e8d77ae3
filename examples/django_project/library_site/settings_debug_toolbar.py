"""The example project with django-debug-toolbar and its DataLoaders panel.

    pip install django-debug-toolbar
    cd examples/django_project
    DJANGO_SETTINGS_MODULE=library_site.settings_debug_toolbar python manage.py migrate
    DJANGO_SETTINGS_MODULE=library_site.settings_debug_toolbar python manage.py runserver
    # then open http://127.0.0.1:8000/authors and the toolbar's "DataLoaders" panel

The toolbar's middleware comes first (its documentation says so), then the
project's; the panel needs nothing else: the registries the requests get
from ``DataLoaderMiddleware`` report to it.
"""
import debug_toolbar.settings

from .settings import *  # noqa: F403
from .settings import INSTALLED_APPS, MIDDLEWARE

INSTALLED_APPS = [*INSTALLED_APPS, "debug_toolbar"]
MIDDLEWARE = ["debug_toolbar.middleware.DebugToolbarMiddleware", *MIDDLEWARE]
INTERNAL_IPS = ["127.0.0.1"]
ROOT_URLCONF = "library_site.urls_debug_toolbar"

# The toolbar's panels, with DataLoaders next to SQL.
_SQL = debug_toolbar.settings.PANELS_DEFAULTS.index("debug_toolbar.panels.sql.SQLPanel")
DEBUG_TOOLBAR_PANELS = [
    *debug_toolbar.settings.PANELS_DEFAULTS[:_SQL + 1],
    "dataloader_sync.django.debug_toolbar.DataLoadersPanel",
    *debug_toolbar.settings.PANELS_DEFAULTS[_SQL + 1:],
]

"""Sphinx configuration for the dataloader_sync documentation.

Build: ``python -m sphinx -W --keep-going -b html docs /tmp/docs-html``
(from the repository root; CI builds with warnings as errors).
"""
from __future__ import annotations

import os
import sys

# Document the package of this checkout, installed or not.
sys.path.insert(0, os.path.abspath(".."))


def _configure_django() -> None:
    """Minimal Django settings, so that autodoc can import every Django integration module.

    Modules that import models, the ORM or django-debug-toolbar need
    configured settings and ready apps; a build never touches a database.
    Apps of this list that are installed are added (the ``docs`` extra
    installs the integrations' packages).  Nothing happens without Django or
    when settings are already configured (``DJANGO_SETTINGS_MODULE``).
    """
    import importlib.util

    if importlib.util.find_spec("django") is None:
        return
    import django
    from django.conf import settings

    if settings.configured or os.environ.get("DJANGO_SETTINGS_MODULE"):
        return
    optional_apps = ["graphene_django", "debug_toolbar", "strawberry_django"]
    settings.configure(
        SECRET_KEY="docs-build-only",
        INSTALLED_APPS=[
            "django.contrib.contenttypes",
            "django.contrib.auth",
            "django.contrib.staticfiles",  # django-debug-toolbar 8 checks its storage at setup()
            *(app for app in optional_apps if importlib.util.find_spec(app) is not None),
        ],
        STATIC_URL="/static/",
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        USE_TZ=True,
    )
    django.setup()


_configure_django()

project = "dataloader_sync"
author = "dataloader_sync contributors"
copyright = "dataloader_sync contributors"
release = "0.1.0"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",  # Args: / Returns: / Raises: sections
    "sphinx.ext.viewcode",
]

html_theme = "furo"
html_title = "dataloader_sync"

# `name` in a page or a docstring links to the API reference when it can.
default_role = "py:obj"

autodoc_default_options = {
    "members": True,
    "show-inheritance": True,
}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# "Attributes:" as fields of the class, not as second descriptions of the
# attributes autodoc documents anyway (NamedTuples, dataclasses).
napoleon_use_ivar = True

exclude_patterns = ["_build"]

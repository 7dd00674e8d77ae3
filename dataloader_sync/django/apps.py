"""The ``dataloader_sync.django`` Django app: its system checks.

Nothing else needs the app: the middleware, the view and the loaders work
without it.  In ``INSTALLED_APPS`` it registers the check
``dataloader_sync.W001`` (``_view_checks.check_views``), which ``manage.py
check`` and ``runserver`` run; a check must be registered by a module Django
imports at startup, and the app's ``ready()`` is that place (``MIDDLEWARE``
is imported by the request handler, after the checks ran).
"""
from __future__ import annotations

from django.apps import AppConfig

__all__ = ["DataLoaderSyncConfig"]


class DataLoaderSyncConfig(AppConfig):  # type: ignore[misc]
    """``INSTALLED_APPS += ["dataloader_sync.django"]``: registers dataloader_sync's system checks.

    The label is ``dataloader_sync`` (the default, ``django``, would read as Django's own). No models.
    """

    name = "dataloader_sync.django"
    label = "dataloader_sync"
    verbose_name = "dataloader_sync"

    def ready(self) -> None:
        """Register the system checks (``checks.register`` keeps one entry per check function)."""
        from django.core import checks

        from ._view_checks import check_views

        checks.register(check_views, checks.Tags.urls)

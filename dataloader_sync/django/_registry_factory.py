"""The per-request registry factory named in Django settings.

``DATALOADER_SYNC_REGISTRY_FACTORY`` names (dotted path) or is a callable
returning a new ``DataLoaderRegistry``: ``factory(request)`` if it takes one
argument, so loaders can depend on the request (``request.user`` for
permission-filtered queries), else ``factory()`` —
``"dataloader_sync.DataLoaderRegistry"`` will do.
"""
from __future__ import annotations

from typing import Callable, Union

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from .._registry import DataLoaderRegistry
from .._request_registry import RequestFactory

__all__ = ["SETTING", "get_registry_factory", "resolve_factory"]


#: The Django setting naming the registry factory.
SETTING = "DATALOADER_SYNC_REGISTRY_FACTORY"

RegistryFactory = Callable[..., DataLoaderRegistry]


def resolve_factory(value: Union[str, RegistryFactory, None], where: str = SETTING) -> RegistryFactory:
    """Turn a dotted path or a callable into the registry factory.

    Args:
        value: ``"myapp.loaders.make_registry"`` or the function itself.
        where: what *value* came from, for error messages.

    Returns:
        ``factory(request)``: the user's factory called with the request or
        with nothing, as it takes (see ``RequestFactory``).

    Raises:
        ImproperlyConfigured: *value* is missing, cannot be imported, is
        not callable or takes more than one argument.
    """
    if value is None:
        raise ImproperlyConfigured(
            f"{where} is not set: name a function making a DataLoaderRegistry for a request, "
            f"e.g. {SETTING} = \"myapp.loaders.make_registry\""
        )
    if isinstance(value, str):
        try:
            value = import_string(value)
        except ImportError as exc:
            raise ImproperlyConfigured(f"{where}: cannot import {value!r}: {exc}") from exc
    if not callable(value):
        raise ImproperlyConfigured(f"{where} must name a callable, got {type(value).__name__}")
    try:
        return RequestFactory(value, where)
    except TypeError as exc:
        raise ImproperlyConfigured(str(exc)) from None


def get_registry_factory() -> RegistryFactory:
    """The factory named by the ``DATALOADER_SYNC_REGISTRY_FACTORY`` setting.

    Raises:
        ImproperlyConfigured: the setting is missing or names no callable.
    """
    return resolve_factory(getattr(settings, SETTING, None))


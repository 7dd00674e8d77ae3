"""A mixin for graphene-django's ``GraphQLView``: dataloader execution, a registry per request.

This module never imports graphene-django; ``graphql_view_class()`` does,
when ``dataloader_sync.django.GraphQLView`` is first used.

Guarantees:
- The view executes with ``DjangoDebugExecutionContext`` (a
  ``DataLoaderExecutionContext`` that completes graphene-django's ``_debug``
  field last, see ``graphql/_django_debug``) unless the view is given another
  ``execution_context_class``.
- With the ``DATALOADER_SYNC_AUTO_RELATIONS`` setting True, the default is
  ``AutoRelationsExecutionContext`` (which is also a
  ``DjangoDebugExecutionContext``): default-resolved relation fields are
  batched with no resolver written.  The setting is read when the view is
  made (for each request).
- Resolvers find the request's registry as ``info.context.loaders``: the one
  ``DataLoaderMiddleware`` made, or, without the middleware, one the view
  makes for the request and closes when ``dispatch`` returns (the response of
  ``GraphQLView`` is not streamed, so its body is complete by then).
"""
from __future__ import annotations

import functools
from typing import Any, Optional, Union

from .._optional import missing_dependency
from .._registry import DataLoaderRegistry
from .._request_registry import close_quietly
from ._registry_factory import RegistryFactory, get_registry_factory, resolve_factory

__all__ = ["DataLoaderGraphQLViewMixin", "auto_relations_setting", "default_execution_context_class",
           "graphql_view_class"]


def _check_factory_kind(value: Any, where: str) -> None:
    if value is not None and not isinstance(value, str) and not callable(value):
        raise TypeError(f"{where} must be a callable, a dotted path or None, got {type(value).__name__}")


class DataLoaderGraphQLViewMixin:
    """Mix into graphene-django's ``GraphQLView`` to batch loads per request.

    ``class MyView(DataLoaderGraphQLViewMixin, GraphQLView): ...`` (the mixin
    first).  ``dataloader_sync.django.GraphQLView`` is that class ready-made.

    Thread-safe: Django makes a view instance per request; the class
    attributes are read only.

    Attributes:
        registry_factory: a callable returning a new ``DataLoaderRegistry``
            (called with the request if it takes one argument, else with
            nothing: ``DataLoaderRegistry`` itself will do) or its dotted
            path, used when the request has no ``loaders`` registry (no
            ``DataLoaderMiddleware``).  None: the
            ``DATALOADER_SYNC_REGISTRY_FACTORY`` setting.  Its kind is
            checked when a subclass is made or ``as_view()`` is called (a
            dotted path is imported on the first request, when Django's
            apps are ready).
    """

    registry_factory: Optional[Union[str, RegistryFactory]] = None
    execution_context_class: Any = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _check_factory_kind(cls.registry_factory, f"{cls.__name__}.registry_factory")

    @classmethod
    def as_view(cls, **initkwargs: Any) -> Any:
        """Django's ``as_view``; a ``registry_factory`` given here is checked now.

        Raises:
            TypeError: ``registry_factory`` is neither a callable, a dotted path nor None.
        """
        if "registry_factory" in initkwargs:
            _check_factory_kind(initkwargs["registry_factory"], "registry_factory")
        return super().as_view(**initkwargs)  # type: ignore[misc]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # graphene-django's __init__ takes a fixed set of keywords: keep ours from it.
        if "registry_factory" in kwargs:
            self.registry_factory = kwargs.pop("registry_factory")
        if kwargs.get("execution_context_class") is None and self.execution_context_class is None:
            kwargs["execution_context_class"] = default_execution_context_class()
        super().__init__(*args, **kwargs)

    def get_registry_factory(self) -> RegistryFactory:
        """The factory for requests that come without a registry.

        Raises:
            ImproperlyConfigured: neither ``registry_factory`` nor the setting
            names a callable.
        """
        if self.registry_factory is None:
            return get_registry_factory()
        return resolve_factory(self.registry_factory, f"{type(self).__name__}.registry_factory")

    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        """Handle the request with ``request.loaders`` set, making (and closing) it if absent.

        Raises:
            ImproperlyConfigured, TypeError: no usable registry factory.
        """
        if isinstance(getattr(request, "loaders", None), DataLoaderRegistry):
            return super().dispatch(request, *args, **kwargs)  # type: ignore[misc]
        registry = self.get_registry_factory()(request)
        request.loaders = registry
        try:
            return super().dispatch(request, *args, **kwargs)  # type: ignore[misc]
        finally:
            del request.loaders
            close_quietly(registry)


def auto_relations_setting() -> bool:
    """The ``DATALOADER_SYNC_AUTO_RELATIONS`` setting (default False).

    Raises:
        ImproperlyConfigured: the setting is not a bool.
    """
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    value = getattr(settings, "DATALOADER_SYNC_AUTO_RELATIONS", False)
    if not isinstance(value, bool):
        raise ImproperlyConfigured(
            f"DATALOADER_SYNC_AUTO_RELATIONS must be True or False, got {value!r}")
    return value


def default_execution_context_class() -> type:
    """``AutoRelationsExecutionContext`` when the setting turns auto relations on, else
    ``DjangoDebugExecutionContext``."""
    if auto_relations_setting():
        from ..graphql._auto_relations import AutoRelationsExecutionContext

        return AutoRelationsExecutionContext
    from ..graphql._django_debug import DjangoDebugExecutionContext

    return DjangoDebugExecutionContext


@functools.cache
def graphql_view_class() -> type:
    """graphene-django's ``GraphQLView`` with ``DataLoaderGraphQLViewMixin``, made once.

    Raises:
        ImportError: graphene-django is not installed.
    """
    try:
        from graphene_django.views import GraphQLView as Base
    except ImportError as exc:
        raise missing_dependency("dataloader_sync.django.GraphQLView", exc, "graphene-django") from exc

    class GraphQLView(DataLoaderGraphQLViewMixin, Base):  # type: ignore[misc]
        """graphene-django's ``GraphQLView`` running with dataloaders (see the mixin).

        Thread-safe as a view class: Django makes an instance per request.
        """

    GraphQLView.__module__ = "dataloader_sync.django"
    return GraphQLView

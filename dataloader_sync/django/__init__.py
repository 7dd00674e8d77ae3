"""Django integration: one DataLoaderRegistry per request, closed with the response.

- ``DataLoaderMiddleware`` sets ``request.loaders`` to a registry made by the
  ``DATALOADER_SYNC_REGISTRY_FACTORY`` setting (``factory(request)``).
- ``related_loader(registry, Author.books)`` and ``model_loader(registry,
  Author)``: loaders of relations and of rows by field, one SQL statement per
  batch (their batch functions ``load_related`` and ``load_model`` are
  loader families, see ``DataLoaderRegistry.loader_for``).
- ``DataLoaderGraphQLViewMixin`` makes graphene-django's ``GraphQLView``
  execute with ``DataLoaderExecutionContext``; ``GraphQLView`` (imported on
  first use, with graphene-django) is the two combined.
- ``DjangoConnectionField`` and ``DjangoFilterConnectionField`` (imported on
  first use, with graphene-django; the second needs django-filter) are
  graphene-django's fields whose resolvers may also return a
  ``related_loader`` future: the field's filters, order and page are applied
  inside the batch.
- ``FETCH_LEVEL`` (Django >= 6.1, imported on first use): a fetch mode
  (``Author.objects.fetch_mode(FETCH_LEVEL)``) whose peers are the instances
  of the same level of the running GraphQL execution; ``FETCH_PEERS``
  outside one.  On an older Django, importing it raises ``ImportError``
  naming the version it needs.
- ``DjangoDebugExecutionContext`` (imported on first use, with graphql-core)
  makes graphene-django's ``_debug`` field list every SQL statement of the
  execution, the batches of later levels included; ``GraphQLView`` executes
  with it.

Needs Django (``pip install "dataloader_sync[django]"``); graphene-django is
imported only when ``GraphQLView``, the connection fields or
``DjangoDebugExecutionContext`` are used (``pip install
"dataloader_sync[graphene-django]"``).
"""
from __future__ import annotations

from typing import Any

from .._optional import missing_dependency

try:
    import django as _django
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "dataloader_sync.django needs Django: pip install \"dataloader_sync[django]\""
    ) from exc

from ._middleware import DataLoaderMiddleware as DataLoaderMiddleware
from ._orm import load_model as load_model
from ._orm import load_related as load_related
from ._orm import model_loader as model_loader
from ._orm import related_loader as related_loader
from ._value_cache import DjangoValueCache as DjangoValueCache
from ._view import DataLoaderGraphQLViewMixin as DataLoaderGraphQLViewMixin

# GraphQLView, the connection fields and DjangoDebugExecutionContext are left
# out of __all__ so that a star import does not import graphene-django or
# graphql-core; they are in __dir__ for discovery.
__all__ = [
    "DataLoaderGraphQLViewMixin",
    "DataLoaderMiddleware",
    "DjangoValueCache",
    "load_model",
    "load_related",
    "model_loader",
    "related_loader",
]
_LAZY_NAMES = [
    "DjangoConnectionField",
    "DjangoDebugExecutionContext",
    "DjangoFilterConnectionField",
    "GraphQLView",
]


def __getattr__(name: str) -> Any:
    if name == "FETCH_LEVEL":
        return _import_fetch_level()
    if name not in _LAZY_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        return _import_lazy(name)
    except ImportError as exc:
        if exc.name is None or exc.name.startswith("dataloader_sync"):
            raise  # not a missing dependency
        raise missing_dependency(f"dataloader_sync.django.{name}", exc, "graphene-django") from exc


def _import_lazy(name: str) -> Any:
    if name == "GraphQLView":
        from ._view import graphql_view_class

        return graphql_view_class()
    if name == "DjangoConnectionField":
        from ._graphene_fields import DjangoConnectionField

        return DjangoConnectionField
    if name == "DjangoFilterConnectionField":
        from ._graphene_fields import filter_connection_field_class

        return filter_connection_field_class()
    from ..graphql._django_debug import DjangoDebugExecutionContext

    return DjangoDebugExecutionContext


def _import_fetch_level() -> Any:
    """``FETCH_LEVEL``, or the ``ImportError`` that names the Django it needs."""
    try:
        from ._fetch_level import FETCH_LEVEL
    except ImportError as exc:
        if exc.name != "django.db.models.fetch_modes":
            raise
        raise ImportError(
            f"dataloader_sync.django.FETCH_LEVEL needs Django >= 6.1 (fetch modes); Django "
            f"{_django.get_version()} is installed: pip install \"django>=6.1\" (on Python >= 3.12)",
            name=__name__) from None
    return FETCH_LEVEL


def _fetch_modes_available() -> bool:
    """Whether this Django has fetch modes (6.1 and later): ``FETCH_LEVEL`` can be used."""
    import importlib.util

    return importlib.util.find_spec("django.db.models.fetch_modes") is not None


def __dir__() -> list[str]:
    return sorted([*__all__, *_LAZY_NAMES, *(["FETCH_LEVEL"] if _fetch_modes_available() else [])])

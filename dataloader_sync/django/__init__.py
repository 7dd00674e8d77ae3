"""Django integration: one DataLoaderRegistry per request, closed with the response.

- ``DataLoaderMiddleware`` sets ``request.loaders`` to a registry made by the
  ``DATALOADER_SYNC_REGISTRY_FACTORY`` setting (``factory(request)``).
- ``DataLoaderGraphQLViewMixin`` makes graphene-django's ``GraphQLView``
  execute with ``DataLoaderExecutionContext``; ``GraphQLView`` (imported on
  first use, with graphene-django) is the two combined.
- ``DjangoDebugExecutionContext`` (imported on first use, with graphql-core)
  makes graphene-django's ``_debug`` field list every SQL statement of the
  execution, the batches of later levels included; ``GraphQLView`` executes
  with it.

Needs Django (``pip install dataloader_sync[django]``); graphene-django is
imported only when ``GraphQLView`` is used.
"""
from __future__ import annotations

from typing import Any

try:
    import django as _django  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "dataloader_sync.django needs Django: pip install dataloader_sync[django]"
    ) from exc

from ._middleware import DataLoaderMiddleware as DataLoaderMiddleware
from ._value_cache import DjangoValueCache as DjangoValueCache
from ._view import DataLoaderGraphQLViewMixin as DataLoaderGraphQLViewMixin

# GraphQLView and DjangoDebugExecutionContext are left out of __all__ so that a
# star import does not import graphene-django or graphql-core; they are in
# __dir__ for discovery.
__all__ = ["DataLoaderGraphQLViewMixin", "DataLoaderMiddleware", "DjangoValueCache"]


def __getattr__(name: str) -> Any:
    if name == "GraphQLView":
        from ._view import graphql_view_class

        return graphql_view_class()
    if name == "DjangoDebugExecutionContext":
        from ._debug import DjangoDebugExecutionContext

        return DjangoDebugExecutionContext
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*__all__, "DjangoDebugExecutionContext", "GraphQLView"])

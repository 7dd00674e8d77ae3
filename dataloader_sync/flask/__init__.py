"""Flask integration: one DataLoaderRegistry per request, closed at teardown.

``DataLoaders(app, factory=make_registry)`` gives each request its own
registry (fresh caches), ``graphql_view(schema)`` serves GraphQL with it in
``info.context.loaders``.  Needs Flask (``pip install "dataloader_sync[flask]"``);
``graphql_view`` also needs graphql-core (``dataloader_sync[graphql]``).
"""
from __future__ import annotations

try:
    import flask as _flask  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "dataloader_sync.flask needs Flask: pip install \"dataloader_sync[flask]\""
    ) from exc

from ._extension import DataLoaders as DataLoaders
from ._view import GraphQLContext as GraphQLContext
from ._view import graphql_view as graphql_view

__all__ = ["DataLoaders", "GraphQLContext", "graphql_view"]

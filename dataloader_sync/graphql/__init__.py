"""GraphQL integration: run graphene 3 / graphql-core 3 synchronously with DataLoaders.

``DataLoaderExecutionContext`` lets resolvers return ``concurrent.futures.Future``s
(from ``DataLoader.load``, ``Future.then``, an executor) while the execution stays
on the request thread.  Pass it as ``execution_context_class=`` (graphql-core 3.2,
graphene, graphene-django's ``GraphQLView``) or ``executor_class=`` (graphql-core 3.3).
graphql-core's async execution (``graphql()``, ``execute_async``, strawberry's
``await schema.execute``) needs no class of ours: loader futures are awaitable
(docs/asgi.rst).

Requires graphql-core: ``pip install "dataloader_sync[graphql]"``.
"""
from __future__ import annotations

try:
    import graphql as _graphql  # noqa: F401
except ImportError as exc:
    raise ImportError(
        "dataloader_sync.graphql needs graphql-core: pip install \"dataloader_sync[graphql]\""
    ) from exc

from ._execution import DataLoaderExecutionContext as DataLoaderExecutionContext
from ._scope import ExecutionStalledError as ExecutionStalledError

__all__ = ["DataLoaderExecutionContext", "ExecutionStalledError"]

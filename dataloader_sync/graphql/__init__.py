"""GraphQL integration: run graphene 3 / graphql-core 3 synchronously with DataLoaders.

``DataLoaderExecutionContext`` lets resolvers return ``concurrent.futures.Future``s
(from ``DataLoader.load``, ``Future.then``, an executor) while the execution stays
on the request thread.  Pass it as ``execution_context_class=`` (graphql-core 3.2,
graphene, graphene-django's ``GraphQLView``) or ``executor_class=`` (graphql-core 3.3).
graphql-core's async execution (``graphql()``, ``execute_async``, strawberry's
``await schema.execute``) needs no class of ours: loader futures are awaitable
(docs/asgi.rst).

``AutoRelationsExecutionContext`` (imported on first use) is that class, also
resolving every default-resolved relation field of a Django model instance
or SQLAlchemy mapped instance through the relation's loader: batching with
no resolver written.

Requires graphql-core: ``pip install "dataloader_sync[graphql]"``.
"""
from __future__ import annotations

from .._optional import missing_dependency

try:
    import graphql as _graphql  # noqa: F401
except ImportError as exc:  # named graphql-core's (exc.name): an integration importing us names its own extra
    raise missing_dependency("dataloader_sync.graphql", exc, "graphql") from exc

from typing import Any

from ._execution import DataLoaderExecutionContext as DataLoaderExecutionContext
from ._scope import ExecutionStalledError as ExecutionStalledError

__all__ = ["AutoRelationsExecutionContext", "DataLoaderExecutionContext", "ExecutionStalledError"]


def __getattr__(name: str) -> Any:
    # Imported on first use: where graphene-django is installed it extends
    # DjangoDebugExecutionContext (_django_debug).
    if name == "AutoRelationsExecutionContext":
        from ._auto_relations import AutoRelationsExecutionContext

        return AutoRelationsExecutionContext
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""strawberry-django integration: connection fields whose resolvers return related loader futures.

- ``connection(...)`` is ``strawberry_django.connection`` (same arguments)
  with :class:`DataLoaderConnectionExtension` in place of strawberry-django's
  connection extension: a resolver may return
  ``related_loader(info.context.loaders, Author.books).load(self)``, and the
  field's filters, order and page are applied inside the batch.

- ``AutoRelationsExtension``: a schema extension that resolves the relation
  fields strawberry-django resolves by itself through the relation's loader
  (``Author.books``): batching with no resolver written.
  ``strawberry.Schema(query=Query, extensions=[AutoRelationsExtension])``
  is all it takes: the extension makes the schema's synchronous executions
  run with ``dataloader_sync.graphql.DataLoaderExecutionContext``
  (``AutoRelationsExecutionContext``: strawberry's own class for its async
  executions).

Needs strawberry-graphql-django (``pip install "dataloader_sync[strawberry-django]"``),
which needs graphql-core 3.3.
"""
from __future__ import annotations

try:
    import strawberry_django as _strawberry_django  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "dataloader_sync.strawberry_django needs strawberry-django: pip install \"dataloader_sync[strawberry-django]\""
    ) from exc

from ._auto import AutoRelationsExtension as AutoRelationsExtension
from ._connection import DataLoaderConnectionExtension as DataLoaderConnectionExtension
from ._connection import connection as connection
from ._execution import AutoRelationsExecutionContext as AutoRelationsExecutionContext

__all__ = ["AutoRelationsExecutionContext", "AutoRelationsExtension", "DataLoaderConnectionExtension", "connection"]

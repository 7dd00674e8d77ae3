"""The execution context a schema with ``AutoRelationsExtension`` runs with: the extension alone is the switch.

The extension's fields return loader futures.  A synchronous execution
completes them only under ``dataloader_sync.graphql.DataLoaderExecutionContext``;
strawberry's async execution awaits them with any class (a loader future is
awaitable on a running event loop, see docs/asgi.rst).  strawberry reads the
schema's ``execution_context_class`` when it calls graphql-core, inside the
extensions' ``on_execute``; there, before the call, :func:`run_with_ours`
makes the schema's class one that waits for futures:

- strawberry's own class (``StrawberryGraphQLCoreExecutionContext``, what
  strawberry sets when no ``execution_context_class`` is given) or None:
  replaced by :class:`AutoRelationsExecutionContext`, once per schema.
- ``DataLoaderExecutionContext`` or a subclass of it: kept.
- any other class: a synchronous execution fails at once with
  :data:`FOREIGN_CLASS`, naming the fix; an async one runs with it, as
  without the extension.

Guarantees:
- :class:`AutoRelationsExecutionContext` is ``DataLoaderExecutionContext``
  for an execution with no running event loop (``execute_sync``, strawberry's
  sync views) and builds strawberry's own class for one under a running loop
  (``await schema.execute``, strawberry's async views, subscriptions): an
  async execution runs exactly as without the extension.  (``execute_sync``
  called on a thread where a loop runs is taken for an async execution:
  such a schema is given ``DataLoaderExecutionContext`` itself.)
- The replacement is one class for every schema, set without a lock: two
  threads' first executions set the same value.
- Per execution: one attribute read and one identity test once replaced.
"""
from __future__ import annotations

from typing import Any

from .._core import loop_getter
from ..graphql import DataLoaderExecutionContext

_get_running_loop = loop_getter()  # asyncio's, through the wall (_core/_compat)

__all__ = ["FOREIGN_CLASS", "AutoRelationsExecutionContext", "run_with_ours"]

#: The error of a synchronous execution whose schema's class does not wait for loader futures.
FOREIGN_CLASS = (
    "AutoRelationsExtension: the schema executes with {name}, which does not wait for loader futures in a"
    " synchronous execution: give strawberry.Schema no execution_context_class (the extension then runs it with"
    " dataloader_sync.graphql.DataLoaderExecutionContext), or a subclass of DataLoaderExecutionContext"
)


def _strawberry_class() -> Any:
    """strawberry's own execution context class (its ``Schema``'s default)."""
    from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

    return StrawberryGraphQLCoreExecutionContext


class AutoRelationsExecutionContext(DataLoaderExecutionContext):
    """``DataLoaderExecutionContext`` for a synchronous execution; strawberry's own class under a running loop.

    What ``AutoRelationsExtension`` gives a schema built with no
    ``execution_context_class`` (see the module notes).
    """

    @classmethod
    def build(cls, *args: Any, **kwargs: Any) -> Any:
        """graphql-core's ``build``: strawberry's own class when an event loop runs (an async execution)."""
        if _get_running_loop() is not None:
            return _strawberry_class().build(*args, **kwargs)
        return super().build(*args, **kwargs)


def run_with_ours(schema: Any) -> None:
    """Make *schema* (a ``strawberry.Schema``) execute with a class that waits for loader futures.

    Raises:
        TypeError: the schema's class is another, and no event loop runs (a synchronous execution).
    """
    cls = schema.execution_context_class
    if cls is AutoRelationsExecutionContext:
        return
    if cls is None or cls is _strawberry_class():
        schema.execution_context_class = AutoRelationsExecutionContext
    elif not (isinstance(cls, type) and issubclass(cls, DataLoaderExecutionContext)) and _get_running_loop() is None:
        raise TypeError(FOREIGN_CLASS.format(name=f"{cls.__module__}.{cls.__qualname__}"))

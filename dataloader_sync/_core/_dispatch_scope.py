"""The dispatch scope: how a GraphQL execution learns which loaders have work.

A *scope* is any object with a ``loader_queued(loader)`` method.  While a scope
is current (see :func:`using_scope`), a ``DataLoader.load``/``load_many`` that
queues a new key calls ``scope.loader_queued(loader)`` — after releasing the
loader's lock, on whatever thread made the load — unless a load in the same
scope already did so since the loader's queue was last taken: a scope hears
of a loader once per batch, not once per load.  ``then``
callbacks run with the scope that was current when ``then`` was called, so a
load chained on another load's result is reported to the same execution even
when the source future completes on an executor thread.

This is what lets ``DataLoaderExecutionContext`` batch loads without a
registry: it installs a scope for the duration of the execution and dispatches
the loaders it was told about when it has nothing else to do.

A scope (``DispatchScope``) also has a ``dispatches_itself`` flag: while it is true,
its owner will dispatch the loaders it was told of itself (an execution at
work on a level dispatches them when the level's resolvers are done), so a
ticker-mode registry's tick leaves a loader whose current queue that scope
was told of to it, instead of splitting the level into several batches.  An
explicit ``dispatch_all()`` does not look at it.

Guarantees:
- The scope lives in a ``contextvars.ContextVar``: threads and asyncio tasks
  each see their own; nothing is shared by accident between requests.
- A load made with no current scope costs one ``ContextVar.get``.
- A wait that dispatches a loader early (``result()`` on a key still queued,
  see ``_sync_on_demand``) tells the scope, so an execution can warn of resolvers
  that split a level into one batch per key.
"""
from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any, Optional, Protocol

__all__ = ["DispatchScope", "current_scope", "reset_scope", "set_scope", "using_scope"]


class DispatchScope(Protocol):
    """What a loader and a registry's tick know of a scope (a GraphQL execution's, see the module notes)."""

    #: True while its owner dispatches the loaders it was told of itself
    #: (an execution at work on a level): a tick leaves them to it.
    dispatches_itself: bool

    def loader_queued(self, loader: Any) -> None:
        """*loader* queued a key in this scope (once per batch); called outside every lock."""

    def dispatched_by_a_wait(self, loader: Any) -> None:
        """A thread blocked on a load of *loader* (``result()``) in this scope and dispatched it early.

        Called by ``_sync_on_demand`` outside every lock, only when such a wait sent a
        batch: never on the path of a load or of a dispatch the scope's owner makes.
        """


_current: contextvars.ContextVar[Optional[DispatchScope]] = contextvars.ContextVar(
    "dataloader_sync_dispatch_scope", default=None
)

#: Returns the current scope, or None.
current_scope = _current.get


@contextlib.contextmanager
def using_scope(scope: Optional[DispatchScope]) -> Iterator[Optional[DispatchScope]]:
    """Make *scope* current in this context until the block exits."""
    token = _current.set(scope)
    try:
        yield scope
    finally:
        _current.reset(token)


def set_scope(scope: Optional[DispatchScope]) -> contextvars.Token[Optional[DispatchScope]]:
    """Make *scope* current; pass the token to :func:`reset_scope` (fast path for callbacks)."""
    return _current.set(scope)


reset_scope = _current.reset

"""The levels of the running execution: which objects sit at the same depth as a given one.

A GraphQL execution (``dataloader_sync.graphql.DataLoaderExecutionContext``)
makes its ``LevelSource`` current for as long as it runs; an ORM integration
asks it, when one object needs a column or a relation it does not hold,
which other objects of the same *level* (the objects at one depth of the
execution, whichever relation or query loaded them) could have it read in
the same statement: ``dataloader_sync.django.FETCH_LEVEL`` is the reader.

This module is the seam between the two: it knows neither GraphQL nor an ORM.

Guarantees:
- The source lives in a ``contextvars.ContextVar``: each thread (and each
  asyncio task) sees its own, so the objects of one request's execution are
  never offered to another request.
- Outside an execution, ``current_levels()`` is None: a reader falls back to
  what it does without one.
- The variable holds a weak reference: a copy of the context that outlives
  the execution (a registry's tick, scheduled from a resolver, runs in one
  for as long as the registry lives) does not keep the execution, its
  context value or its registry alive, and sees no levels once the
  execution has ended.
"""
from __future__ import annotations

import contextvars
import weakref
from typing import Any, Callable, Optional, Protocol

__all__ = ["LevelSource", "current_levels", "reset_levels", "set_levels"]


class LevelSource(Protocol):
    """What a running execution tells of its levels (asked on its own thread)."""

    def peers_of(self, obj: Any) -> Optional[list[Any]]:
        """The objects of *obj*'s level that the execution holds (*obj* among them), or None.

        None when *obj* is not at a level the execution can see (not the
        object whose field is being resolved nor one of the objects waiting
        to be completed at that depth), or when asked from another thread.
        The list may hold objects of any class; the caller keeps those it can
        read together.
        """

    def find(self, match: Callable[[Any], bool]) -> Any:
        """An object the execution holds at the level being resolved now for which *match* is true, or None.

        What a reader asks when it knows a key but not the object (``Book.objects.filter(author=self)``
        names the author by its key only); the object found is then given to :meth:`peers_of`.
        *match* is called on each object held until one matches; None from another thread.
        """


_Ref = Optional["weakref.ReferenceType[LevelSource]"]

_current: contextvars.ContextVar[_Ref] = contextvars.ContextVar("dataloader_sync_execution_levels", default=None)


def current_levels() -> Optional[LevelSource]:
    """The running execution's ``LevelSource`` in this context, or None."""
    ref = _current.get()
    return None if ref is None else ref()


def set_levels(source: Optional[LevelSource]) -> contextvars.Token[_Ref]:
    """Make *source* current (weakly: see the module notes); pass the token to :func:`reset_levels` when the
    execution ends.  *source* must support weak references."""
    return _current.set(None if source is None else weakref.ref(source))


reset_levels = _current.reset

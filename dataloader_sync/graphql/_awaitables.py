"""Awaitables reaching a synchronous execution: recognised, closed, refused with one message.

``DataLoaderExecutionContext`` runs on the request thread without an event
loop, so an awaitable (the coroutine of an ``async def`` resolver,
``is_type_of`` or ``resolve_type``, an ``asyncio.Future``) can never complete
there.  graphql-core asks ``is_awaitable(value)`` of every resolver's value,
every list item, every ``is_type_of`` and ``resolve_type`` result, inside the
``try`` that turns a field's exception into a located field error.  The
execution installs :func:`refuse_awaitable` as that predicate: it answers
False for everything else and *raises* for an awaitable, after closing it, so
the field fails with :data:`MESSAGE` at its own path, wherever the awaitable
came from (a root field, a mutation field, an object completed from a loader
future, the default type resolver) and no coroutine is left un-awaited.

The predicate graphql-core or the caller installed (``is_awaitable=``,
graphene's ``assume_not_awaitable``, strawberry's ``optimized_is_awaitable``) is
replaced, not consulted: in a synchronous execution the only right answer
for an awaitable is a clear error.

Guarantees:
- One dict lookup per value for types already seen (the answer depends on the
  type only, except for generator objects, checked per object as
  graphql-core does); the table is bounded (cleared past ``_MAX_TYPES``).
- ``promise.Promise`` (graphene-django wraps thenables in it) is not refused:
  it has ``__await__`` but the execution settles it synchronously
  (``_promises``).
- Thread-safe: the table is only read and item-assigned (atomic under the
  GIL); a race at worst computes one type's answer twice.
"""
from __future__ import annotations

import inspect
from types import CoroutineType, GeneratorType
from typing import Any, Dict

from ._promises import PromiseType

__all__ = ["MESSAGE", "AwaitableNotSupportedError", "refuse_awaitable"]

MESSAGE = (
    "DataLoaderExecutionContext executes synchronously: resolvers, is_type_of and resolve_type"
    " must return values or concurrent.futures.Future, not awaitables (async def, asyncio)."
)

_CO_ITERABLE_COROUTINE = inspect.CO_ITERABLE_COROUTINE
_MAX_TYPES = 4096
_GENERATOR = 2  # the answer depends on the generator object's code flags

# type -> False (never awaitable), True (always), _GENERATOR (check the object)
_by_type: Dict[type, Any] = {}


class AwaitableNotSupportedError(TypeError):
    """An awaitable reached ``DataLoaderExecutionContext``; its field fails with this."""


def _classify(cls: type) -> Any:
    if cls is PromiseType:
        return False
    if cls is GeneratorType:
        return _GENERATOR
    return cls is CoroutineType or hasattr(cls, "__await__")


def _discard(value: Any) -> None:
    """Close a coroutine (or generator-based one) so Python does not warn it was never awaited."""
    close = getattr(value, "close", None) if isinstance(value, (CoroutineType, GeneratorType)) else None
    if close is not None:
        try:
            close()
        except Exception:  # noqa: BLE001 - closing is best effort; the refusal is what matters
            pass


def refuse_awaitable(value: Any) -> bool:
    """graphql-core's ``is_awaitable`` for a synchronous execution.

    Args:
        value: a resolver's value, a list item, an ``is_type_of`` or
            ``resolve_type`` result.

    Returns:
        False: the value is not awaitable, complete it synchronously.

    Raises:
        AwaitableNotSupportedError: the value is awaitable (it was closed first
            when it is a coroutine); graphql-core makes it the field's error.
    """
    cls = value.__class__
    kind = _by_type.get(cls)
    if kind is None:
        if len(_by_type) >= _MAX_TYPES:
            _by_type.clear()
        kind = _by_type[cls] = _classify(cls)
    if kind is False:
        return False
    if kind is _GENERATOR and not value.gi_code.co_flags & _CO_ITERABLE_COROUTINE:
        return False
    _discard(value)
    raise AwaitableNotSupportedError(MESSAGE)

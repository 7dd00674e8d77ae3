"""Awaitables reaching a synchronous execution: recognised, closed, refused with one message.

``DataLoaderExecutionContext`` runs on the request thread without an event
loop, so an awaitable (the coroutine of an ``async def`` resolver,
``is_type_of`` or ``resolve_type``, an ``asyncio.Future``) can never complete
there, nor can an async generator be iterated.  Every value graphql-core completes passes through the execution's
``complete_value``, which asks :func:`is_plain` of it (one dict look-up by
type) and, for a type not known to be plain, calls :func:`refuse_awaitable`:
it closes a coroutine and raises :class:`AwaitableNotSupportedError`
(:data:`MESSAGE`) inside graphql-core's ``try``, so the field fails at its own
path wherever the awaitable came from (a root or mutation field, an object
completed from a loader future, a list item).  ``is_type_of`` and
``resolve_type`` results are checked where the execution receives them, and
graphql-core's default type resolver gets :func:`refuse_awaitable` as
``info.is_awaitable`` (:func:`refusing_type_resolver`).

graphql-core's own ``is_awaitable`` hook is set to :data:`NEVER_AWAITABLE`
(a C-level "always False"): it is asked several times per field, and the one
check per value above replaces it.  The predicate the caller passed
(``is_awaitable=``, graphene's ``assume_not_awaitable``, strawberry's
``optimized_is_awaitable``) is not consulted: in a synchronous execution the
only right answer for an awaitable is a clear error.

Guarantees:
- One dict look-up per completed value; the answer depends on the type only,
  except for generator objects, checked per object as graphql-core does. The
  table is bounded (cleared past ``_MAX_TYPES``).
- ``promise.Promise`` (graphene-django wraps thenables in it) is not refused:
  it has ``__await__`` but the execution settles it synchronously
  (``_promises``).
- Thread-safe: the table is only read and item-assigned (atomic under the
  GIL); a race at worst computes one type's answer twice.
"""
from __future__ import annotations

import importlib.util
import inspect
from types import AsyncGeneratorType, CoroutineType, GeneratorType
from typing import Any, Callable, Optional

from .._core import Future, following, settle, start_driving, stop_driving
from ._promises import PromiseType

__all__ = [
    "KNOWN_TYPE",
    "MESSAGE",
    "NEVER_AWAITABLE",
    "AwaitableNotSupportedError",
    "drivable",
    "drive",
    "is_plain",
    "refuse_awaitable",
    "refusing_type_resolver",
]

MESSAGE = (
    "DataLoaderExecutionContext executes synchronously: resolvers, is_type_of and resolve_type"
    " must return values or concurrent.futures.Future, not awaitables or async generators"
    " (async def, asyncio)."
)

_CO_ITERABLE_COROUTINE = inspect.CO_ITERABLE_COROUTINE
_MAX_TYPES = 4096
_GENERATOR = 2  # the answer depends on the generator object's code flags
_PROMISE = 3  # promise.Promise: not awaited, not plain either (the execution settles it)

# type -> False (never awaitable), True (always), _GENERATOR (check the object)
_by_type: dict[type, Any] = {}

#: ``is_awaitable`` for graphql-core: always False, at C speed (an empty tuple contains nothing).
NEVER_AWAITABLE: Callable[[Any], bool] = ().__contains__


#: ``KNOWN_TYPE(cls) is False`` is ``is_plain(cls)``, without a Python call (hot loops).
KNOWN_TYPE: Callable[[type], Any] = _by_type.get


def is_plain(cls: type, _known: Any = _by_type.get) -> bool:
    """True when values of *cls* are known not to be awaitable (the hot path: one look-up)."""
    return _known(cls) is False


class AwaitableNotSupportedError(TypeError):
    """An awaitable reached ``DataLoaderExecutionContext``; its field fails with this."""


def _classify(cls: type) -> Any:
    if cls is PromiseType:
        return _PROMISE
    if issubclass(cls, Future):  # awaitable on a loop, but the execution waits for it as a Future
        return False
    if cls is GeneratorType:
        return _GENERATOR
    # An async generator (an ``async def`` with ``yield``, returned for a list
    # field) is no awaitable, but no iterable either: only a loop consumes it.
    return cls is CoroutineType or cls is AsyncGeneratorType or hasattr(cls, "__await__")


def _discard(value: Any) -> None:
    """Close a coroutine (or generator-based one) so Python does not warn it was never awaited."""
    close = getattr(value, "close", None) if isinstance(value, (CoroutineType, GeneratorType)) else None
    if close is not None:
        try:
            close()
        except Exception:
            pass


def refuse_awaitable(value: Any, _known: Any = _by_type.get) -> bool:
    """Refuse *value* if it is awaitable; also usable as an ``is_awaitable`` predicate.

    Args:
        value: a resolver's value, a list item, an ``is_type_of`` or
            ``resolve_type`` result.

    Returns:
        False: the value is not awaitable, complete it synchronously.

    Raises:
        AwaitableNotSupportedError: the value is awaitable (it was closed first
            when it is a coroutine); graphql-core makes it the field's error.
    """
    if _known(type(value)) is False:  # the hot path: a type seen before, never awaitable (type(): see _refuse_slow)
        return False
    return _refuse_slow(value)


def _refuse_slow(value: Any) -> bool:
    # type(value), not value.__class__: a loader future's __class__ is a property (its guard against
    # executions that take it for data, _core._future), a Python call on every read.
    cls = type(value)
    kind = _by_type.get(cls)
    if kind is None:
        if len(_by_type) >= _MAX_TYPES:
            _by_type.clear()
        kind = _by_type[cls] = _classify(cls)
    if kind is False or kind is _PROMISE:
        return False
    if kind is _GENERATOR and not value.gi_code.co_flags & _CO_ITERABLE_COROUTINE:
        return False
    _discard(value)
    raise AwaitableNotSupportedError(MESSAGE)


def _wrapper_codes() -> Optional[frozenset[Any]]:
    """The code of each framework coroutine known to wrap a resolver's value and only await it.

    strawberry-django's fields (``StrawberryDjangoField.get_result``, its
    connection extension's ``resolve``) wrap a value that ``inspect.isawaitable``
    calls awaitable (a loader future is, by its class) in an ``async_resolver``
    that awaits it and completes it as the synchronous path would.  Where no
    loop runs, the execution steps such a coroutine itself (``drive``): the
    field completes as it did when futures were not awaitable.

    Returns:
        The codes; None when strawberry-django cannot be imported yet (Django
        not configured): nothing of it can reach an execution before it can.
    """
    if importlib.util.find_spec("strawberry_django") is None:
        return frozenset()
    try:
        from strawberry_django.fields import field as module
    except Exception:
        return None
    codes = set()
    for cls in vars(module).values():
        if isinstance(cls, type) and cls.__module__ == module.__name__:
            for fn in vars(cls).values():
                for const in getattr(getattr(fn, "__code__", None), "co_consts", ()):
                    if getattr(const, "co_name", None) == "async_resolver":
                        codes.add(const)
    return frozenset(codes)


_WRAPPERS: list[frozenset[Any]] = []  # [codes], found on first need (importing strawberry-django needs Django set up)


def drivable(value: Any) -> bool:
    """True if *value* is a framework's coroutine that only awaits the value it wraps (``_wrapper_codes``)."""
    if value.__class__ is not CoroutineType or inspect.getcoroutinestate(value) != inspect.CORO_CREATED:
        return False  # not a coroutine, or not a new one (cr_suspended is 3.11's: getcoroutinestate on 3.9 too)
    if not _WRAPPERS:
        codes = _wrapper_codes()
        if codes is None:  # not importable yet: ask again next time
            return False
        _WRAPPERS.append(codes)
    return value.cr_code in _WRAPPERS[0]


def drive(coro: Any) -> Any:
    """Step *coro* (``drivable``) with no loop: its value, or a ``Future`` of it.

    Each step runs under ``_asyncio_bridge.start_driving``, so an ``await`` of a
    pending dataloader_sync future yields that future here; the coroutine is
    resumed, in the context of this call, once it is done (its outcome then
    read inside the coroutine).  Anything else awaited closes it and fails the
    field (``MESSAGE``).

    Raises:
        AwaitableNotSupportedError: the coroutine awaited something else.
        Exception: the coroutine's own error.
    """
    token = start_driving()
    try:
        yielded = coro.send(None)
    except StopIteration as stop:
        return stop.value
    finally:
        stop_driving(token)
    if not isinstance(yielded, Future):
        _discard(coro)
        raise AwaitableNotSupportedError(MESSAGE)
    ready: Future[Any] = following(yielded)  # a thread blocking on the field's future drives the awaited load
    yielded.add_done_callback(lambda _done: settle(ready, None, None))
    return ready.then(lambda _none: drive(coro))


def refusing_type_resolver(type_resolver: Callable[..., Any]) -> Callable[..., Any]:
    """*type_resolver* (graphql-core's default one, typically) seeing :func:`refuse_awaitable` as
    ``info.is_awaitable``, so an async ``is_type_of`` it calls fails the field instead of
    counting as true.

    Args:
        type_resolver: ``(value, info, abstract_type) -> type name``.

    Returns:
        The wrapped resolver.
    """

    def resolve(value: Any, info: Any, abstract_type: Any) -> Any:
        replace = getattr(info, "_replace", None)
        if replace is not None:
            info = replace(is_awaitable=refuse_awaitable)
        return type_resolver(value, info, abstract_type)

    return resolve

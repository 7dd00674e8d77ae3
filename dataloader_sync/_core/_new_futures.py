"""Futures made ready to hand out: a loader's pending future, a completed or failed one, a copied outcome.

The loader's future (``loader_future``) is made without ``Future.__init__``:
its stores are ``__init__``'s, in its order (instances share their
attribute layout), but its lock is the loader's (the lock protocol's
*sharing* state, see ``_future_lock``) — one of the copies for speed that
``_future``'s docstring lists, with its plain twin in ``_reference_path``.  It is a ``LoaderFuture``, a ``Future``
whose class call runs no ``__init__`` at all: a plain class call allocates
it at less cost than ``object.__new__(Future)`` (a call through the
generic ``__new__`` wrapper), and every load that queues makes one.
"""
from __future__ import annotations

import concurrent.futures as cf
from typing import TYPE_CHECKING, Any, TypeVar

from ._compat import FINISHED, PENDING
from ._future import Future, settle

__all__ = ["LoaderFuture", "completed_future", "copy_outcome", "failed_future", "following", "loader_future"]

T = TypeVar("T")


class LoaderFuture(Future[Any]):
    """A loader's future: a ``Future`` in every respect, made by ``loader_future`` (or its inline copy in ``load()``).

    Its class call runs no ``__init__`` (``object.__init__``): whoever makes
    one does ``loader_future``'s stores right after.
    """

    if TYPE_CHECKING:
        def __init__(self) -> None: ...
    else:
        __init__ = object.__init__  # the class call allocates, and runs nothing


def following(source: Future[Any]) -> Future[T]:
    """A new pending ``Future`` that follows *source* (``Drivable._follow``, see ``_sync_on_demand``):
    a thread blocking on it drives the loads *source* waits on. Whoever makes it settles it."""
    out: Future[T] = Future()
    out._follow = source
    return out


def copy_outcome(src: cf.Future[Any], dst: Future[Any]) -> None:
    """Complete *dst*, which followed the done *src*, with *src*'s outcome (a cancellation as a CancelledError)."""
    try:
        value = src.result()
    except BaseException as exc:  # CancelledError included
        settle(dst, None, exc)
    else:
        settle(dst, value, None)


def loader_future(lock: Any) -> Future[Any]:
    """A new pending future sharing *lock*, its loader's (``Future.__init__``'s stores, without a lock of its own)."""
    fut: Future[Any] = LoaderFuture()
    fut._lock = lock
    fut._state = PENDING
    fut._result = None
    fut._exception = None
    fut._done_callbacks = None
    fut._cond = None
    fut._waiter_list = None
    fut._follow = None
    fut._shared = lock
    return fut


def completed_future(value: T) -> Future[T]:
    """Return a future already holding *value*."""
    fut: Future[T] = Future()
    fut._result = value
    fut._state = FINISHED
    return fut


def failed_future(exc: BaseException) -> Future[Any]:
    """Return a future already failed with *exc*.

    Raises:
        TypeError: *exc* is not an exception instance (a class is not one).
    """
    if not isinstance(exc, BaseException):
        raise TypeError(f"exc must be an exception instance, got {type(exc).__name__}")
    fut: Future[Any] = Future()
    fut._exception = exc
    fut._state = FINISHED
    return fut

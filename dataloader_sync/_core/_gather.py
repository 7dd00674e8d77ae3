"""``gather``: one future of the list of many futures' results.

It is built on ``Future`` (``_future``) and is the only thing here.

Guarantees:
- The list keeps the order of the futures given; a future listed twice
  gets one done-callback and fills every place it holds.
- The gather fails with the first error in completion order (a cancelled
  future as ``CancelledError``) unless ``return_exceptions`` is true.
- It holds its futures only while it is pending, for blocked drivers (sync
  on demand, see ``_sync_on_demand``: blocking on a gather dispatches the loaders of
  the loads it waits on); it lets go of them once done.
"""
from __future__ import annotations

import concurrent.futures as cf
import threading
from collections.abc import Iterable
from typing import Any, Literal, Optional, TypeVar, Union, overload

from ._future import Future, settle
from ._new_futures import completed_future
from ._types import ResultOf

__all__ = ["gather"]

T = TypeVar("T")

_Lock = threading.Lock


class _Gather:
    """Collects the outcomes of futures into one list future, in order.

    One bound method serves every future (no closure per future), and a
    future listed twice gets one callback: ``positions`` maps ``id(future)``
    to its index, or to a list of indexes.  Ids are stable and unique here:
    every future of the gather is alive when the gather is built, and each
    is alive when its callback runs.
    """

    __slots__ = ("futures", "left", "lock", "out", "positions", "return_exceptions", "values")

    def __init__(self, futures: list[cf.Future[Any]], return_exceptions: bool) -> None:
        self.out: Future[list[Any]] = Future()
        self.values: list[Any] = [None] * len(futures)
        positions: dict[int, Any] = {}
        for i, fut in enumerate(futures):
            key = id(fut)
            where = positions.get(key)
            if where is None:
                positions[key] = i
            elif isinstance(where, list):
                where.append(i)
            else:
                positions[key] = [where, i]
        self.positions = positions
        self.left = len(positions)  # distinct futures not yet done; guarded by lock
        self.lock = _Lock()  # guards left and the decision to complete out
        self.return_exceptions = return_exceptions
        self.futures: Optional[list[cf.Future[Any]]] = None  # the distinct futures, while out is pending

    def done(self, fut: cf.Future[Any]) -> None:
        if fut.cancelled():
            exc: Optional[BaseException] = cf.CancelledError()
        else:
            exc = fut.exception()
        if exc is not None and not self.return_exceptions:
            with self.lock:
                first = self.left > 0
                self.left = 0
            if first:
                self.futures = None
                settle(self.out, None, exc)
            return
        value = exc if exc is not None else fut.result()
        where = self.positions[id(fut)]
        if isinstance(where, list):
            for i in where:
                self.values[i] = value
        else:
            self.values[where] = value
        with self.lock:
            self.left -= 1
            last = self.left == 0
        if last:
            self.futures = None
            settle(self.out, self.values, None)


@overload
def gather(futures: Iterable[ResultOf[T]], *, return_exceptions: Literal[False] = False) -> Future[list[T]]: ...


@overload
def gather(futures: Iterable[ResultOf[T]], *, return_exceptions: bool) -> Future[list[Union[T, BaseException]]]: ...


@overload
def gather(futures: Iterable[Any], *, return_exceptions: bool = False) -> Future[list[Any]]: ...


def gather(futures: Iterable[Any], *, return_exceptions: bool = False) -> Future[list[Any]]:
    """Return a future of the list of results of *futures*, in order.

    It fails with the first error (in completion order) unless
    ``return_exceptions`` is true; then the list holds the exception instances.
    Typed as a future of a list of the futures' common result type (the last
    overload takes what a type checker cannot join, e.g. mypy with futures of
    different types).

    Raises:
        TypeError: an item is not a ``concurrent.futures.Future``;
            ``return_exceptions`` is not a bool.
    """
    if not isinstance(return_exceptions, bool):  # "no" would be truthy
        raise TypeError("return_exceptions must be a bool")
    futures = list(futures)
    if not futures:
        return completed_future([])
    g = _Gather(futures, return_exceptions)
    distinct = list({id(f): f for f in futures}.values())  # each distinct future once
    g.out._follow = g  # Drivable._follow (_sync_on_demand's seam): blocking on the gather drives its futures
    g.futures = distinct  # for blocked drivers; dropped when the gather completes
    done = g.done
    try:
        for fut in distinct:
            fut.add_done_callback(done)
    except AttributeError:
        # Checked here rather than up front: the check costs nothing on the
        # path of every load_many.  Callbacks already added to the futures
        # before the bad item only fill the abandoned gather.
        for fut in distinct:
            if not callable(getattr(fut, "add_done_callback", None)):
                raise TypeError(
                    f"futures must be concurrent.futures.Future objects, got {type(fut).__name__}"
                ) from None
        raise
    return g.out


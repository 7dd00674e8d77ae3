"""A future's lock: its own, or its loader's, shared until it needs a Condition (the lock protocol).

A loader's futures share their loader's ``RLock`` (``_new_futures.loader_future``;
a ``then()`` future shares its source's): no lock object per load (a lock is
one more object for the cyclic GC to walk), and a batch settles under one
acquisition (``settle_many``).  A future *detaches* from the shared lock,
taking one of its own, when it first gets a Condition (``own_lock``):
``concurrent.futures.wait`` and ``as_completed`` hold the ``_condition`` of
every future they are given at once, acquired one after another; on shared
locks, two threads waiting on futures of two loaders given in opposite orders
would take the two loaders' locks in either order (a deadlock).

The lock protocol (who may move a future's ``_lock``, and when; ``Future``
in ``_future`` holds the fields, this module every step that moves them):

  ============  ==========================  ====================================
  state         ``_lock``                   made by / moved by, under
  ============  ==========================  ====================================
  own           a ``Lock`` of its own       ``Future()``; never moves (fork
                (``_shared`` is None)       repair rebuilds it in a child:
                                            ``renew_lock_in_child``)
  sharing       ``_shared``, the loader's   ``loader_future``, ``then()`` of a
                ``RLock``                   loader's future; ``own_lock`` (the
                                            first Condition), holding
                                            ``_shared``: -> detached
  detached      a ``Lock`` of its own       never moves again
                (``_shared`` is not None)
  ============  ==========================  ====================================

  Invariants (asserted in ``own_lock``): sharing => ``_cond is None``;
  ``_cond is not None`` => ``_cond`` is over ``_lock`` (the final one).  A
  future's ``_lock`` changes at most once, while the old lock is held, so
  whoever acquires it checks it is still the future's (``acquire``);
  ``settle_many`` holds the loader's lock, so a future it finds sharing cannot
  detach under it.  A loader's lock is repaired in a forked child by its
  loader (``_loader_fork``), in place: its futures keep sharing it.

Duplicated for speed (``_future``'s policy): ``settle_many`` has
``Future._settle``'s steps inline, for a batch under one acquisition; its plain
twin is ``_reference_path.settle_many`` (``tests/test_reference_path.py``
checks that both do the same).
"""
from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Optional, Protocol

from . import _asyncio_bridge as _bridge
from ._compat import FINISHED, PENDING, RUNNING

__all__ = ["Locked", "Settleable", "acquire", "own_lock", "renew_lock_in_child", "settle_many"]

_Lock = threading.Lock


class Locked(Protocol):
    """What the lock protocol reads and writes of a future (``_future.Future``'s fields).

    ``_lock`` guards the future's state; ``_shared`` is the loader's lock it
    was made to share, or None (it never changes: a ``then()`` reads it
    without a lock); ``_cond`` (a Condition over ``_lock``) and
    ``_waiter_list`` exist once a thread waits.
    """

    _lock: Any
    _shared: Any
    _cond: Optional[threading.Condition]
    _waiter_list: Optional[list[Any]]


class Settleable(Locked, Protocol):
    """What ``settle_many`` reads and writes of a future: ``Locked``, its outcome and its completion steps."""

    _state: Any
    _result: Any
    _exception: Any
    _follow: Any
    _drivers: Any
    _done_callbacks: Any

    def _finish_locked(self, state: str) -> None: ...

    def _settle(self, result: Any, exception: Optional[BaseException]) -> bool: ...

    def _invoke_callbacks(self) -> None: ...


def acquire(fut: Locked) -> Any:
    """Acquire *fut*'s lock (the current one: it may detach meanwhile) and return it.

    ``Future._acquire`` is this function (a method, at no extra call).
    """
    lock = fut._lock
    lock.acquire()
    while lock is not fut._lock:  # it detached meanwhile
        lock.release()
        lock = fut._lock
        lock.acquire()
    return lock


def own_lock(fut: Locked) -> Any:
    """Make sure *fut*'s ``_cond`` exists, over a lock that is *fut*'s alone; return that lock, held.

    The protocol's only transition: a future sharing its loader's lock
    detaches from it here; any other keeps its lock.  ``Future._own_lock`` is
    this function.
    """
    lock = acquire(fut)
    assert lock is not fut._shared or fut._cond is None, "sharing => no Condition"
    assert fut._cond is None or fut._cond._lock is lock, "a Condition is over the final lock"  # type: ignore[attr-defined]
    if fut._cond is None and lock is not fut._shared:
        fut._cond = threading.Condition(lock)
    elif fut._cond is None:
        own = _Lock()
        own.acquire()
        fut._lock = own
        fut._cond = threading.Condition(own)
        lock.release()  # threads waiting for the old lock find it is not this future's any more
        lock = own
    return lock


def renew_lock_in_child(fut: Locked) -> None:
    """Fork repair of a future's own lock, in a forked child (a periodic task's future, re-armed there).

    Its lock may have been held by a parent thread at the fork, and its
    waiters are the parent's threads: both are rebuilt (its own lock, no
    Condition, no waiters).

    Raises:
        AssertionError: *fut* is a loader's (its loader repairs the lock it shares).
    """
    assert fut._shared is None, "a loader's future is repaired by its loader"
    fut._lock, fut._cond, fut._waiter_list = _Lock(), None, None


def settle_many(lock: Any, futures: Sequence[Settleable], values: list[Any]) -> None:
    """Settle each future with its value (an exception instance fails it), as ``Future._settle`` does.

    Once a future was awaited in this process, the event loops waiting on
    these futures are woken once, at the end (``_asyncio_bridge.hold``), not
    once per future.
    """
    if not _bridge.awaited:
        _settle_many(lock, futures, values)
        return
    token = _bridge.hold()
    try:
        _settle_many(lock, futures, values)
    finally:
        _bridge.release(token)


def _settle_many(lock: Any, futures: Sequence[Settleable], values: list[Any]) -> None:
    """``settle_many``'s steps.

    The futures guarded by *lock* (their loader's) are settled under one
    acquisition of it, with ``_settle``'s steps inline (a copy for speed: see
    the module notes); any other (one that detached) by ``_settle``.  Every
    future is settled before any done-callback runs; a callback's
    ``BaseException`` that is not an ``Exception`` propagates once all the
    callbacks ran (see ``Future._invoke_callbacks``).
    """
    called = []
    apart = None
    lock.acquire()
    try:
        for fut, value in zip(futures, values):
            if fut._lock is not lock:  # detached (it cannot while we hold lock)
                if apart is None:
                    apart = []
                apart.append((fut, value))
                continue
            state = fut._state
            if state is not PENDING and state is not RUNNING:
                continue
            if isinstance(value, BaseException):
                fut._result = None
                fut._exception = value
            else:
                fut._result = value
                fut._exception = None
            if fut._follow is not None:
                fut._follow = fut._drivers = None
            if fut._cond is None and not fut._waiter_list:
                fut._state = FINISHED
            else:
                fut._finish_locked(FINISHED)
            if fut._done_callbacks is not None:
                called.append(fut)
    finally:
        lock.release()
    escaped: Optional[BaseException] = None
    for fut, value in apart or ():
        try:
            if isinstance(value, BaseException):
                fut._settle(None, value)
            else:
                fut._settle(value, None)
        except BaseException as exc:
            if escaped is None:
                escaped = exc
    for fut in called:
        try:
            fut._invoke_callbacks()
        except BaseException as exc:
            if escaped is None:
                escaped = exc
    if escaped is not None:
        raise escaped

"""Sync on demand: blocking on a load nobody dispatched dispatches what that load needs.

``DataLoader(fn).load(5).result()`` outside any registry or GraphQL execution
would otherwise wait forever (java-dataloader's ``load().join()`` before
``dispatch()`` has this trap).  Here a thread that blocks on a future
(``result()``, ``exception()``, ``concurrent.futures.wait``/``as_completed``)
*drives* it: it follows what the future waits on — a ``then`` future's source,
then the future its function returned; a ``gather``'s futures; a primed
future's source — down to the loader futures at the leaves, and dispatches the
loader of each leaf whose key is still queued (one batch with every key queued
on that loader, as ``dispatch()`` would).  Then it waits for *its* future only,
re-driving whenever a chain it follows moves on to a new future (a ``then``
function returned a load of another loader).

How "still queued" is O(1): a loader holds a current ``Ticket`` (a weak
reference to the loader and nothing else) and stamps it on each future it
queues; swapping the queue out (any dispatch) replaces the ticket.  A future's
key is still queued iff its ticket is still its loader's current one.  No scan
of the pending keys (graphql-ruby's ``Dataloader::Source#sync`` scanned them
and grew quadratic), no reference
from a future to its loader (no cycle loader -> cache -> future -> loader).

Guarantees:
- Only the loaders the blocked future needs are dispatched, each when the
  chain reaches it; other loaders and other keys are left to their own
  dispatch (a registry, the GraphQL execution, a tick).
- Dispatches happen on the blocked thread, outside every lock (a future's,
  a loader's, a blocker's): batch functions and callbacks run as they would
  in ``dispatch()`` called from that thread.
- Any thread may drive any future; two threads driving the same loader
  dispatch it once (the ticket check and the queue swap are one step under
  the loader's lock); a dispatch that another thread (a tick) got to first
  is simply waited for.
- A blocked thread is woken by its future's completion (through the
  future's waiter list, as ``concurrent.futures.wait``) or by a move of a
  chain it follows (``Future._drivers``), never by polling.
"""
from __future__ import annotations

import concurrent.futures as cf
import threading
import time
from typing import Any, Callable, Optional, Protocol

from . import _fork
from ._dispatch_scope import current_scope

__all__ = ["Blocker", "Drivable", "Ticket", "TicketLoader", "drive_and_wait", "orphaned_error", "unwatch",
           "waiters_for", "watch"]

_monotonic = time.monotonic


class Ticket:
    """One queue of one loader: the mark a loader stamps on the futures it queues.

    Attributes:
        loader: a ``weakref.ref`` to the loader (one per loader, shared by
            its tickets).
    """

    __slots__ = ("loader", "taken_in")

    def __init__(self, loader: Callable[[], Optional[TicketLoader]]) -> None:
        self.loader = loader
        # The process generation (_fork.generation) in which the loader took
        # this ticket's queue (None while it is the current one): a pending
        # future whose queue a parent process took is a batch of the parent's,
        # which no thread of a forked child runs (see _loader_fork.abandon).
        self.taken_in: Optional[int] = None


class TicketLoader(Protocol):
    """The seam between this module (and ``_future``) and the loader of a queued key: ``DataLoader`` implements it.

    Called on the thread that blocks on (or cancels) a future, outside every
    lock; each method takes the loader's lock itself, and runs user code (a
    batch function, through a dispatch) only after releasing it, but for the
    ``cache_map``'s own methods (the loader's one documented exception).
    """

    def _dispatch_for(self, ticket: Ticket) -> bool:
        """Dispatch if the keys stamped with *ticket* are still queued; True if it did."""

    def _abandoned_at_fork(self, fut: Any) -> bool:
        """A forked child blocks on *fut*, a key its parent dispatched: fail and evict it; True."""

    def _forget_cancelled(self, fut: Any, ticket: Ticket) -> None:
        """*fut* (stamped with *ticket*) was cancelled: take its key out of the queue and the cache."""


class Drivable(Protocol):
    """The seam between this module and ``_future.Future``: what a driver reads and writes of a future.

    The fields are the future's (see its comments, and _future_lock for its lock protocol);
    ``_acquire`` returns its current lock, held, under which ``_drivers``,
    ``_follow`` and ``_waiter_list`` are read and changed.  What a chain
    follows may also be a plain ``concurrent.futures.Future`` (an
    executor's): ``_drive`` reads these fields of such a node with
    ``getattr`` and waits on it without driving it.
    """

    _ticket: Any  # Optional[Ticket]
    _follow: Any
    _drivers: Optional[list[Any]]
    _waiter_list: Optional[list[Any]]

    def done(self) -> bool: ...

    def _acquire(self) -> Any: ...

    def _settle(self, result: Any, exception: Optional[BaseException]) -> bool: ...

    @property
    def _waiters(self) -> list[Any]: ...


def _drive(fut: Drivable, blocker: Any, stages: Optional[list[Drivable]]) -> bool:
    """Dispatch the loaders *fut* waits on whose keys are still queued; True if any was.

    With a *blocker*, register it on every chain future passed (appended to
    *stages*), so it is woken when one of them moves on.
    """
    node: Any = fut  # along the chain: a Drivable, or a plain concurrent.futures.Future
    while not node.done():
        ticket: Optional[Ticket] = getattr(node, "_ticket", None)
        if ticket is not None:  # a loader future: the leaf
            loader = ticket.loader()
            if loader is None:  # nothing is left to dispatch the key: fail it, do not hang
                return bool(node._settle(None, orphaned_error()))
            taken_in = ticket.taken_in
            if taken_in is not None and taken_in != _fork.generation:
                return loader._abandoned_at_fork(node)
            if not loader._dispatch_for(ticket):
                return False
            scope = current_scope()
            if scope is not None:  # a resolver blocked on a load its execution would have batched
                scope.dispatched_by_a_wait(loader)
            return True
        if getattr(node, "_follow", None) is None:
            return False  # a future nothing can drive (an executor's): just wait
        follow = node._follow if blocker is None else _watch(node, blocker, stages)
        if follow is None:
            return False
        if isinstance(follow, cf.Future):
            node = follow
            continue
        futures = follow.futures  # a gather's
        progressed = False
        for one in futures or ():
            if _drive(one, blocker, stages):
                progressed = True
        return progressed
    return False


def orphaned_error() -> RuntimeError:
    """The error of a load whose loader was garbage-collected before it dispatched the key.

    A queued future holds only a weak reference to its loader (a strong one
    would make the loader, its queue and its futures a cycle that only the
    cyclic GC frees, for every loader dropped with keys queued); once the
    loader is gone nothing can ever dispatch the key, so the thread that
    blocks on it gets this error instead of waiting forever.
    """
    return RuntimeError("the DataLoader of this load was garbage-collected before it dispatched the key; "
                        "keep a reference to the loader until its loads complete")


def _watch(node: Drivable, blocker: Any, stages: Optional[list[Drivable]]) -> Any:
    """Register *blocker* for moves of *node*; return what *node* follows now (one step under its lock)."""
    lock = node._acquire()  # the future's current lock (see Future)
    try:
        demand = node._drivers
        if demand is None:
            demand = node._drivers = []
        if blocker not in demand:
            demand.append(blocker)
            if stages is not None:
                stages.append(node)
        return node._follow
    finally:
        lock.release()


def _unwatch(stages: list[Drivable], blocker: Any) -> None:
    for node in stages:
        lock = node._acquire()  # the future's current lock (see Future)
        try:
            demand = node._drivers
            if demand is not None and blocker in demand:
                demand.remove(blocker)
        finally:
            lock.release()


#: What a waiter on an event loop (``_asyncio_bridge``) uses to follow a chain as a blocked thread does.
watch = _watch
unwatch = _unwatch


class Blocker:
    """A thread blocked on a future: woken when it completes or a chain it follows moves.

    It sits in the future's waiter list (``_waiter_list``), so it speaks the protocol
    of ``concurrent.futures``' waiters (``add_result``, ``add_exception``,
    ``add_cancelled``), and in the ``_drivers`` list of each chain future.
    Thread-safe; ``_cond`` guards ``_woken``.
    """

    __slots__ = ("_cond", "_woken")

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._woken = False

    def wake(self, _future: Any = None) -> None:
        with self._cond:
            self._woken = True
            self._cond.notify_all()

    add_result = add_exception = add_cancelled = moved = wake

    def clear(self) -> None:
        with self._cond:
            self._woken = False

    def wait(self, timeout: Optional[float]) -> None:
        with self._cond:
            if not self._woken:
                self._cond.wait(timeout)


def drive_and_wait(fut: Drivable, timeout: Optional[float]) -> None:
    """Drive *fut* (see the module notes) and wait until it is done or *timeout* seconds passed.

    Returns without raising either way: the caller reads the outcome (and
    raises ``TimeoutError`` if it is not done).
    """
    end = None if timeout is None else _monotonic() + timeout
    # The common case: one dispatch on this thread (an inline batch function)
    # completes the future; no blocker is built.
    while _drive(fut, None, None):
        if fut.done():
            return
    if fut.done():
        return
    blocker = Blocker()
    stages: list[Drivable] = []
    lock = fut._acquire()  # the future's current lock (see Future)
    try:
        if fut.done():
            return
        list.append(fut._waiters, blocker)
    finally:
        lock.release()
    try:
        while True:
            blocker.clear()  # before looking: a wake from now on is not lost
            if fut.done():
                return
            if _drive(fut, blocker, stages):
                continue
            if end is None:
                blocker.wait(None)
            else:
                remaining = end - _monotonic()
                if remaining <= 0:
                    return
                blocker.wait(remaining)
    finally:
        lock = fut._acquire()  # the future's current lock (see Future)
        try:
            waiters = fut._waiter_list
            if waiters is not None and blocker in waiters:
                waiters.remove(blocker)
        finally:
            lock.release()
        _unwatch(stages, blocker)


class _DrivingEvent:
    """Replaces the ``event`` of a ``concurrent.futures`` waiter installed on drivable futures.

    ``concurrent.futures.wait``/``as_completed`` install their waiter while
    holding every future's lock, then call ``waiter.event.wait(timeout)`` with
    no lock held: that wait drives the futures first, then waits as the
    standard event would (``set``/``clear``/``is_set`` behave the same).
    ``_cond`` guards ``_flag`` and ``_moved``.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._flag = False
        self._moved = False
        self.futures: list[Any] = []  # drivable futures still worth driving

    def is_set(self) -> bool:
        return self._flag

    isSet = is_set

    def set(self) -> None:
        with self._cond:
            self._flag = True
            self._cond.notify_all()

    def clear(self) -> None:
        with self._cond:
            self._flag = False

    def moved(self, _future: Any = None) -> None:
        with self._cond:
            self._moved = True
            self._cond.notify_all()

    def wait(self, timeout: Optional[float] = None) -> bool:
        end = None if timeout is None else _monotonic() + timeout
        while True:
            with self._cond:
                if self._flag:
                    return True
                self._moved = False
            progressed = False
            for one in self.futures:
                if _drive(one, self, None):
                    progressed = True
            # A plain loader future needs one dispatch at most; chains may need more.
            self.futures = [one for one in self.futures if not one.done() and one._follow is not None]
            if progressed:
                continue
            with self._cond:
                if self._flag:
                    return True
                if self._moved:
                    continue
                if end is None:
                    self._cond.wait()
                else:
                    remaining = end - _monotonic()
                    if remaining <= 0:
                        return False
                    self._cond.wait(remaining)


class _DrivingWaiters(list[Any]):
    """A drivable future's ``_waiters`` list: a ``concurrent.futures`` waiter appended to it gets a driving event.

    ``append`` runs under the future's lock: it only swaps the event and
    records the future; the driving happens in the event's ``wait``.
    """

    __slots__ = ("owner",)
    owner: Any

    def append(self, waiter: Any) -> None:
        event = getattr(waiter, "event", None)
        if event is not None and not event.is_set():
            if type(event) is not _DrivingEvent:
                event = waiter.event = _DrivingEvent()
            event.futures.append(self.owner)
        list.append(self, waiter)


def waiters_for(fut: Drivable) -> list[Any]:
    """A new waiter list for the drivable future *fut* (see ``_DrivingWaiters``)."""
    waiters = _DrivingWaiters()
    waiters.owner = fut
    return waiters

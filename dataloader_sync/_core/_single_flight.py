"""SingleFlight: concurrent misses of one cache key in one process make one batch-function call.

When a popular key expires, every request that needs it misses the shared
cache at once and each would call its batch function.  With a
``SingleFlight`` on the value cache, the first loader to miss a key *owns*
its flight (its batch function loads the key); loaders of other threads that
miss the same key while the flight is in the air *wait* for its outcome
instead of loading it.

Where the waiting happens: on the waiter's dispatching thread, in its batch
call, after it has sent the keys it owns (so two loaders that each own a key
the other waits for both make progress), outside every lock, for at most
``timeout`` seconds in all.  A waiter never waits for a flight whose owner
may need the waiter's thread, or is stuck where the waiter would be: a
flight of its own thread (a GraphQL execution completes its batches there),
or one whose owner's thread is itself waiting for flights (two requests each
owning what the other waits for, their batch futures settled by their own
execution loops, would otherwise hold each other up until the timeout) —
it loads the key itself.  Keys whose flight failed (the
batch raised, or the key's value is an exception), was lost (never landed
within ``timeout``), or ran past the deadline are loaded by the waiter's own
batch function, on its own thread, as if there were no flight: nothing waits
for ever and nothing is lost.  Waiting rather than chaining the waiter's
future to the owner keeps that fallback on the request thread (a Django ORM
batch function must run there, in its transaction and context).

Flight states (a ``_Flight``, guarded by ``SingleFlight._lock``)::

    IN THE AIR (in _flights, done False) --owner lands it--> DONE (out of _flights, done True, event set)
    IN THE AIR, older than timeout --a new miss--> replaced (the old one may still land: no one reads it)
    IN THE AIR --forget (an invalidation)--> DONE, failed (out of _flights, event set: its waiters load it)

Guarantees:
- ``join``/``land`` take the lock only to read and move flights; no user
  code runs here.  Waiting (``wait``) holds no lock.
- A flight is landed only by its owner (the loader future that owns the key),
  so a stale owner landing late cannot disturb a newer flight.
- A forked child starts with no flights (their owners are parent threads)
  and a new lock.
"""
from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Hashable, Sequence
from typing import Any, Callable, Optional

from ._time import seconds

__all__ = ["SingleFlight"]


class _Flight:
    __slots__ = ("owner", "thread", "started", "event", "done", "ok", "value")

    def __init__(self, owner: Any, thread: int, started: float) -> None:
        self.owner = owner  # the loader future whose batch loads the key
        self.thread = thread  # the owner's dispatching thread
        self.started = started
        self.event: Optional[threading.Event] = None  # made when the first waiter joins
        self.done = False
        self.ok = False
        self.value: Any = None


class SingleFlight:
    """The flights of one value cache, shared by every loader of the process (thread-safe).

    Args:
        timeout: the longest a waiter waits, in seconds (or a ``timedelta``), > 0.
        clock: a monotonic clock (the age of flights); waits use real time.

    Raises:
        TypeError, ValueError: a bad ``timeout`` (named ``single_flight_timeout``).
    """

    def __init__(self, timeout: Any = 10.0, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.timeout = seconds("single_flight_timeout", timeout, positive=True)
        self._clock = clock
        self._lock = threading.Lock()  # guards _flights, _waiting and the done/ok/value/event of every flight
        self._flights: dict[Hashable, _Flight] = {}
        self._waiting: dict[int, int] = {}  # thread id -> how many of its calls are in wait()
        _ALL.add(self)

    def _after_fork_in_child(self) -> None:
        """The owners of the flights in the air are threads the child does not have: forget them (no user code)."""
        self._lock = threading.Lock()
        self._flights = {}
        self._waiting = {}

    def __len__(self) -> int:
        return len(self._flights)

    def join(self, cache_keys: Sequence[Hashable], futures: Sequence[Any],
             indexes: Sequence[int]) -> tuple[list[int], list[tuple[int, _Flight]]]:
        """Take the flights of ``cache_keys[i]`` for ``i`` in *indexes*, or wait on those in the air.

        Returns:
            The indexes this caller loads (it owns their flights, or may not
            wait), and ``(index, flight)`` for each it should wait for.
        """
        own: list[int] = []
        waiting: list[tuple[int, _Flight]] = []
        me = threading.get_ident()
        now = self._clock()
        stale = now - self.timeout
        flights = self._flights
        with self._lock:
            for i in indexes:
                ck = cache_keys[i]
                try:
                    flight = flights.get(ck)
                except TypeError:  # an unhashable cache key (a custom cache_map): no flight
                    own.append(i)
                    continue
                if flight is None or flight.started < stale:
                    flights[ck] = _Flight(futures[i], me, now)
                    own.append(i)
                elif flight.thread == me:
                    own.append(i)  # never wait for our own thread: load it (not as its owner)
                else:
                    if flight.event is None:
                        flight.event = threading.Event()
                    waiting.append((i, flight))
        return own, waiting

    def forget(self, cache_keys: Optional[Sequence[Hashable]] = None) -> None:
        """End the flights of *cache_keys* (None: all) for everyone (an invalidation: what a flight in
        the air loads may be older than it).

        A miss from now on starts a flight of its own; a waiter of an ended
        flight loads the key itself, as for a failed flight (its load begins
        after the invalidation); the owner's landing finds no flight.
        """
        with self._lock:
            if cache_keys is None:
                ended = list(self._flights.values())
                self._flights = {}
            else:
                ended = []
                flights = self._flights
                for ck in cache_keys:
                    try:
                        flight = flights.pop(ck, None)
                    except TypeError:  # unhashable: it never had a flight
                        continue
                    if flight is not None:
                        ended.append(flight)
            for flight in ended:
                flight.done, flight.ok, flight.owner, flight.value = True, False, None, None
                if flight.event is not None:
                    flight.event.set()

    def land(self, cache_keys: Sequence[Hashable], futures: Sequence[Any], values: Sequence[Any]) -> None:
        """The owner's outcome: ``values[i]`` (an exception: failed) for the key it owns at ``futures[i]``."""
        flights = self._flights
        with self._lock:
            for ck, fut, value in zip(cache_keys, futures, values):
                try:
                    flight = flights.get(ck)
                except TypeError:
                    continue
                if flight is None or flight.owner is not fut:
                    continue
                del flights[ck]
                flight.done, flight.owner = True, None
                flight.ok = not isinstance(value, BaseException)
                flight.value = value if flight.ok else None
                if flight.event is not None:
                    flight.event.set()

    def land_failed(self, cache_keys: Sequence[Hashable], futures: Sequence[Any]) -> None:
        """The owner failed every key at ``futures[i]``: their waiters load them themselves."""
        error = _FAILED
        self.land(cache_keys, futures, [error] * len(futures))

    def wait(self, flights: Sequence[_Flight]) -> list[tuple[bool, Any]]:
        """Wait (no lock held) for *flights*, at most ``timeout`` seconds in all.

        A flight whose owner's thread is itself waiting here is not waited
        for: its batch may need that thread to complete (a batch future that
        a GraphQL execution settles on its own thread), and that thread may be
        waiting for one of ours — two requests would hold each other up until
        the timeout.  The one that comes second loads the key itself.

        Returns:
            ``(True, value)`` for each flight that landed a value in time,
            ``(False, None)`` for the others (failed, lost, late, or skipped).
        """
        me = threading.get_ident()
        with self._lock:
            waiting = self._waiting
            skip = [not f.done and f.thread in waiting for f in flights]
            waiting[me] = waiting.get(me, 0) + 1
        try:
            deadline = time.monotonic() + self.timeout
            for flight, skipped in zip(flights, skip):
                event = flight.event
                if not skipped and not flight.done and event is not None:
                    event.wait(max(0.0, deadline - time.monotonic()))
        finally:
            with self._lock:
                left = self._waiting[me] - 1
                if left:
                    self._waiting[me] = left
                else:
                    del self._waiting[me]
        with self._lock:
            return [(f.ok, f.value) if f.done else (False, None) for f in flights]


_FAILED = Exception("the flight's batch failed")
_ALL: weakref.WeakSet[SingleFlight] = weakref.WeakSet()  # for the at-fork hook


def _after_fork_in_child() -> None:
    for flights in list(_ALL):  # the child has one thread: no lock needed
        flights._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

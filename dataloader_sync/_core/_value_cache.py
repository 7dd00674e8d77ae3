"""ValueCache: a second-level cache of values, shared beyond one request (java-dataloader's ValueCache).

A loader's own cache (``cache_map``) holds futures and lives as long as the
loader, typically one request.  A value cache holds *values* and is shared:
by every request of a process, or by every process and host that use the same
Redis or Django cache.  A ``DataLoader(value_cache=...)`` consults it when a
batch is dispatched, between taking its queue and calling the batch function.

Guarantees:
- One ``get_values`` call per dispatch (per ``batch=False`` load), with the
  cache keys of every key dispatched; hits settle their futures at once,
  only the misses go on to the batch function (still one call per
  ``max_batch_size`` slice).
- One ``set_values`` call per batch-function call, with the values it
  returned successfully, after their futures are settled (java-dataloader's
  default: loads do not wait for the write).  Per-key exceptions and failed
  batches are never written.
- A value cache that raises (an ``Exception``) or returns a malformed answer
  is logged on the ``dataloader_sync`` logger, at most once per
  ``LOG_INTERVAL`` seconds per cache (the count of failures in between is in
  the next message), and treated as all-miss on read, write skipped on write:
  a load never fails because of it, and waits at most as long as the cache's
  own client timeout.  A later success after failures is logged at INFO.
- Every value cache sits behind a ``Breaker`` (``_breaker``): after a failed
  call no loader of the process calls it (neither reads nor writes) for the
  breaker's cool-down, then one call probes.  ``RedisValueCache`` and
  ``DjangoValueCache`` carry their own (``cool_down=``); a cache of the
  user's gets one made for it on first use (``DEFAULT_COOL_DOWN``, named
  after its ``prefix`` attribute or its class), unless it has a ``breaker``
  attribute of its own (a ``Breaker``, or None for none).  A cache with a
  breaker is logged by it (one WARNING when it opens, one INFO when it
  closes) instead of by the rate-limited failure log.
- The value cache is user code: it is never called under the loader's lock.
- A cache may also offer ``get_local_values(keys)``: a lookup in a tier of
  its own that lives in this process (``RedisValueCache``'s near cache),
  without I/O.  A loader whose cache offers it (read once, when the loader
  is made) asks it at load time, for the keys its own cache does not hold:
  a hit is settled there and then and never queued (``_load_local``).  A
  cache without it (the attribute None or absent) costs the loader nothing:
  its loads take the paths they take without a value cache.
- Invalidation is final with a *leasing* cache (one that offers
  ``lease(keys)`` and ``set_leased_values(keys, values, leases)``:
  ``Leasing``; ``RedisValueCache`` and ``DjangoValueCache`` do): the keys a
  dispatch loads (its misses) are leased before the batch function is
  called, with one ``lease`` call, and their values are written with
  ``set_leased_values``, which stores a value only where its key still holds
  its lease.  An invalidation between the two removes the lease, so a value
  read before it is never stored after it (the memcached leases of
  "Scaling Memcache at Facebook").  A lease that could not be taken (the
  cache failed, or its breaker is open) leaves its key unwritten.  With
  single flight, a flight whose value's lease was lost lands as failed: its
  waiters load the key themselves.  A cache without ``set_leased_values``
  is written with ``set_values``, unconditionally, as before.
"""
from __future__ import annotations

import abc
import concurrent.futures as cf
import enum
import logging
import threading
import time
import weakref
from collections.abc import Sequence
from itertools import compress, count, repeat
from operator import is_, not_
from typing import Any, Callable, Generic, Optional, Protocol, TypeVar, Union

from . import _fork
from ._breaker import Breaker
from ._cache_tier import DEFAULT_COOL_DOWN as DEFAULT_COOL_DOWN
from ._cache_tier import breaker_of as breaker_of
from ._cache_tier import check_prefix as check_prefix
from ._cache_tier import check_ttl as check_ttl
from ._cache_tier import flights_of as flights_of

__all__ = ["MISSING", "Leasing", "ValueCache"]

K = TypeVar("K")
V = TypeVar("V")

_LOGGER = logging.getLogger("dataloader_sync")

LOG_INTERVAL = 60.0  # seconds between two warnings about the same failing value cache


class _Missing(enum.Enum):
    """The type of ``MISSING`` (an enum, so that type checkers can narrow on ``is MISSING``)."""

    MISSING = "MISSING"

    def __repr__(self) -> str:
        return "MISSING"


MISSING = _Missing.MISSING
"""What ``ValueCache.get_values`` puts where a key has no value (``None`` is a value)."""


class ValueCache(abc.ABC, Generic[K, V]):
    """A cache of loaded values, shared across loaders, requests, processes.

    Subclass it and implement the four methods (``RedisValueCache`` in
    ``dataloader_sync.redis`` and ``DjangoValueCache`` in
    ``dataloader_sync.django`` are two).  Keys are the loader's cache keys
    (after ``cache_key_fn``).  A ``DataLoader`` calls ``get_values`` and
    ``set_values`` only; ``delete`` and ``clear`` are for the application
    (e.g. after a write to the rows behind a key): ``DataLoader.clear()``,
    ``clear_all()`` and ``prime()`` act on the loader's per-request cache
    only, never on the value cache.

    Implementations must be thread-safe: loaders of many threads call one
    instance at once.  A method that raises an ``Exception`` never fails a
    load (see the module notes); it should bound its own waiting (e.g. a
    client socket timeout).

    A cache with a tier of its own in this process (an in-memory LRU in
    front of a network store) may also offer ``get_local_values(keys)``
    (``LocalTier``), as a method or an instance attribute (absent or None:
    none, the default; it is not declared here, so a subclass defines it
    freely).  A loader
    made with such a cache calls it at load time, outside its lock, for the
    keys its own cache does not hold; each hit becomes a settled future in
    the loader's cache at once (no queue slot, no dispatch, no
    ``get_values``); the misses are queued and looked up at dispatch as
    before.  It must answer from memory only (no I/O, no blocking: a load
    waits for it), be thread-safe, and never return a value that was
    invalidated or has expired; a tier that cannot vouch for its entries
    (not yet, or no longer, told of invalidations) returns ``MISSING`` for
    every key.  It is not guarded by the breaker (there is no call to
    guard); if it raises, the loads go on as misses (logged, rate-limited).
    A tier may also offer ``get_local_futures(keys)``, the same answer as
    finished futures it keeps: a loader's ``load_many`` of keys it holds
    none of then caches those futures themselves (shared by the loaders of
    every request, as the values are) instead of making one per key.

    Attributes:
        breaker: the ``Breaker`` in front of this cache, or None for none.
            Left unset (the default), a breaker with a cool-down of
            ``DEFAULT_COOL_DOWN`` (5 s), named after the cache's ``prefix``
            attribute or its class, is made on first use.
    """

    breaker: Optional[Breaker]  # declared, not set: unset means "make one" (see breaker_of)

    @abc.abstractmethod
    def get_values(self, keys: Sequence[K]) -> list[Union[V, _Missing]]:
        """Look up *keys* in one round trip.

        Returns:
            One entry per key, in order: the cached value, or ``MISSING``.
        """

    @abc.abstractmethod
    def set_values(self, keys: Sequence[K], values: Sequence[V]) -> None:
        """Store ``values[i]`` under ``keys[i]`` for every i, in one round trip."""

    @abc.abstractmethod
    def delete(self, key: K) -> None:
        """Forget the value of *key* (no error when there is none)."""

    @abc.abstractmethod
    def clear(self) -> None:
        """Forget every value of this cache."""


# -- failures: logged, rate-limited per cache ------------------------------------------
class FailureLog:
    """Logs value-cache failures at most once per *interval* per cache, with the count in between.

    Thread-safe.  ``_lock`` guards ``_states``; logging happens outside it.
    The state of a cache is found by ``id()`` and checked against a weak
    reference, so a new cache at a dead one's address starts afresh (a cache
    that cannot be weakly referenced is held strongly); the table is bounded.
    """

    MAX_ENTRIES = 1024

    def __init__(self, interval: float = LOG_INTERVAL, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.clock = clock
        self._lock = threading.Lock()  # guards _states (and the lists in it)
        _fork.renew_lock_in_child(self)  # a lock held by another thread at fork stays held in the child
        # id(cache) -> [ref() -> cache, last warning time or None, failures not yet reported, failing]
        self._states: dict[int, list[Any]] = {}

    def _state_locked(self, cache: Any) -> list[Any]:
        state = self._states.get(id(cache))
        if state is not None and state[0]() is cache:
            return state
        # No weakref callback: it could run (in a GC pass) while _lock is held.
        # Entries of dead caches are replaced when their id is reused, or
        # dropped when the table is full.
        ref: Callable[[], Any]
        try:
            ref = weakref.ref(cache)
        except TypeError:  # cannot be weakly referenced: held (the table is bounded)
            ref = _Strong(cache)
        if len(self._states) >= self.MAX_ENTRIES:
            dead = [k for k, st in self._states.items() if st[0]() is None]
            for k in dead or [next(iter(self._states))]:
                del self._states[k]
        state = self._states[id(cache)] = [ref, None, 0, False]
        return state

    def failed(self, cache: Any, what: str, exc: BaseException) -> None:
        """Count a failure of *cache* during *what*; log it unless one was logged within the interval."""
        now = self.clock()
        with self._lock:
            state = self._state_locked(cache)
            state[3] = True
            last = state[1]
            if last is not None and now - last < self.interval:
                state[2] += 1
                return
            suppressed, state[1], state[2] = state[2], now, 0
        more = f" ({suppressed} more failures since the last warning)" if suppressed else ""
        _LOGGER.warning(
            "value cache %r failed in %s; loads go to the batch function, writes are skipped%s; "
            "next warning for this cache in %g s at the earliest",
            cache, what, more, self.interval, exc_info=(type(exc), exc, exc.__traceback__),
        )

    def succeeded(self, cache: Any) -> None:
        """A call of *cache* worked: say so once after failures."""
        with self._lock:
            state = self._states.get(id(cache))
            if state is None or not state[3] or state[0]() is not cache:
                return
            state[3] = False
            suppressed, state[2] = state[2], 0
        _LOGGER.info("value cache %r works again (%d failures since the last warning)", cache, suppressed)


class _Strong:
    """A strong reference that is called like a weak one."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __call__(self) -> Any:
        return self.obj


FAILURES = FailureLog()


def check_value_cache(value_cache: Any) -> Any:
    """*value_cache* if it can serve as one (None too).

    Raises:
        TypeError: it has no callable ``get_values`` and ``set_values``.
    """
    if value_cache is not None and not (
        callable(getattr(value_cache, "get_values", None)) and callable(getattr(value_cache, "set_values", None))
    ):
        raise TypeError("value_cache must be a ValueCache (get_values, set_values) or None")
    return value_cache


class LocalTier(Protocol):
    """The optional part of a value cache that loaders ask at load time (see ``ValueCache``): a tier
    of its own in this process.  ``get_local_futures`` is optional beside ``get_local_values``."""

    def get_local_values(self, keys: Sequence[Any]) -> list[Any]:
        """The value of each key this process holds itself (no I/O, no waiting), or ``MISSING``,
        one entry per key, in a new list; never an invalidated or expired value."""

    def get_local_futures(self, keys: Sequence[Any]) -> list[Union[cf.Future[Any], _Missing]]:
        """The same answer as futures finished with the values (never failed), kept by the tier and
        handed to every loader that asks."""


class Leasing(Protocol):
    """The optional part of a value cache that makes ``invalidate`` final (see the module notes).

    A cache offers both methods or neither (``set_leased_values`` callable
    is what a loader looks for, once, when it is made).
    """

    def lease(self, keys: Sequence[Any]) -> list[Any]:
        """Lease *keys* for a load that has missed them: one round trip, before the batch function runs.

        Each key is given a token of its own, unique across processes and
        time, that stands in the store in place of any value (a reader takes
        it for a miss) until a value is stored with it, it expires, or the
        key is invalidated (which removes it).  Leasing a key again replaces
        the earlier lease (whose holder then stores nothing).

        Returns:
            One token per key, in order (opaque to the loader).
        """

    def set_leased_values(self, keys: Sequence[Any], values: Sequence[Any],
                          leases: Sequence[Any]) -> list[Any]:
        """Store ``values[i]`` under ``keys[i]`` only where the key still holds ``leases[i]``,
        atomically for each key (compare and set), in one round trip.

        Returns:
            One entry per key: True where its lease still held (its value
            was stored, or would have been but for a value the codec or the
            ttl callable could not handle); where it did not (the key was
            invalidated, or another load sharing the lease stored first),
            the value the store holds in its place (stored by a load whose
            lease held: a single flight's waiters may take it), or
            ``MISSING``.
        """


class AllFinished(list):  # type: ignore[type-arg]
    """A ``get_local_futures`` answer in which every key hit: each entry a future finished with its value.

    A tier that knows it (the near cache, when its lookup found every key)
    answers with this list type, and the loader checks no entry; any other
    answer is checked entry by entry (``_load_local``).
    """

    __slots__ = ()


def local_lookup_of(value_cache: Any) -> Optional[tuple[Any, Callable[[list[Any]], list[Any]], Any]]:
    """``(value_cache, its get_local_values, its get_local_futures or None)`` when it offers
    ``get_local_values`` (callable), else None."""
    lookup = getattr(value_cache, "get_local_values", None)
    if not callable(lookup):
        return None
    futures = getattr(value_cache, "get_local_futures", None)
    return value_cache, lookup, futures if callable(futures) else None


def look_up_local(value_cache: Any, lookup: Callable[[list[Any]], Any], keys: list[Any],
                  what: str = "get_local_values") -> Optional[list[Any]]:
    """``lookup(keys)`` (a cache's ``get_local_values``, or *what*) as a list of one entry per key; None
    when it raised or answered with the wrong number of entries (logged, rate-limited: the keys are misses).

    Raises:
        BaseException: what it raised when it is not an ``Exception``.
    """
    try:
        found = lookup(keys)
        if type(found) is not list and type(found) is not AllFinished:
            found = list(found)
    except Exception as exc:
        FAILURES.failed(value_cache, what, exc)
        return None
    if len(found) != len(keys):
        FAILURES.failed(value_cache, what, ValueError(
            f"{what} returned {len(found)} entries for {len(keys)} keys; it must return one per key"))
        return None
    return found


def _failed(value_cache: Any, breaker: Optional[Breaker], what: str, exc: BaseException) -> None:
    if breaker is None:
        FAILURES.failed(value_cache, what, exc)
    else:
        breaker.failed(exc, what)


def identical(items: list[Any], obj: Any) -> list[bool]:
    """Whether each item is *obj* (e.g. a lookup's entries ``MISSING``): by identity (a value's own
    ``__eq__`` is never asked: a NumPy array's would not answer a bool) and in C, no Python per item."""
    return list(map(is_, items, repeat(obj, len(items))))


def positions(flags: list[bool]) -> tuple[list[int], list[int]]:
    """(the positions where *flags* is true, those where it is false), in order."""
    return list(compress(count(), flags)), list(compress(count(), map(not_, flags)))


def _one_per_key(value_cache: Any, what: str, call: Callable[..., Any], args: tuple[Any, ...], count: int,
                 entries: str) -> Optional[list[Any]]:
    """``call(*args)`` (the cache's method *what*) as a list of *count* entries, through the cache's
    breaker; None when the breaker is open, or the call raised an ``Exception`` or answered with another
    number of *entries* (logged, rate-limited, or counted by the breaker).

    Raises:
        BaseException: what the cache raised when it is not an ``Exception``.
    """
    breaker = breaker_of(value_cache)
    if breaker is not None and not breaker.allow():
        return None
    try:
        found = call(*args)
        if type(found) is not list:
            found = list(found)
    except Exception as exc:
        _failed(value_cache, breaker, what, exc)
        return None
    if len(found) != count:
        _failed(value_cache, breaker, what, ValueError(
            f"{what} returned {len(found)} {entries} for {count} keys; it must return one per key"))
        return None
    if breaker is None:
        FAILURES.succeeded(value_cache)
    else:
        breaker.succeeded()
    return found


def look_up(value_cache: Any, keys: list[Any]) -> Optional[list[Any]]:
    """``value_cache.get_values(keys)`` as a list of one entry per key; None when the cache failed (logged)
    or its breaker is open.

    Raises:
        BaseException: what the cache raised when it is not an ``Exception``.
    """
    return _one_per_key(value_cache, "get_values", value_cache.get_values, (keys,), len(keys), "entries")


def write(value_cache: Any, keys: list[Any], values: list[Any]) -> None:
    """``value_cache.set_values(keys, values)`` of the values that are not exceptions; a failure is logged.

    Raises:
        BaseException: what the cache raised when it is not an ``Exception``.
    """
    if any(isinstance(v, BaseException) for v in values):
        pairs = [(k, v) for k, v in zip(keys, values) if not isinstance(v, BaseException)]
        keys, values = [k for k, _ in pairs], [v for _, v in pairs]
    if not keys:
        return
    breaker = breaker_of(value_cache)
    if breaker is not None and not breaker.allow():
        return
    try:
        value_cache.set_values(keys, values)
    except Exception as exc:
        _failed(value_cache, breaker, "set_values", exc)
        return
    if breaker is None:
        FAILURES.succeeded(value_cache)
    else:
        breaker.succeeded()


def leasing_of(value_cache: Any) -> bool:
    """Whether *value_cache* leases (``Leasing``): its ``set_leased_values`` and ``lease`` are callable."""
    return callable(getattr(value_cache, "set_leased_values", None)) and callable(getattr(value_cache, "lease", None))


def take_leases(value_cache: Any, keys: list[Any]) -> Optional[list[Any]]:
    """``value_cache.lease(keys)`` as a list of one token per key; None when the cache failed (logged)
    or its breaker is open: those keys are loaded and not written.

    Raises:
        BaseException: what the cache raised when it is not an ``Exception``.
    """
    return _one_per_key(value_cache, "lease", value_cache.lease, (keys,), len(keys), "tokens")


def write_leased(value_cache: Any, keys: list[Any], values: list[Any], leases: list[Any]) -> list[Any]:
    """``value_cache.set_leased_values`` of the values that are not exceptions and have a lease.

    Returns:
        One entry per key: where the cache said the key's lease was lost,
        what it answered (the value stored in its place, or ``MISSING``: the
        loaded value may be older than an invalidation); True elsewhere —
        stored, not written (an exception, no lease), or unknown (the cache
        failed: logged, or its breaker is open).

    Raises:
        BaseException: what the cache raised when it is not an ``Exception``.
    """
    held: list[Any] = [True] * len(keys)
    at = [i for i, (value, lease) in enumerate(zip(values, leases))
          if lease is not None and not isinstance(value, BaseException)]
    if not at:
        return held
    if len(at) == len(keys):
        args = (keys, values, leases)
    else:
        args = ([keys[i] for i in at], [values[i] for i in at], [leases[i] for i in at])
    flags = _one_per_key(value_cache, "set_leased_values", value_cache.set_leased_values, args, len(at), "flags")
    if flags is None:
        return held
    for i, flag in zip(at, flags):
        held[i] = flag
    return held

"""Loads answered at load time by a value cache's local tier (``ValueCache.get_local_values``).

A loader whose ``value_cache`` offers ``get_local_values`` (``RedisValueCache``
with a near cache) asks it, at ``load()`` / ``load_many()``, for the keys its
own cache does not hold.  A hit becomes a future settled there and then,
stored in the loader's cache as a dispatched key's would be (``load(k) is
load(k)``; ``prime``, ``clear``, ``clear_all`` act on it as on any), with no
queue slot, no dispatch, no ``get_values`` and no batch call; the misses go
on as before, queued and looked up at dispatch.  A friend of ``DataLoader``
(the fields ``_loader_state.LoaderState`` declares).

Guarantees:
- The local lookup is user code: it runs outside the loader's lock.  What it
  is asked is decided from a look at the loader's own dict without the lock
  (a hint: the registration, under the lock, decides); a key that another
  thread registered meanwhile is answered by that thread's future.  A
  lookup that raises an ``Exception`` or answers with the wrong number of
  entries is logged (rate-limited) and every key is a miss; a
  ``BaseException`` propagates before any key is registered.
- Statistics: a load-time hit is a load and a value-cache hit (not a cache
  hit of the loader's, not a batch load); the lookup's misses are counted by
  the dispatch's lookup, so each key counts once.  Instrumentation:
  ``value_cache_lookup(loader, hits, 0)`` once per load-time lookup that
  hit (the misses are told by the dispatch's), outside every lock.
- A hit's value that is an exception instance fails its key, as a
  dispatched hit's does (``settle_many``).
- A tier that also offers ``get_local_futures`` hands out futures of its
  own, finished with the values: ``load_many`` of keys the loader holds
  none of caches those (``load_many_shared``), checked in one pass in C
  (done, not failed; a pending, failed or foreign entry is a miss), or not
  at all when the answer is an ``AllFinished`` list (the near cache's, when
  every key hit).  Every other hit gets a future of the loader's own.

Duplicated for speed (said once here): ``settled`` writes
``_new_futures.loader_future``'s stores with the outcome in place (a future
of the loader's lock, already finished; ``_Settled`` keeps the fields every
such future has alike on the class), and the all-hit paths of ``load_many``
cache a batch of futures with one ``update`` and return the values without
a look at each future; measured by ``tools/bench.py --value-cache``
("near-cache hit").
"""
from __future__ import annotations

from itertools import compress, count
from operator import attrgetter
from typing import Any, Optional

from . import _instrumentation_seam, _value_cache
from ._compat import FINISHED
from ._future import Future
from ._loader_state import LoaderState
from ._value_cache import MISSING, AllFinished, identical, look_up_local

__all__ = ["any_hit", "ask", "load_many_hits", "load_many_shared", "load_one", "register_all", "settled",
           "settled_one", "tell"]

_new = object.__new__
_outcomes = attrgetter("_state", "_exception")
_SUCCEEDED = {(FINISHED, None)}
_results = attrgetter("_result")


class _Settled(Future[Any]):
    """A future of a load the local tier answered: finished when made (a ``Future`` in every respect).

    Its fields that every such future has alike are class attributes (a
    finished future never writes them; a Condition or a waiter list, should
    anyone ask, is made on the instance as for any future): making one
    writes three fields, not ten (see the module notes).
    """

    _state = FINISHED
    _exception: Optional[BaseException] = None
    _done_callbacks: Any = None
    _cond = None
    _waiter_list = None
    _follow = None


def settled(lock: Any, values: list[Any]) -> tuple[Optional[list[Future[Any]]], bool]:
    """A future per value, finished with it (an exception instance: failed with it), sharing *lock*
    as a dispatched key's future does, and whether any failed; ``(None, False)`` when a value is
    ``MISSING`` (checked here, by identity, in the one pass over the values).
    """
    out: list[Future[Any]] = []
    append = out.append
    failed = False
    for value in values:
        if value is MISSING:
            return None, False
        fut = _new(_Settled)
        fut._lock = fut._shared = lock
        if isinstance(value, BaseException):
            fut._result = None
            fut._exception = value
            failed = True
        else:
            fut._result = value
        append(fut)
    return out, failed


def settled_one(lock: Any, value: Any) -> Future[Any]:
    """``settled`` of one value (not ``MISSING``)."""
    futures, _ = settled(lock, [value])
    assert futures is not None, "a hit's value"
    return futures[0]


def ask(loader: LoaderState, cks: list[Any]) -> Optional[list[Any]]:
    """The local tier's entry for each of *cks* (a value, or ``MISSING``); None when it was not asked
    (the loader holds every key) or failed.

    Keys the loader's own dict holds (looked at without the lock: a hint)
    are not asked; a ``cache_map`` is not looked at (its methods run under
    the lock only), so every key is asked.  Hits are told from misses by
    identity (``MISSING``), never by a value's ``__eq__``.

    Raises:
        BaseException: what the lookup raised when it is not an ``Exception``.
    """
    local = loader._local
    assert local is not None
    value_cache, lookup, _ = local
    cache = loader._cache
    positions: Optional[list[int]] = None
    asked = cks
    if cache and loader._dict_cache:
        try:
            held = list(map(cache.get, cks))
        except TypeError:  # an unhashable key: the registration names it
            return None
        unheld = identical(held, None)
        n_unheld = sum(unheld)
        if n_unheld == 0:
            return None
        if n_unheld != len(cks):
            positions = list(compress(count(), unheld))
            asked = list(compress(cks, unheld))
    found = look_up_local(value_cache, lookup, asked)
    if found is None or positions is None:
        return found
    aligned: list[Any] = [MISSING] * len(cks)
    for i, value in zip(positions, found):
        aligned[i] = value
    return aligned


def any_hit(found: list[Any]) -> bool:
    """Whether *found* (``ask``'s answer) holds a value, not only ``MISSING`` (by identity)."""
    return not all(identical(found, MISSING))


def load_many_shared(loader: LoaderState, keys: list[Any]) -> Optional[tuple[list[Any], bool]]:
    """``load_many`` of *keys* on a loader whose own dict holds none of them, through the tier's
    ``get_local_futures``: when every key hit, ``(their values, True)``, the tier's futures
    registered in the loader's dict; else ``(the tier's answer as values, False)`` (``MISSING`` for
    a miss), nothing registered; None when it failed (logged) or another thread registered keys.

    Raises:
        BaseException: what the lookup raised when it is not an ``Exception``.
    """
    local = loader._local
    assert local is not None
    value_cache, _, lookup = local
    futures = look_up_local(value_cache, lookup, keys, "get_local_futures")
    if futures is None:
        return None
    try:  # MISSING (it has no _state) or anything but a future finished with a value: not all hits
        all_hits = type(futures) is AllFinished or set(map(_outcomes, futures)) == _SUCCEEDED  # in C
    except AttributeError:
        all_hits = False
    if not all_hits:
        try:
            return [MISSING if f is MISSING or f._state is not FINISHED or f._exception is not None else f._result
                    for f in futures], False
        except AttributeError as exc:  # not futures: the tier broke its contract
            _value_cache.FAILURES.failed(value_cache, "get_local_futures", exc)
            return None
    values = list(map(_results, futures))
    if not register_all(loader, keys, futures):
        return None
    return values, True


def tell(loader: LoaderState, hits: int) -> None:
    """Tell the loader's instrumentation of *hits* load-time hits (outside every lock)."""
    instrumentation = loader._instrumentation
    if instrumentation is not None and hits:
        _instrumentation_seam.value_cache_lookup(instrumentation, loader, hits, 0)


def load_one(loader: LoaderState, ck: Any) -> Optional[Future[Any]]:
    """``load()`` of *ck* answered by the local tier: its future, or None (a miss: load it as before).

    Raises:
        BaseException: what the lookup raised when it is not an ``Exception``.
    """
    if loader._dict_cache:
        try:
            hash(ck)
        except TypeError:  # the load names it
            return None
    found = ask(loader, [ck])
    if found is None or found[0] is MISSING:
        return None
    fut = settled_one(loader._lock, found[0])
    cache_error = None
    lock = loader._lock
    lock.acquire()
    try:
        try:
            held = loader._cache.get(ck)
        except Exception as exc:  # a failing cache_map: a miss
            held, cache_error = None, ("read", exc)
        if held is not None:  # registered by another thread meanwhile: its future
            loader._count_locked(hits=1)
            return held
        loader._count_locked(local_hits=1)
        try:
            loader._cache[ck] = fut
        except Exception as exc:  # uncached, still answered
            cache_error = ("write", exc)
    finally:
        lock.release()
    if cache_error is not None:
        loader._cache_failed(*cache_error)
    tell(loader, 1)
    return fut


def load_many_hits(loader: LoaderState, keys: list[Any],
                   found: list[Any]) -> Optional[tuple[list[Future[Any]], bool]]:
    """``load_many`` of *keys* on a loader whose own dict held none of them, when they all hit the local
    tier (*found*): their futures, registered, and whether any failed (a value that is an exception
    instance fails its key, as at dispatch); None, having registered nothing, when one missed or the
    dict is not empty any more (register them key by key).

    The loader's own dict, its keys their own cache keys (``_load_many``'s first path).
    """
    futures, failed = settled(loader._lock, found)  # before the lock: it is held for the update only
    if futures is None:
        return None
    if not register_all(loader, keys, futures):
        return None
    return futures, failed


def register_all(loader: LoaderState, keys: list[Any], futures: list[Any]) -> bool:
    """Register *futures*, the finished futures of *keys*, in the loader's own dict, which must be empty
    (``load_many``'s all-hit paths), count them and tell the instrumentation; False, having registered
    nothing, when the dict is not empty any more or cannot hold a key (the careful path decides).
    """
    lock = loader._lock
    cache = loader._cache
    lock.acquire()
    try:
        if cache:  # another thread registered keys meanwhile
            return False
        try:
            cache.update(zip(keys, futures))
        except Exception:  # a key the dict cannot hold: as it was (empty), and the careful path names it
            cache.clear()
            return False
        distinct = len(cache)  # fewer than keys: a key repeated is a cache hit of its first load
        loader._count_locked(hits=len(keys) - distinct, local_hits=distinct)
    finally:
        lock.release()
    tell(loader, distinct)
    return True

"""A loader's cache beyond ``load()``: priming it, evicting a cancelled load, and a look for ``_reuse``.

``load()`` and the batch call (``_batch_call``) read and fill the cache on
their own hot paths; what is here runs once per call, not per load.  A
friend of ``DataLoader``: it reads and writes the fields
``_loader_state.LoaderState`` declares (``DataLoader`` implements it).

Guarantees:
- User code never runs under the loader's lock, but for the ``cache_map``'s
  own methods (the one exception ``DataLoader`` documents); a failing
  ``cache_map`` is a miss or leaves its entry, logged through the loader
  after the lock is released (``_cache_failed``).
- ``prime`` of a pending ``concurrent.futures.Future`` completes the cached
  future when the source does (its callback is added outside the lock), and
  a thread blocking on a load of that key drives the source (``_follow``).
- A cancelled load leaves the queue (if still there) and the cache; the
  batch and the other keys go on as before.
"""
from __future__ import annotations

import concurrent.futures as cf
from typing import Any, Callable, Optional

from ._future import Future
from ._loader_state import LoaderState
from ._new_futures import completed_future, copy_outcome, failed_future
from ._sync_on_demand import Ticket

__all__ = ["cached_beyond_queue", "forget_cancelled", "heard_next_load", "outcome_of", "prime", "watch_next_load"]


def prime(loader: LoaderState, key: Any, value: Any) -> None:
    """``DataLoader.prime`` (see its docstring): cache *value* for *key* unless it is cached already.

    Raises:
        TypeError: the key (or its cache key) is not hashable.
    """
    ck = loader._cache_key(key)
    pending: Optional[cf.Future[Any]] = None
    if isinstance(value, cf.Future):
        if value.done():
            fut: Future[Any] = outcome_of(value)
        else:
            fut, pending = Future(), value
            fut._follow = value  # blocking on a load of this key drives the source
    elif isinstance(value, Exception):
        fut = failed_future(value)
    else:
        fut = completed_future(value)
    cache_error = None
    with loader._lock:
        try:
            present = loader._cache.get(ck) is not None
        except Exception as exc:  # a failing cache_map: a miss
            present, cache_error = False, ("read", exc)
        if not present:
            try:
                loader._cache[ck] = fut
            except Exception as write_exc:
                present, cache_error = True, ("write", write_exc)  # not cached: nothing to complete
    if cache_error is not None:
        loader._cache_failed(*cache_error)
    if pending is not None and not present:
        # Outside the lock: a done future runs the callback at once.
        pending.add_done_callback(lambda src: copy_outcome(src, fut))


def forget_cancelled(loader: LoaderState, fut: Future[Any], ticket: Ticket) -> None:
    """A load's future was cancelled: take its key out of the queue (if still there) and the cache.

    Called by ``Future.cancel`` (through ``DataLoader._forget_cancelled``)
    outside every lock, before the future's callbacks run.  Linear in the
    queue (or, for a key already dispatched, in the cache): cancelling is
    rare, and a cached or queued ``load()`` pays nothing for it.
    """
    with loader._lock:
        ck: Any = None
        found = False
        queue = loader._queue
        if ticket is loader._ticket and queue is not None:  # still queued
            for i, queued in enumerate(queue.futures):
                if queued is fut:
                    ck, found = queue.cached_under()[i], True
                    queue.drop(i)
                    loader._count_locked(misses=1)  # its load stays counted (see DataLoader.statistics)
                    break
        if not loader._cache_enabled:
            return
        cache = loader._cache
        try:
            if not found:  # dispatched already: find it in the cache
                found_cks = [k for k, cached in cache.items() if cached is fut]
                ck, found = (found_cks[0], True) if found_cks else (None, False)
            if found and cache.get(ck) is fut:
                del cache[ck]
        except Exception as exc:  # a failing cache_map: the entry stays
            evict_error: Optional[Exception] = exc
        else:
            evict_error = None
    if evict_error is not None:
        loader._cache_failed("delete", evict_error)


def watch_next_load(loader: LoaderState, hook: Callable[[Any], bool]) -> None:
    """Call ``hook(loader)`` at the loader's next ``load()`` or ``load_many()``, cache hits included,
    until it returns True; then it is dropped.

    ``graphql._reuse``'s look at a loader that an execution used, when a later one uses it.  A plain
    loader's ``load()`` pays nothing for it: the hook turns ``_plain`` off, so that load takes the
    general path, which asks for the hook first (before any lock: the hook may run anything but must
    not block).  Written without the lock: of two threads setting and clearing hooks at once, one
    hook may be dropped unheard — a look missed, never a wrong value.
    """
    loader._next_load = hook
    loader._plain = False


def heard_next_load(loader: LoaderState) -> None:
    """The next-load hook's call (``DataLoader.load``/``load_many`` make it while one is set)."""
    hook = loader._next_load
    if hook is not None and hook(loader):
        loader._next_load = None
        loader._plain = loader._own_path


def cached_beyond_queue(loader: LoaderState) -> bool:
    """True when *loader*'s cache holds entries beyond its queued keys: values of earlier dispatches.

    ``graphql._reuse``'s question (does a loader reused by a second request
    hold the first one's values?); under the loader's lock, as ``len`` of a
    ``cache_map`` is its own method.  False for a loader given a
    ``value_cache``: the shared tier is its cache, invalidated as documented.
    """
    if loader._local is not None or loader._settings.value_cache is not None:
        return False
    with loader._lock:
        return len(loader._cache) > (0 if loader._queue is None else len(loader._queue))


def outcome_of(src: cf.Future[Any]) -> Future[Any]:
    """A done future holding the outcome of the done *src* (a cancellation as a CancelledError)."""
    if src.cancelled():
        return failed_future(cf.CancelledError())
    exc = src.exception()
    return failed_future(exc) if exc is not None else completed_future(src.result())

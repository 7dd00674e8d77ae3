"""``DataLoader.load`` of any loader: the general path, beside ``load()``'s own for a plain loader.

``load()`` takes its own path for the common loader (its own dict, keys
their own cache keys, batching) and no key context, and this one for every
other: a ``cache_map``, ``cache_key_fn``, ``cache=False``, ``batch=False``,
a key context, a value cache with a local tier (``_load_local``, asked
first, outside the lock).  A friend of ``DataLoader``: it reads and writes the fields
``_loader_state.LoaderState`` declares, under the loader's lock, and
runs no user code under it but the ``cache_map``'s own methods (the one
exception ``DataLoader`` documents) and the keys' ``__hash__``/``__eq__``.

Guarantees (``DataLoader``'s, for one load): the cache lookup, the cache
insert and the queue append happen under one lock acquisition; a failing
``cache_map`` is a miss (read) or leaves the key uncached but loaded
(write), logged after the lock is released; the registries and the dispatch
scope hear of the loader once per queue (``_listeners``).
"""
from __future__ import annotations

from typing import Any, Optional

from ._batch_shapes import KeyQueue
from ._dispatch_scope import current_scope
from ._future import Future
from ._listeners import announce, heard_locked
from ._load_local import load_one
from ._loader_state import Hearing, LoaderState
from ._new_futures import loader_future

__all__ = ["check_hashable", "load_any", "unhashable"]


def load_any(loader: LoaderState, key: Any, key_context: Any) -> Future[Any]:
    """``DataLoader.load`` of any loader: a cache_map, cache_key_fn, cache=False, batch=False, a key context.

    Raises:
        TypeError: the key (or its cache key) is not hashable.
    """
    ck = None
    if loader._cache_enabled:
        ck = key if loader._cache_key_fn is None else loader._cache_key_fn(key)
        if not loader._dict_cache:  # a dict's lookup (below) checks the key itself
            check_hashable(ck)
        if loader._local is not None and (hit := load_one(loader, ck)) is not None:
            return hit  # the value cache's local tier, asked before the lock (see _load_local)
    cache_error = None
    hearing: Optional[Hearing] = None
    lock = loader._lock
    lock.acquire()  # not ``with``: it costs about twice as much (see _future)
    try:
        if loader._cache_enabled:
            try:
                fut = loader._cache.get(ck)
            except Exception as exc:  # a failing cache_map: a miss
                if loader._dict_cache:  # a dict's get raises only for an unhashable key
                    raise unhashable(ck) from None
                fut, cache_error = None, ("read", exc)
            if fut is not None:
                loader._count_locked(hits=1)
                return fut
        if not loader._batch:  # a queued load is counted with its queue (statistics())
            loader._count_locked(misses=1)
        fut = loader_future(lock)
        if loader._cache_enabled:
            try:
                loader._cache[ck] = fut
            except Exception as exc:  # uncached, still loaded
                cache_error = ("write", exc)
        if loader._batch:
            queue = loader._queue
            scope = current_scope()  # only a load that queues needs it
            if queue is not None and queue.keys:  # the loader's _enqueue_locked's common case, inline
                fut._ticket = loader._ticket
                if queue.cache_keys is None and key_context is None and queue.contexts is None:
                    queue.keys.append(key)  # the common case of KeyQueue.add, inlined
                    queue.futures.append(fut)
                else:
                    queue.add(key, ck, key_context, fut)
                if loader._told is not scope:
                    hearing = heard_locked(loader, scope, False)
            else:
                one = KeyQueue.one(key, ck, key_context, fut, loader._cache_key_fn is not None)
                hearing = loader._enqueue_locked(one, scope)
    finally:
        lock.release()
    if cache_error is not None:
        loader._cache_failed(*cache_error)
    if not loader._batch:  # one batch call for this load, now
        loader._batch_call.send(KeyQueue.one(key, ck, key_context, fut, loader._cache_key_fn is not None))
    elif hearing is not None:  # once per queue and scope
        announce(loader, hearing)
    return fut


def check_hashable(ck: Any) -> None:
    """Raise ``unhashable(ck)`` when *ck* cannot be hashed."""
    try:
        hash(ck)
    except TypeError:
        raise unhashable(ck) from None


def unhashable(ck: Any) -> TypeError:
    """The error of a load whose key (or cache key) is not hashable."""
    return TypeError(f"key must be hashable (got {type(ck).__name__}); pass cache_key_fn= to map it to one")

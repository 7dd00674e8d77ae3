"""``DataLoader.load_many``: many keys registered in one lock acquisition, one future of their values.

A friend of ``DataLoader`` as ``_loader_fork`` is: it reads and writes the
fields :class:`ManyLoaded` declares (``DataLoader`` implements it), under the
loader's lock, and runs no user code under it except the loader's
``cache_map`` methods (the one exception the loader documents).

Guarantees:
- Every key is registered (answered from the cache, or queued) or none: even
  a ``BaseException`` from the cache map leaves no key cached without being
  queued, and the load count counts exactly the keys registered.
- The registries and the dispatch scope hear of the loader as for ``load()``
  (see ``_listeners``): once per queue, after the lock is released.
- ``cache_key_fn`` runs before the lock is taken; a failing ``cache_map`` is
  logged through the loader after it is released.
"""
from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, MutableMapping
from typing import Any, Optional, Protocol

from ._batch import KeyQueue
from ._demand import Ticket
from ._dispatch_scope import current_scope
from ._future import Future, loader_future
from ._gather import gather
from ._listeners import Listened, announce, retell_locked

__all__ = ["ManyLoaded", "contexts_for", "load_many"]


class ManyLoaded(Listened, Protocol):
    """What ``load_many`` reads and writes of a DataLoader (see ``DataLoader.__init__``), beside ``Listened``'s.

    The loader's ``_lock`` guards everything but the flags.
    """

    _lock: Any  # a threading.RLock (as Listened's: read here too)
    _queue: Optional[KeyQueue]  # None until a load queues a key (and once a dispatch took it)
    _told: Any
    _ticket: Optional[Ticket]  # made with _queue
    _cache: MutableMapping[Hashable, Future[Any]]
    _cache_enabled: bool
    _cache_key_fn: Any
    _batch: bool
    _load_count: int
    _cache_hit_count: int

    def _cache_key(self, key: Any) -> Hashable: ...

    def _new_queue_locked(self) -> KeyQueue: ...

    def _cache_failed(self, kind: str, exc: Exception) -> None: ...

    def _call_each(self, new: KeyQueue) -> None: ...


def load_many(loader: ManyLoaded, keys: Iterable[Any], key_contexts: Any,
              return_exceptions: bool) -> Future[list[Any]]:
    """``DataLoader.load_many`` (see its docstring for the arguments and errors)."""
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Iterable):
        raise TypeError(f"keys must be an iterable of keys, not a {type(keys).__name__}")
    keys = list(keys)
    contexts = contexts_for(keys, key_contexts)
    cks = [loader._cache_key(k) for k in keys] if loader._cache_enabled else [None] * len(keys)
    futures: list[Future[Any]] = []
    new = KeyQueue(loader._cache_key_fn is not None)
    cache_errors: list[tuple[str, Exception]] = []
    scope = current_scope()
    first = tell = mixed = False
    with loader._lock:
        try:
            _register_many_locked(loader, keys, cks, contexts, futures, new, cache_errors)
        finally:
            loader._load_count += len(futures)
            if loader._batch and new:
                queue = loader._queue
                assert queue is not None, "made by _register_many_locked"
                first = not queue
                queue.extend(new)
                if loader._told is not scope:  # as in load()
                    tell, mixed = retell_locked(loader, scope, first)
    for kind, error in cache_errors:
        loader._cache_failed(kind, error)
    if new and not loader._batch:
        loader._call_each(new)
    elif first or mixed or tell:
        announce(loader, scope, first or mixed, tell)
    return gather(futures, return_exceptions=return_exceptions)


def _register_many_locked(loader: ManyLoaded, keys: list[Any], cks: list[Any], contexts: list[Any],
                          futures: list[Future[Any]], new: KeyQueue,
                          cache_errors: list[tuple[str, Exception]]) -> None:
    """The keys, under the loader's lock: each key's future (cached, or new in *new*) to *futures*.

    Invariant: a key is in *futures* iff it is either answered from the
    cache or in *new* (cached or not); even a ``BaseException`` from the
    cache map leaves no key cached without being queued.
    """
    cache = loader._cache if loader._cache_enabled else None
    ticket = None
    if loader._batch:
        if loader._queue is None:
            loader._new_queue_locked()
        ticket = loader._ticket
    for key, ck, kc in zip(keys, cks, contexts):
        if cache is not None:
            try:
                fut = cache.get(ck)
            except Exception as exc:  # a failing cache_map: a miss
                fut = None
                cache_errors.append(("read", exc))
            if fut is not None:
                loader._cache_hit_count += 1
                futures.append(fut)
                continue
        fut = loader_future(loader._lock)
        fut._ticket = ticket
        if cache is not None:
            try:
                cache[ck] = fut
            except Exception as exc:  # uncached, still loaded
                cache_errors.append(("write", exc))
        new.add(key, ck, kc, fut)
        futures.append(fut)


def contexts_for(keys: list[Any], key_contexts: Any) -> list[Any]:
    """``load_many``'s key contexts as a list parallel to *keys*.

    Raises:
        TypeError, ValueError: *key_contexts* is not a mapping, None or a
        sequence of the same length as *keys*.
    """
    if key_contexts is None:
        return [None] * len(keys)
    if isinstance(key_contexts, Mapping):
        return [key_contexts.get(k) for k in keys]
    if isinstance(key_contexts, (str, bytes)) or not isinstance(key_contexts, Iterable):
        raise TypeError("key_contexts must be a sequence parallel to keys, a mapping or None, "
                        f"not a {type(key_contexts).__name__}")
    contexts = list(key_contexts)
    if len(contexts) != len(keys):
        raise ValueError("key_contexts must have the same length as keys")
    return contexts

"""``DataLoader.load_many``: many keys registered in one lock acquisition, one future of their values.

A friend of ``DataLoader``: it reads and writes the fields
``_loader_state.LoaderState`` declares (``DataLoader`` implements it), under the
loader's lock, and runs no user code under it except the loader's
``cache_map`` methods (the one exception the loader documents) and, for its
own dict, the keys' ``__hash__``/``__eq__`` (as ``load()``).

Guarantees:
- Every key is registered (answered from the cache, or queued) or none: even
  a ``BaseException`` from the cache map leaves no key cached without being
  queued, and the load count counts exactly the keys registered.
- The registries and the dispatch scope hear of the loader as for ``load()``
  (see ``_listeners``): once per queue, after the lock is released.
- ``cache_key_fn`` runs before the lock is taken; a failing ``cache_map`` is
  logged through the loader after it is released.
- The future of the list (a ``Many``'s) completes once every key has settled,
  with the values in key order, or fails with the first failed key in key
  order among those settled when it looks (a cancelled one as
  ``CancelledError``), unless ``return_exceptions``; keys all settled already
  (cached values) give a done future at once.

No per-key Python where one pass in C does (said once here; measured by
``tools/bench.py --micro`` and ``--value-cache``): the loader's own dict without ``cache_key_fn``
or key contexts, the common case, is read with one ``map`` of its ``get``
and written with one ``update``; the outcome of settled keys is read with
``map`` over their fields; and the list's future waits on one key at a time
(one done-callback per wait, not one per key: see ``Many``).
"""
from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Iterable, Mapping
from itertools import compress, count, repeat
from operator import attrgetter, is_
from typing import Any, Optional

from . import _load_local
from ._batch_shapes import KeyQueue
from ._compat import CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED
from ._dispatch_scope import current_scope
from ._future import Future, settle
from ._listeners import announce
from ._loader_state import Hearing, LoaderState
from ._new_futures import completed_future, failed_future, loader_future
from ._value_cache import MISSING

__all__ = ["Many", "call_each", "contexts_for", "load_many"]

_states = attrgetter("_state")
_exceptions = attrgetter("_exception")
_results = attrgetter("_result")


def load_many(loader: LoaderState, keys: Iterable[Any], key_contexts: Any,
              return_exceptions: bool) -> Future[list[Any]]:
    """``DataLoader.load_many`` (see its docstring for the arguments and errors)."""
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Iterable):
        raise TypeError(f"keys must be an iterable of keys, not a {type(keys).__name__}")
    if not isinstance(return_exceptions, bool):  # "no" would be truthy
        raise TypeError("return_exceptions must be a bool")
    keys = list(keys)
    local_found: Optional[list[Any]] = None  # the value cache's local tier's answer (see _load_local)
    asked = False
    if key_contexts is None and loader._dict_cache and loader._cache_key_fn is None and loader._batch \
            and loader._cache_enabled:
        if loader._local is not None and keys:
            shared = None
            if loader._local[2] is not None and not loader._cache:  # the tier's own futures (see _load_local)
                shared = _load_local.load_many_shared(loader, keys)
                if shared is not None and shared[1]:
                    return completed_future(shared[0])
            local_found = _load_local.ask(loader, keys) if shared is None else shared[0]
            asked = True
            if local_found is not None:
                if not loader._cache:  # none held: every key a hit makes no queue, no dispatch
                    registered = _load_local.load_many_hits(loader, keys, local_found)
                    if registered is not None:
                        hit_futures, failed = registered
                        # the lookup's own list is the values (a failed key: gather them as any)
                        return gathered(hit_futures, return_exceptions) if failed else completed_future(local_found)
                if not _load_local.any_hit(local_found):
                    local_found = None
            # some keys hit: the careful path registers them key by key
        if local_found is None:
            futures = _register_in_dict(loader, keys)
            if futures is not None:
                return gathered(futures, return_exceptions)
    contexts = contexts_for(keys, key_contexts)
    cks = [loader._cache_key(k) for k in keys] if loader._cache_enabled else [None] * len(keys)
    if loader._local is not None and not asked and keys:
        local_found = _load_local.ask(loader, cks)
    futures = []
    new = KeyQueue(loader._cache_key_fn is not None)
    cache_errors: list[tuple[str, Exception]] = []
    scope = current_scope()
    hearing: Optional[Hearing] = None
    with loader._lock:
        try:
            local_hits = _register_many_locked(loader, keys, cks, contexts, futures, new, cache_errors, local_found)
        finally:
            if not loader._batch:  # queued: counted with their queue (statistics())
                loader._count_locked(misses=len(new))
            elif new:
                hearing = loader._enqueue_locked(new, scope)
    for kind, error in cache_errors:
        loader._cache_failed(kind, error)
    if local_hits:
        _load_local.tell(loader, local_hits)
    if new and not loader._batch:
        call_each(loader, new)
    elif hearing is not None:
        announce(loader, hearing)
    return gathered(futures, return_exceptions)


def call_each(loader: LoaderState, new: KeyQueue) -> None:
    """``batch=False``: one batch call per key of *new*, now (outside the lock)."""
    call = loader._batch_call
    for i in range(len(new)):
        try:
            call.send(new.slice(i, i + 1))
        except BaseException as exc:
            call.abandon(new.slice(i + 1, len(new)), exc)
            raise


def _register_in_dict(loader: LoaderState, keys: list[Any]) -> Optional[list[Future[Any]]]:
    """The keys, in the loader's own dict (no ``cache_key_fn``, no key contexts, batching): their futures.

    One pass in C reads the dict; the misses get new futures, written with
    one ``update`` and queued with one ``extend`` each.  Returns None, having
    changed nothing, when the careful per-key path must decide: a key the
    dict cannot look up (unhashable, or its ``__eq__`` raises: that path names
    the key), or a key missed twice (the second load is a hit of the first).
    """
    scope = current_scope()
    lock = loader._lock
    hearing: Optional[Hearing] = None
    lock.acquire()
    try:
        cache = loader._cache
        try:
            found: list[Any] = list(map(cache.get, keys))
        except Exception:
            return None
        n_keys = len(keys)
        n_new = found.count(None)
        if not n_new:
            loader._count_locked(hits=n_keys)
            return found
        if n_new == n_keys:
            new_keys = keys
        else:
            missed = list(map(is_, found, repeat(None, n_keys)))
            new_keys = list(compress(keys, missed))
        try:
            if n_new > 1 and len(set(new_keys)) != n_new:
                return None
        except Exception:
            return None
        new = KeyQueue(False)
        new.keys = new_keys
        new.futures = new_futures = [loader_future(lock) for _ in range(n_new)]
        loader._count_locked(hits=n_keys - n_new)  # the new ones are counted with the queue
        hearing = loader._enqueue_locked(new, scope)
        cache.update(zip(new_keys, new_futures))  # queued first: a raising __hash__ leaves keys uncached
    finally:
        lock.release()
        if hearing is not None:  # (also when the update raised: the keys are queued)
            announce(loader, hearing)
    if n_new == n_keys:
        return new_futures
    for i, fut in zip(compress(count(), missed), new_futures):
        found[i] = fut
    return found


def _register_many_locked(loader: LoaderState, keys: list[Any], cks: list[Any], contexts: list[Any],
                          futures: list[Future[Any]], new: KeyQueue,
                          cache_errors: list[tuple[str, Exception]], local_found: Optional[list[Any]]) -> int:
    """The keys, under the loader's lock: each key's future (cached, settled from *local_found*, the
    value cache's local tier, or new in *new*) to *futures*; returns how many the local tier answered.

    Invariant: a key is in *futures* iff it is answered from the cache, or
    from the local tier (settled: nothing to queue), or in *new* (cached or
    not); even a ``BaseException`` from the cache map leaves no key cached
    without being settled or queued.
    """
    cache = loader._cache if loader._cache_enabled else None
    local_hits = hits = 0
    try:
        for key, ck, kc, value in zip(keys, cks, contexts, repeat(MISSING) if local_found is None else local_found):
            if cache is not None:
                try:
                    fut = cache.get(ck)
                except Exception as exc:  # a failing cache_map: a miss
                    fut = None
                    cache_errors.append(("read", exc))
                if fut is not None:
                    hits += 1
                    futures.append(fut)
                    continue
            if value is not MISSING:  # a hit of the local tier: settled, not queued
                fut = _load_local.settled_one(loader._lock, value)
                local_hits += 1
                futures.append(fut)
                if cache is not None:
                    try:
                        cache[ck] = fut
                    except Exception as exc:  # uncached, still answered
                        cache_errors.append(("write", exc))
                continue
            fut = loader_future(loader._lock)
            if cache is not None:
                try:
                    cache[ck] = fut
                except Exception as exc:  # uncached, still loaded
                    cache_errors.append(("write", exc))
            new.add(key, ck, kc, fut)
            futures.append(fut)
    finally:  # every key registered is counted, whatever raised
        loader._count_locked(hits=hits, local_hits=local_hits)
    return local_hits


def gathered(futures: list[Future[Any]], return_exceptions: bool) -> Future[list[Any]]:
    """The future of the list of *futures*' values, in order: done at once when they all are."""
    if not futures:
        return completed_future([])
    if set(map(_states, futures)) == {FINISHED}:  # every key settled (cached values): no callback
        errors = list(map(_exceptions, futures))
        if errors.count(None) == len(errors):
            return completed_future(list(map(_results, futures)))
        if not return_exceptions:
            return failed_future(next(exc for exc in errors if exc is not None))
        # a done future's fields read as result() would (the _states/_results getters' reads, below too):
        # no call per key
        return completed_future([fut._result if exc is None else exc for fut, exc in zip(futures, errors)])
    many = Many(futures, return_exceptions)
    out = many.out
    out._follow = many  # Drivable._follow (_sync_on_demand's seam): blocking on the list drives its keys
    many.look()
    return out


class Many:
    """Collects the outcomes of a ``load_many``'s futures into the list's future, in key order.

    It waits on one pending key at a time: ``look`` reads the keys in order
    from ``next``, settled ones directly, and at the first pending one adds
    itself as that future's one done-callback, then returns; that callback
    looks again from there.  A batch settles its keys before it runs their
    callbacks (``settle_many``), so a dispatch that settles every key costs
    one callback, not one per key.  One look runs at a time (one callback is
    registered at a time, and nothing is done after registering it), so the
    fields need no lock.

    ``futures`` (the keys' futures, None once the list's future is decided)
    is what a thread blocked on the list's future drives (``_sync_on_demand``).
    """

    __slots__ = ("futures", "next", "out", "return_exceptions", "values")

    def __init__(self, futures: list[Future[Any]], return_exceptions: bool) -> None:
        self.out: Future[list[Any]] = Future()
        self.futures: Optional[list[Future[Any]]] = futures
        self.values: list[Any] = [None] * len(futures)
        self.next = 0
        self.return_exceptions = return_exceptions

    def look(self, _done: Any = None) -> None:
        """Read the keys from ``next`` on; complete the list's future, or wait for the first pending key."""
        futures = self.futures
        if futures is None:
            return
        values = self.values
        for i in range(self.next, len(futures)):
            fut = futures[i]
            state = fut._state  # the fields result() reads, without its call and lock: one look per key
            if state is FINISHED:
                exc = fut._exception
                if exc is None:
                    values[i] = fut._result
                    continue
            elif state is CANCELLED or state is CANCELLED_AND_NOTIFIED:
                exc = cf.CancelledError()
            else:  # pending: wait for it (a done future runs the callback at once)
                self.next = i
                fut.add_done_callback(self.look)
                return
            if not self.return_exceptions:
                self.futures = None
                settle(self.out, None, exc)
                return
            values[i] = exc
        self.futures = None
        settle(self.out, values, None)


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

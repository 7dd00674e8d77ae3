"""A DataLoader in a forked child: what the parent's threads left behind.

gunicorn ``--preload``, uWSGI and Celery's prefork pool fork while the
parent's threads may be using a loader the child inherits (a process-global
one): one may be inside ``load()`` (the loader's lock held), another may be
running a batch, inline or on an executor.  In the child those threads do not
exist.  Every loader is ``_fork.watch``-ed; its ``_after_fork_in_child`` calls
``repair_in_child`` here.

Guarantees:
- Inside ``os.fork()`` nothing waits and no user code runs (no batch
  function, callback, ``cache_map`` method, key ``__hash__``/``__eq__``):
  the lock is tested without blocking, the cache (a dict) is only iterated.
- A loader whose lock a parent thread held at the fork works in the child:
  the lock is re-initialised in place (the futures that share it see the new
  one), and the queue, which that thread may have left halfway through an
  append, is dropped (the next load in the child makes a new one).
- The keys of a queue replaced above fail with a ``CancelledError`` that
  says so, and leave the cache, so a later load in the child loads them
  again.  Failing runs their callbacks, so it happens after the fork, on the
  repair thread (``_fork.soon``), never inside it.  Keys still queued in a
  loader whose lock was free stay queued: the child dispatches them.
- Keys the parent had in flight (their batch was running in a parent thread,
  or on a pool whose threads are gone) never complete by themselves in the
  child.  On an executor the library owns, the abandoned batch fails them on
  the repair thread (``Future._abandon_in_child``).  In every case, a child's
  thread that blocks on one (``result()``, ``concurrent.futures.wait``, a
  ``then`` chain or a ``gather`` through it: see ``_sync_on_demand``) fails it with a
  ``CancelledError`` instead of waiting for ever, and evicts it: lazily, on
  first use.  How such a key is known: the ticket of its queue (see
  ``_sync_on_demand``) records the process generation (``_fork.generation``) in
  which its loader took the queue; a pending future whose ticket was taken
  in another generation was dispatched by a parent.
- Not covered: a ``then`` future whose callback was running on a parent
  thread at the fork (its source is done; nothing in the child completes it).
- Nothing here touches the cached values inside ``os.fork()`` (no
  copy-on-write of the cache's pages in every child).
"""
from __future__ import annotations

import concurrent.futures as cf
from typing import Any, Optional

from . import _fork
from ._batch_shapes import KeyQueue
from ._future import Future, settle
from ._loader_state import LoaderState

__all__ = ["abandon", "repair_in_child"]


def repair_in_child(loader: LoaderState) -> None:
    """In a forked child, inside ``os.fork()``: make *loader* usable; fail a torn queue after the fork."""
    lock = loader._lock
    if lock.acquire(False):  # never blocks: a parent thread may own it for ever
        lock.release()
        return
    # The stdlib's own repair (threading calls it on its locks after a fork; a
    # private method of RLock, 3.9+): the one way to free a lock in place, so
    # the futures that share it see the freed lock.
    lock._at_fork_reinit()
    torn, old = loader._queue, loader._ticket
    loader._queue = loader._ticket = None  # the child's next load makes new ones
    loader._told = None
    if old is not None:
        old.taken_in = _fork.generation - 1  # taken by the parent (see abandon)
    if torn is None or not torn.futures:
        return
    batch = KeyQueue(True)
    cks = torn.cached_under()
    for i, fut in enumerate(torn.futures):  # keys and futures may differ in length by one
        ck = cks[i] if i < len(cks) else None
        fut._drivers = None  # the parent's blocked threads (Drivable._drivers; the loader's lock is reset)
        batch.add(ck, ck, None, fut)
    error = cf.CancelledError(f"{loader._label()}: this key was queued in the parent process while "
                              "a thread of the parent held the loader's lock at os.fork(); load it again")
    _fork.soon(lambda: loader._fail_keys(batch, error, None))


def abandon(loader: LoaderState, fut: Future[Any]) -> bool:
    """On a child's thread blocked on *fut*, a key the parent dispatched: fail it and evict it.

    Its ticket was taken (its batch began) in a parent process, and *fut* is
    still pending: that batch ran on a thread the child does not have.
    Called by ``_sync_on_demand`` instead of waiting for ever; the cache is searched
    for *fut* (only on this path, the child's first use of such a key).

    Returns:
        True (the future is done now).
    """
    error = cf.CancelledError(f"{loader._label()}: this key was in flight in the parent process at "
                              "os.fork(), and its batch does not run in the child; load it again")
    evict_error: Optional[Exception] = None
    with loader._lock:
        if loader._cache_enabled:
            cache = loader._cache
            try:
                found = [ck for ck, cached in cache.items() if cached is fut]
                for ck in found:
                    del cache[ck]
            except Exception as exc:  # a failing cache_map: the entry stays
                evict_error = exc
    if evict_error is not None:
        loader._cache_failed("delete", evict_error)
    settle(fut, None, error)
    return True

"""Surviving ``os.fork()``: objects that hold threads and locks (``track``/``watch``), and a lock's renewal.

There are two mechanisms, and this module is the first and offers the second:

- ``track`` and ``watch`` (below): the ScheduledExecutor's timer, the
  ElasticPool, the default executor's creation lock, RestartableWorker and
  PeriodicRefresher (``track``: locks taken before the fork, threads
  forgotten and locks rebuilt in the child); every DataLoader (``watch``:
  repaired in the child only).
- Plain ``os.register_at_fork(after_in_child=...)`` hooks, in the child
  only, for the value-cache tier, whose repair is to renew its locks and
  forget what the parent's threads owned (flights in the air, a near
  cache's listener): ``_breaker``, ``_single_flight`` and
  ``redis._near_cache`` register one per module, over their live objects;
  ``_cache_tier``'s and ``_value_cache``'s shared tables call
  ``renew_lock_in_child``, one hook per object.  No user code, no wait.

gunicorn ``--preload``, uWSGI and Celery's prefork pool fork after the
application has been imported, possibly while our threads hold a lock.  In
the child only the forking thread exists; a lock held by any other thread at
that moment stays held for ever.

Guarantees:
- Before the fork, the forking thread takes every tracked object's locks
  (``_before_fork``), so the child starts from a state no thread was in the
  middle of changing; the parent releases them (``_after_fork_in_parent``).
  This is safe because the library never calls user code, and so never
  calls ``os.fork()``, while it holds one of these locks; and no tracked lock
  is ever taken while another is held, so their order does not matter.
- In the child, ``_after_fork_in_child`` rebuilds locks and forgets threads,
  in the order the objects were tracked (after the ``watch``ed ones, see
  below).  It runs from our own
  ``os.register_at_fork`` hook, registered when this module is first
  imported; ``concurrent.futures.thread`` is imported first, so that its own
  hook (which repairs the standard library's global shutdown lock) runs
  before ours and a ``ThreadPoolExecutor`` a tracked object hands work to is
  usable by then.
- The child's hooks run no user code (no done-callback, no ``then``
  callback, no batch function, no ``cache_map`` method) and never wait on a
  lock: the child always gets out of ``os.fork()``.  What has to run for work
  the fork abandoned (the done-callbacks of a cancelled future, failing the
  keys of a loader's torn queue) is handed to ``soon`` and runs after the
  hooks, on one thread of the child's own (``dataloader-sync-fork-repair``),
  in the order it was handed over: a callback that blocks there (on a lock
  of the user's that a parent thread held) blocks that thread only.
- ``watch``ed objects (loaders: a process may make thousands, one per request
  and kind) cost one list append to track, nothing around the fork; their
  ``_after_fork_in_child`` runs before every ``track``ed object's (they start
  no thread, and must be repaired before any thread of the child may use
  them), and must not wait on their own locks (a parent thread may have
  held one: they test it without blocking).
- Objects are tracked through weak references: tracking keeps nothing alive.
"""
from __future__ import annotations

import concurrent.futures.thread  # noqa: F401  (its at-fork hook must run before ours; see above)
import itertools
import logging
import os
import threading
import weakref
from typing import Any, Callable

__all__ = ["renew_lock_in_child", "soon", "track", "watch"]

_LOGGER = logging.getLogger("dataloader_sync")

# Tracked objects by tracking order.  A dict of weak references (not a
# WeakSet) keeps the order.  _registry_lock guards _tracked; it is taken
# around the fork too, so tracking never races with one.
_tracked: dict[int, weakref.ref[Any]] = {}
_order = itertools.count()
_registry_lock = threading.Lock()

# Watched objects: weak references without callbacks (cheaper than track's),
# the dead ones dropped whenever the list has doubled since it was last
# pruned.  _watched_lock guards _watched and _prune_at; it is taken around the
# fork too, so the child never sees a list halfway through a prune.
_watched: list[weakref.ref[Any]] = []
_prune_at = 64
_watched_lock = threading.Lock()

# The process generation: 0 in a process that was not forked, one more in
# each child than in its parent (incremented first thing in the child).
generation = 0

# What the child's hooks left to the repair thread (see soon); only the
# forking thread touches it, inside the child's hooks.
_soon: list[Callable[[], object]] = []


def track(obj: Any) -> None:
    """Repair *obj* in every forked child (and lock it around each fork).

    *obj* has ``_after_fork_in_child()``, and may have ``_before_fork()`` and
    ``_after_fork_in_parent()`` (both or neither).
    """
    key = next(_order)
    ref = weakref.ref(obj, lambda _ref: _tracked.pop(key, None))
    with _registry_lock:
        _tracked[key] = ref


def watch(ref: weakref.ref[Any]) -> None:
    """Repair the object *ref* refers to in every forked child (no hooks around the fork).

    The object has ``_after_fork_in_child()``, run before every ``track``ed
    object's.  *ref* is a weak reference the caller keeps anyway (a loader's
    ticket holds one): watching costs one append.
    """
    global _prune_at
    with _watched_lock:
        _watched.append(ref)
        if len(_watched) > _prune_at:
            _watched[:] = [r for r in _watched if r() is not None]
            _prune_at = max(64, 2 * len(_watched))


def soon(fn: Callable[[], object]) -> None:
    """From a child's ``_after_fork_in_child``: run *fn* once the hooks are done, on the repair thread.

    For what must not run inside ``os.fork()``: user code (done-callbacks),
    and anything that takes a lock a parent thread may have held.  An
    exception from *fn* is logged.
    """
    _soon.append(fn)


def _repair(work: list[Callable[[], object]]) -> None:
    for fn in work:
        try:
            fn()
        except BaseException:  # one failing step must not stop the others
            _LOGGER.exception("completing work abandoned at a fork failed (%r)", fn)


def _alive() -> list[Any]:
    return [obj for obj in (ref() for ref in list(_tracked.values())) if obj is not None]


def _before_fork() -> None:
    _registry_lock.acquire()
    _watched_lock.acquire()
    for obj in _alive():
        before = getattr(obj, "_before_fork", None)
        if before is not None:
            before()


def _after_fork_in_parent() -> None:
    try:
        for obj in _alive():
            after = getattr(obj, "_after_fork_in_parent", None)
            if after is not None:
                after()
    finally:
        _watched_lock.release()
        _registry_lock.release()


def _after_fork_in_child() -> None:
    global _registry_lock, _watched_lock, generation
    generation += 1
    _registry_lock = threading.Lock()
    _watched_lock = threading.Lock()
    watched = [obj for obj in (ref() for ref in _watched) if obj is not None]
    # Watched objects first: their repair starts no thread, and a thread that
    # a tracked object's repair starts (a timer, then its pool's workers) may
    # use one at once -- and may even have the identity of the parent's thread
    # that held its re-entrant lock, and so seem to own it.
    for obj in watched + _alive():
        try:
            obj._after_fork_in_child()  # the at-fork protocol every watched object implements (see above)
        except Exception:  # one broken object must not leave the others broken
            _LOGGER.exception("repairing %r after fork failed", obj)
    work = _soon[:]
    del _soon[:]
    if work:
        # Started after every repair: the pools and timers it may hand work
        # to are the child's by now.
        threading.Thread(target=_repair, args=(work,), name="dataloader-sync-fork-repair",
                         daemon=True).start()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)


def renew_lock_in_child(owner: Any) -> None:
    """Give *owner* a new ``threading.Lock`` as its ``_lock`` in a forked child (a lock another thread
    held at the fork stays held there); *owner* is held by weak reference (the second mechanism above)."""
    if hasattr(os, "register_at_fork"):
        ref = weakref.ref(owner)
        os.register_at_fork(after_in_child=lambda: _renew_lock(ref))


def _renew_lock(ref: weakref.ref[Any]) -> None:
    owner = ref()
    if owner is not None:
        owner._lock = threading.Lock()

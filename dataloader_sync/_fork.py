"""One mechanism for surviving ``os.fork()``: objects that hold threads and locks.

Its users: the ScheduledExecutor's timer, the ElasticPool, the default
executor's creation lock, RestartableWorker and PeriodicRefresher.

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
  in the order the objects were tracked.  It runs from our own
  ``os.register_at_fork`` hook, registered when this module is first
  imported; ``concurrent.futures.thread`` is imported first, so that its own
  hook (which repairs the standard library's global shutdown lock) runs
  before ours and a ``ThreadPoolExecutor`` a tracked object hands work to is
  usable by then.
- Objects are tracked through weak references: tracking keeps nothing alive.
"""
from __future__ import annotations

import concurrent.futures.thread  # noqa: F401  (its at-fork hook must run before ours; see above)
import itertools
import logging
import os
import threading
import weakref
from typing import Any

__all__ = ["track"]

_LOGGER = logging.getLogger("dataloader_sync")

# Tracked objects by tracking order.  A dict of weak references (not a
# WeakSet) keeps the order.  _registry_lock guards _tracked; it is taken
# around the fork too, so tracking never races with one.
_tracked: dict[int, weakref.ref[Any]] = {}
_order = itertools.count()
_registry_lock = threading.Lock()


def track(obj: Any) -> None:
    """Repair *obj* in every forked child (and lock it around each fork).

    *obj* has ``_after_fork_in_child()``, and may have ``_before_fork()`` and
    ``_after_fork_in_parent()`` (both or neither).
    """
    key = next(_order)
    ref = weakref.ref(obj, lambda _ref: _tracked.pop(key, None))
    with _registry_lock:
        _tracked[key] = ref


def _alive() -> list[Any]:
    return [obj for obj in (ref() for ref in list(_tracked.values())) if obj is not None]


def _before_fork() -> None:
    _registry_lock.acquire()
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
        _registry_lock.release()


def _after_fork_in_child() -> None:
    global _registry_lock
    _registry_lock = threading.Lock()
    for obj in _alive():
        try:
            obj._after_fork_in_child()
        except Exception:  # one broken object must not leave the others broken
            _LOGGER.exception("repairing %r after fork failed", obj)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)

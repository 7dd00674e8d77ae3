"""Database connections of batches that run off a request's thread.

Django keeps one connection per alias per thread and closes a thread's
connections when *its* request ends (``request_finished`` →
``close_old_connections``).  A batch that runs on another thread — an
``await``'s batch on the event loop's default executor (ASGI), a tick of a
``ScheduledDataLoaderRegistry``, a loader with ``executor=`` — opens that
pool thread's own connection, and no request end ever closes it: pool
threads live on, and so would their connections, one per thread and alias,
idle or broken.

Guarantees:
- ``batch_connection(alias)`` wraps the queries of one ORM batch.  On a
  thread that is not serving a Django request (between ``request_started``
  and ``request_finished`` on that thread, for a request started without an
  ASGI scope: an ASGI request is served by no one thread), after the batch:
  a connection the batch opened is closed; one that was already open is
  closed if it is unusable or past ``CONN_MAX_AGE``
  (``close_if_unusable_or_obsolete``, what Django does at a request's end).
  A connection inside ``transaction.atomic()`` is never closed.
- On a thread serving a request nothing is closed: Django does it at the
  request's end, as for any query of the request.
- ``job_connections`` does the same around every job the core runs off its
  caller's thread (``_core/_job_hooks``), so a batch function the user wrote
  — plain ORM code, no ``batch_connection`` — leaves no connection behind
  either, for every alias it used.  Importing this module adds it (once):
  importing ``dataloader_sync.django`` does, which Django does at start-up
  for ``DataLoaderMiddleware`` in ``MIDDLEWARE``.  It costs each such job a
  look at the thread's connections, nothing per load, and nothing on a
  request's thread or before Django's settings are configured.
- Consequently a batch run off the request thread uses its own connection,
  outside the request's transaction: with ``ATOMIC_REQUESTS`` (or in any
  ``atomic()`` block of the request) it does not see the request's
  uncommitted writes.
"""
from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator
from typing import Any, Callable, Optional

from django.conf import settings
from django.core.signals import request_finished, request_started
from django.db import connections

from .._core import _job_hooks

__all__ = ["batch_connection", "job_connections", "serving_request"]

_STATE = threading.local()  # .requests: requests in progress on this thread (nested test clients count)


# The handler classes that sent request_started with an ASGI scope.  An ASGI
# request is served by no one thread: its sync parts run where asgiref puts
# them, and Django < 5.0's AsyncClient sends both signals on whichever thread
# of the loop's default executor is free (thread_sensitive=False), the pool
# the asyncio bridge's batches run on.  Counted per thread, those threads
# looked like request threads for good.  So only requests started without a
# scope (WSGI, the test Client) make a thread "serving"; the finish of a
# request whose handler class sent a scope is not counted either.
_ASGI_SENDERS: set[Any] = set()


def _started(sender: Any = None, **kwargs: Any) -> None:
    if "scope" in kwargs:
        _ASGI_SENDERS.add(sender)
        return
    _STATE.requests = getattr(_STATE, "requests", 0) + 1


def _finished(sender: Any = None, **kwargs: Any) -> None:
    if sender in _ASGI_SENDERS:
        return
    _STATE.requests = max(getattr(_STATE, "requests", 0) - 1, 0)


# Connected once, when this module is first imported (dispatch_uid makes a
# second connect a no-op); weak=False: module-level functions live forever.
request_started.connect(_started, weak=False, dispatch_uid="dataloader_sync.django.request_started")
request_finished.connect(_finished, weak=False, dispatch_uid="dataloader_sync.django.request_finished")


def serving_request() -> bool:
    """True when the calling thread is handling a Django request now."""
    return bool(getattr(_STATE, "requests", 0))


@contextlib.contextmanager
def batch_connection(alias: str) -> Iterator[None]:
    """Run the body's queries on *alias*, then leave no connection behind off a request thread (module notes)."""
    if serving_request():
        yield
        return
    connection = connections[alias]
    was_open = connection.connection is not None
    try:
        yield
    finally:
        if not connection.in_atomic_block:
            if not was_open:
                connection.close()
            else:
                connection.close_if_unusable_or_obsolete()


def job_connections() -> Optional[Callable[[], None]]:
    """A job hook (``_core/_job_hooks``): what to call after a job off a request's thread, or None.

    Before the job it notes which of the thread's connections are open; after
    it, each connection the job opened is closed, each other one closed if
    unusable or past ``CONN_MAX_AGE``, none inside ``atomic()`` (module notes).
    """
    if serving_request() or not settings.configured:
        return None
    was_open = frozenset(c.alias for c in connections.all(initialized_only=True) if c.connection is not None)
    return functools.partial(_close_after_job, was_open)


def _close_after_job(was_open: frozenset[str]) -> None:
    for connection in connections.all(initialized_only=True):
        if connection.in_atomic_block:
            continue
        if connection.alias in was_open:
            connection.close_if_unusable_or_obsolete()
        elif connection.connection is not None:
            connection.close()


_job_hooks.add(job_connections)  # once: add is idempotent

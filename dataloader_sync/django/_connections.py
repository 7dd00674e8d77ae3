"""Database connections of batches that run off a request's thread.

Django keeps one connection per alias per thread and closes a thread's
connections when *its* request ends (``request_finished`` →
``close_old_connections``).  A batch that runs on another thread — a tick of
a ``ScheduledDataLoaderRegistry``, a loader with ``executor=`` — opens that
pool thread's own connection, and no request end ever closes it: pool
threads live on, and so would their connections, one per thread and alias,
idle or broken.

Guarantees:
- ``batch_connection(alias)`` wraps the queries of one ORM batch.  On a
  thread that is not serving a Django request (between ``request_started``
  and ``request_finished`` on that thread), after the batch:
  a connection the batch opened is closed; one that was already open is
  closed if it is unusable or past ``CONN_MAX_AGE``
  (``close_if_unusable_or_obsolete``, what Django does at a request's end).
  A connection inside ``transaction.atomic()`` is never closed.
- On a thread serving a request nothing is closed: Django does it at the
  request's end, as for any query of the request.
- Consequently a batch run off the request thread uses its own connection,
  outside the request's transaction: with ``ATOMIC_REQUESTS`` (or in any
  ``atomic()`` block of the request) it does not see the request's
  uncommitted writes.
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from django.core.signals import request_finished, request_started
from django.db import connections

__all__ = ["batch_connection", "serving_request"]

_STATE = threading.local()  # .requests: requests in progress on this thread (nested test clients count)


def _started(**kwargs: Any) -> None:
    _STATE.requests = getattr(_STATE, "requests", 0) + 1


def _finished(**kwargs: Any) -> None:
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

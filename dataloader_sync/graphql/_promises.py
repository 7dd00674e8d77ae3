"""``promise.Promise`` values, as graphene-django returns them, turned into what the execution knows.

graphene-django's ``DjangoConnectionField`` (and other graphene 2-era add-ons)
wrap any thenable a resolver returns — a loader's Future included — in a
``promise.Promise`` and chain the connection's slicing on it with ``then``.
``promise.Promise`` is not a ``concurrent.futures.Future``, so without this
module the execution would complete the Promise object itself as the value
(``edges`` is null).  :func:`settle` is called where the execution first sees
a value (``complete_value``): a settled Promise gives its value or raises its
error at once; a pending one gives a ``dataloader_sync.Future`` completed by
the Promise's callbacks, which the execution then treats like any loader
future (deferred, batched with its level).

Guarantees:
- ``promise`` is imported only if it is installed (graphene-django depends on
  it); otherwise :data:`PromiseType` is a class no value has, and nothing
  else happens.
- The Promise's callbacks run where the Promise settles (the thread that
  completed the wrapped Future); they only complete a Future, which is
  thread-safe.
"""
from __future__ import annotations

from typing import Any

from .._core import Future

__all__ = ["PromiseType", "settle"]

try:
    from promise import Promise as _Promise
except ImportError:  # pragma: no cover - exercised only without promise installed

    class _Promise:  # type: ignore[no-redef]
        """Stands in for ``promise.Promise`` when it is not installed: no value is one."""


#: ``promise.Promise`` (exactly that class: graphene-django creates it), or a
#: class no value has.
PromiseType: type = _Promise


def settle(promise: Any) -> Any:
    """The value of a settled Promise, or a Future of a pending one's.

    Args:
        promise: a ``promise.Promise``.

    Returns:
        The fulfilled value, or a ``dataloader_sync.Future`` that the
        Promise's callbacks complete.

    Raises:
        Exception: the rejection reason of a rejected Promise.
    """
    if promise.is_fulfilled:
        return promise.value
    if promise.is_rejected:
        raise promise.reason
    future: Future[Any] = Future()
    promise.done(future.set_result, future.set_exception)
    return future

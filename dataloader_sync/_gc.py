"""tune_gc: the cyclic-GC settings for a server process, applied once at startup.

A request that batches its loads keeps a level's futures and waiting fields
alive until the level completes, so CPython's cyclic GC (which counts
allocations of container objects minus deallocations) runs many young
collections per request, and every few of those an older one that walks
every object the process imported: the schema, the ORM, the framework.
Neither finds garbage: a request's objects are freed by reference counting.

Two standard-library settings remove most of that cost:

- ``gc.freeze()`` once the application is imported moves every object alive
  then into a permanent generation that collections never walk (Python
  3.7+; its documentation recommends it before ``fork()`` too, so workers
  share those pages instead of copying them when a collection touches them);
- a higher first threshold (``gc.set_threshold(100_000, ...)`` instead of
  700) lets a request's short-lived objects die before a collection looks at
  them.

Guarantees:
- Only those two settings change; the older generations' thresholds stay,
  and cycles are still collected (only less often; garbage made during the
  imports is collected before the freeze, so it is not kept for good).
- Idempotent in effect; call it from the main thread at startup (gunicorn's
  ``post_fork`` or ``when_ready`` hook, Django's ``wsgi.py`` after
  ``get_wsgi_application()``, Flask after ``create_app()``).
"""
from __future__ import annotations

import gc
from typing import Optional

__all__ = ["tune_gc"]

#: The first threshold tools/bench.py measures as "tuned".
DEFAULT_THRESHOLD = 100_000


def tune_gc(*, threshold: Optional[int] = DEFAULT_THRESHOLD, freeze: bool = True) -> tuple[int, int, int]:
    """Freeze the heap built so far and raise the cyclic GC's first threshold.

    Call it once the application is imported, before serving requests (in a
    pre-fork server: in the master before forking, or in each worker right
    after the fork).

    Args:
        threshold: the new first-generation threshold (CPython's default is
            700), or None to leave the thresholds as they are.
        freeze: collect once, then ``gc.freeze()`` every object alive now, so
            later collections skip it.

    Returns:
        The thresholds before the call (``gc.get_threshold()``), for a caller
        that wants to restore them with ``gc.set_threshold(*previous)``.

    Raises:
        TypeError: threshold is not an int or None; freeze is not a bool.
        ValueError: threshold is not > 0 (use ``gc.disable()`` to turn the
            cyclic GC off; this helper does not).

    Thread-safety: call from one thread at startup; it changes process-wide
    settings.
    """
    if not isinstance(freeze, bool):  # freeze="false" from a config file would be truthy
        raise TypeError("freeze must be a bool")
    if threshold is not None:
        if isinstance(threshold, bool) or not isinstance(threshold, int):
            raise TypeError("threshold must be an int or None")
        if threshold <= 0:
            raise ValueError("threshold must be > 0")
    previous = gc.get_threshold()
    if freeze:
        gc.collect()
        gc.freeze()
    if threshold is not None:
        gc.set_threshold(threshold, *previous[1:])
    return previous

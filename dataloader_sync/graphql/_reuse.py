"""A loader that outlives its request: one warning per loader.

A module-global ``DataLoader`` (or registry) serves one viewer's cached values
to the next request — the classic DataLoader leak.  Each execution checks,
once per loader it dispatches for the first time, whether that loader was
last used by another execution *and* still holds cached values beyond the
keys this execution just queued; if so it logs one WARNING for that loader
(never again for it), naming it and pointing at the per-request helpers.

"Another execution" means one with another ``context_value``: operations that
share a request's context (graphene-django's batched queries, several
operations run by one view on one request) may share its loaders.  An
execution without a context counts as its own.  A loader cleared with
``clear_all()`` between requests holds nothing and is not reported.

A loader that a later execution only reads from its cache (every key a hit,
the common case of a module-level loader) is seen too: when an execution
ends, each loader it used gets a hook on its next load
(``_core.watch_next_load``), which asks which execution that load runs in
(the current dispatch scope) and checks the loader against it.  A load made
outside any execution keeps the hook for the next one.

Guarantees:
- Cost: one check per loader per execution (a lock, a weak-dictionary look-up
  and the loader's cache size), none per load: the hook is set once per
  loader when an execution ends, and heard by the loader's first load after
  it (which takes the loader's general path, once).
- Loaders that keep nothing between requests are never reported: ``cache=False``
  (an empty cache) and loaders given a ``value_cache`` (the shared tier is
  the cache, with its own invalidation).
- Thread-safe: ``_lock`` guards ``_owners`` and ``_warned``; the loader's own
  lock is taken to read its cache size (as its ``cache_map`` methods are
  documented to run under it); no user code runs under ``_lock``.
"""
from __future__ import annotations

import logging
import threading
import weakref
from typing import Any

from .._core import cached_beyond_queue, current_scope, watch_next_load

__all__ = ["check_reuse", "request_of", "watch_for_reuse"]

_LOGGER = logging.getLogger("dataloader_sync")

#: The warning, with the loader's name (or repr) for %s.
MESSAGE = (
    "DataLoader %s is used by a second GraphQL execution while it still holds cached values from an"
    " earlier one: one request's data can be served to another. Create loaders per request"
    " (dataloader_sync.flask.DataLoaders, dataloader_sync.django.DataLoaderMiddleware, or a"
    " registry made in your view's context), or clear_all() them between requests."
)

# _lock guards _owners (loader -> _Owner of the execution that last used it)
# and _warned (loaders already reported).
_lock = threading.Lock()
_owners: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_warned: weakref.WeakSet[Any] = weakref.WeakSet()


class _Id:
    """Stands for a context without weakref support (a dict): its id, compared by ``is_request``.

    Never the context itself: ``_owners`` holds its values strongly, and a
    per-request context usually holds the request's loaders, so a strong
    reference would keep every request's loaders (and their caches) alive
    for good.  An id may be reused by a later context once this one is
    freed; that later request then looks like the same one and is not
    reported — a missed warning, never a leak or a false one.
    """

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = id(value)

    def is_request(self, request: Any) -> bool:
        return self.value == id(request)


class _Weak:
    __slots__ = ("ref",)

    def __init__(self, request: Any) -> None:
        self.ref = weakref.ref(request)

    def is_request(self, request: Any) -> bool:
        return self.ref() is request


def request_of(context_value: Any, execution: Any) -> Any:
    """What stands for "the same request": its context, or the execution when there is none.

    Returns:
        The object to pass to :func:`check_reuse`.
    """
    return execution if context_value is None else context_value


def _ref(request: Any) -> Any:
    # The owner is held weakly when the object allows it, else by id (see _Id).
    try:
        return _Weak(request)
    except TypeError:
        return _Id(request)


def check_reuse(loader: Any, request: Any) -> None:
    """Record that *request* uses *loader*; warn once if the loader holds another request's values.

    Args:
        loader: a ``DataLoader`` an execution dispatches for the first time.
        request: :func:`request_of` the execution.
    """
    try:
        with _lock:
            previous = _owners.get(loader)
            if previous is not None and previous.is_request(request):
                return
            _owners[loader] = _ref(request)
            suspect = previous is not None and loader not in _warned
        if not suspect or not cached_beyond_queue(loader):
            return
        with _lock:
            if loader in _warned:
                return
            _warned.add(loader)
    except TypeError:  # not weak-referenceable or not hashable: nothing to track
        return
    _LOGGER.warning(MESSAGE, loader.name or repr(loader))


def watch_for_reuse(dispatched: Any, reused: Any) -> None:
    """An execution ends: hook the next load of each caching loader it used (see the module notes)."""
    for loaders in (dispatched, reused):
        for loader in loaders:
            watch_next_load(loader, on_next_load)


def on_next_load(loader: Any) -> bool:
    """A loader's next-load hook: check it against the execution the load runs in; False (keep the
    hook) outside any execution."""
    run_ref = getattr(current_scope(), "run", None)
    run = None if run_ref is None else run_ref()
    if run is None:
        return False
    if loader not in run.seen:
        run.reused[loader] = None
    check_reuse(loader, run.request)
    return True


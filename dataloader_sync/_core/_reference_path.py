"""The reference path: a plain version of each fast-path step, and the one place that chooses between them.

Three steps of every load are written twice.  The fast copies sit where
they run and are what the package uses; the plain versions below say the
same rule once, generally, in the order a reader would (as asyncio keeps
its readable ``_PyFuture`` beside ``_CFuture``):

  ==============  ================================================  ==============================
  step            fast copies (where they run)                      plain version (here)
  ==============  ================================================  ==============================
  enqueue         ``DataLoader.load`` (its own path for a plain     ``load``, ``load_any``: cache
  ("stamp,        loader, inline), ``_load_any.load_any`` (the      lookup, a future, then always
  append, tell")  common case of ``_enqueue_locked`` inline, and    ``DataLoader._enqueue_locked``
                  ``_listeners.heard_locked``'s first test)          (which always asks
                                                                    ``heard_locked``)
  make a future   ``Future.__init__``'s stores copied in            ``new_future``: ``Future.__init__``,
                  ``_new_futures.loader_future``, in ``load()``     then the lock protocol's sharing
                  and in ``Future.then``                            state (``loader_future``, ``then``)
  settle          ``Future._settle``; ``_future_lock``'s            ``complete_locked``: one future,
                  ``_settle_many`` (``_settle``'s steps inline,     its lock held; ``settle`` and
                  for a batch under one acquisition)                ``settle_many`` call it per future
  ==============  ================================================  ==============================

``DATALOADER_SYNC_REFERENCE_PATH=1`` in the environment when the package is
imported routes every call through the plain versions (``use(True)``, run
once at the end of this module's import): the fast functions are replaced,
where they are bound, by their plain twins — a class attribute
(``DataLoader.load``, ``Future.then``, ``Future._settle``) or a module
global of any ``dataloader_sync`` module (every ``from ... import`` of
``settle``, ``settle_many``, ``loader_future``, ``load_any``).  Without the
variable nothing here runs at import: the fast path is exactly the code it
would be without this module (no flag tested per call, no extra call).
``.ci/python-matrix`` runs the whole suite once with the variable set, and
``tests/test_reference_path.py`` runs scenarios both ways in one process
(``use``) and compares what they did: that test, not a comment, keeps the
copies in step.

Any other value of the variable than ``""``, ``"0"`` or ``"1"`` is an
error at import (``ValueError`` naming it).  Switching at run time
(``use``) is for tests: it rebinds module globals and class attributes, so
loaders in use by other threads meanwhile see one path or the other per
call, never a mix within one call.

Guarantees: each plain version has its fast copy's observable behaviour —
values, errors, the cache and queue contents, the counters, the tickets, who
hears of a queue and when, the lock each future uses, every future of a
batch settled before any of its done-callbacks runs — and only its speed
differs.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import copy_context
from typing import Any, Callable, Optional

from . import _asyncio_bridge as _bridge
from . import _dataloader, _future, _future_lock, _load_any, _new_futures
from ._batch_shapes import KeyQueue
from ._compat import FINISHED, PENDING, RUNNING
from ._dispatch_scope import current_scope
from ._future import Future, _Chain
from ._listeners import announce
from ._load_any import check_hashable, unhashable
from ._load_local import load_one
from ._loader_cache import heard_next_load
from ._loader_state import Hearing, LoaderState
from ._new_futures import LoaderFuture

__all__ = ["ENABLED", "VARIABLE", "complete_locked", "enabled_in", "load", "load_any", "loader_future",
           "new_future", "routes", "settle", "settle_many", "then", "use", "using"]

#: The environment variable that routes every call through the plain versions.
VARIABLE = "DATALOADER_SYNC_REFERENCE_PATH"


def enabled_in(environ: Mapping[str, str]) -> bool:
    """True when *environ* (a mapping, as ``os.environ``) asks for the reference path.

    Raises:
        ValueError: the variable holds anything but ``""``, ``"0"`` or ``"1"``.
    """
    value = environ.get(VARIABLE, "")
    if value not in ("", "0", "1"):
        raise ValueError(f"{VARIABLE} must be 1 (the reference path) or 0 or unset (the fast path), got {value!r}")
    return value == "1"


#: Whether the package was imported with the reference path switched on.
ENABLED = enabled_in(os.environ)


# -- make a future ----------------------------------------------------------------------------
def new_future(cls: type[Future[Any]], shared: Any) -> Any:
    """A pending future of class *cls* (``Future`` or a subclass), sharing the loader lock *shared*, if any.

    ``Future.__init__`` (a lock of its own), then, with *shared*, the lock
    protocol's sharing state (``_future_lock``): its lock is *shared*.
    """
    fut = cls.__new__(cls)
    Future.__init__(fut)
    if shared is not None:
        fut._lock = shared
    fut._shared = shared
    return fut


def loader_future(lock: Any) -> Future[Any]:
    """``_new_futures.loader_future``: a loader's pending future, sharing its lock."""
    fut: Future[Any] = new_future(LoaderFuture, lock)
    return fut


def then(self: Future[Any], fn: Callable[[Any], Any]) -> Any:
    """``Future.then``: a ``_Chain`` following *self*, sharing the lock *self* was made to share.

    Raises:
        TypeError: ``fn`` is not callable.
    """
    if not callable(fn):
        raise TypeError("fn must be callable")
    out: _Chain = new_future(_Chain, self._shared)
    out._follow = self
    out._fn = fn
    out._context = copy_context()
    self._add_chain(out)
    return out


# -- enqueue ----------------------------------------------------------------------------------
def load(self: Any, key: Any, key_context: Any = None) -> Future[Any]:
    """``DataLoader.load``: the next-load hook if one is set, then ``load_any`` for every loader."""
    if self._next_load is not None:
        heard_next_load(self)
    return load_any(self, key, key_context)


def load_any(loader: LoaderState, key: Any, key_context: Any) -> Future[Any]:
    """``_load_any.load_any``: look the key up, make its future, cache it, queue it (``_enqueue_locked``).

    Raises:
        TypeError: the key (or its cache key) is not hashable.
    """
    ck = None
    if loader._cache_enabled:
        ck = key if loader._cache_key_fn is None else loader._cache_key_fn(key)
        if not loader._dict_cache:
            check_hashable(ck)
        if loader._local is not None:
            hit = load_one(loader, ck)
            if hit is not None:
                return hit
    cache_error = None
    hearing: Optional[Hearing] = None
    with loader._lock:
        if loader._cache_enabled:
            try:
                cached = loader._cache.get(ck)
            except Exception as exc:
                if loader._dict_cache:
                    raise unhashable(ck) from None
                cached, cache_error = None, ("read", exc)
            if cached is not None:
                loader._count_locked(hits=1)
                return cached
        if not loader._batch:
            loader._count_locked(misses=1)
        fut = loader_future(loader._lock)
        if loader._cache_enabled:
            try:
                loader._cache[ck] = fut
            except Exception as exc:
                cache_error = ("write", exc)
        one = KeyQueue.one(key, ck, key_context, fut, loader._cache_key_fn is not None)
        if loader._batch:
            hearing = loader._enqueue_locked(one, current_scope())
    if cache_error is not None:
        loader._cache_failed(*cache_error)
    if not loader._batch:
        loader._batch_call.send(one)
    elif hearing is not None:
        announce(loader, hearing)
    return fut


# -- settle -----------------------------------------------------------------------------------
def complete_locked(fut: Any, result: Any, exception: Optional[BaseException]) -> bool:
    """Complete *fut*, whose lock the caller holds, unless it is done already; True if it did.

    A future that followed another lets go of it (see ``Future._settle``).
    """
    if fut._state is not PENDING and fut._state is not RUNNING:
        return False
    fut._result = result
    fut._exception = exception
    fut._follow = fut._drivers = None
    fut._finish_locked(FINISHED)
    return True


def settle(fut: Any, result: Any, exception: Optional[BaseException]) -> bool:
    """``Future._settle``: complete *fut* unless done, under its lock, then run its done-callbacks."""
    lock = fut._acquire()
    try:
        done = complete_locked(fut, result, exception)
    finally:
        lock.release()
    if done and fut._done_callbacks is not None:
        fut._invoke_callbacks()
    return done


def settle_many(lock: Any, futures: Sequence[Any], values: list[Any]) -> None:
    """``_future_lock.settle_many``: settle each future with its value (an exception instance fails it).

    In the fast copy's order: first the futures that share *lock* (their
    loader's), each completed under its lock, none of their done-callbacks
    run yet; then each other future (one that took a lock of its own) by
    ``settle``, its callbacks at once; then the callbacks of the first ones,
    in order.  The first ``BaseException`` that is not an ``Exception`` a
    callback raises propagates once every callback ran; the event loops
    waiting on the futures are woken once, at the end.
    """
    token = _bridge.hold() if _bridge.awaited else None
    try:
        called = []
        apart = []
        for fut, value in zip(futures, values):
            failed = isinstance(value, BaseException)
            result, exception = (None, value) if failed else (value, None)
            if fut._lock is not lock:  # it took a lock of its own (it cannot while the loader holds lock)
                apart.append((fut, result, exception))
                continue
            held = fut._acquire()
            try:
                done = complete_locked(fut, result, exception)
            finally:
                held.release()
            if done and fut._done_callbacks is not None:
                called.append(fut)
        escaped: Optional[BaseException] = None
        for fut, result, exception in apart:
            try:
                settle(fut, result, exception)
            except BaseException as exc:
                if escaped is None:
                    escaped = exc
        for fut in called:
            try:
                fut._invoke_callbacks()
            except BaseException as exc:
                if escaped is None:
                    escaped = exc
        if escaped is not None:
            raise escaped
    finally:
        if token is not None:
            _bridge.release(token)


# -- the one place that chooses ---------------------------------------------------------------
#: Each fast function, by where it is defined, and its plain twin (``use`` rebinds every binding of it).
_FAST: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "DataLoader.load": (_dataloader.DataLoader.load, load),
    "_load_any.load_any": (_load_any.load_any, load_any),
    "_new_futures.loader_future": (_new_futures.loader_future, loader_future),
    "Future.then": (_future.Future.then, then),
    "Future._settle": (_future.Future._settle, settle),
    "_future_lock.settle_many": (_future_lock.settle_many, settle_many),
}

#: The classes whose attributes bind a fast function (every module global is looked at too).
_CLASSES = (_dataloader.DataLoader, _future.Future)


def routes() -> dict[str, tuple[Callable[..., Any], Callable[..., Any]]]:
    """Each step's ``(fast, plain)`` pair of functions, by the fast one's name (a copy)."""
    return dict(_FAST)


def _bindings() -> Iterator[tuple[Any, str, Any]]:
    """``(owner, name, value)`` of every class attribute and every ``dataloader_sync`` module global."""
    for cls in _CLASSES:
        for name, value in list(vars(cls).items()):
            yield cls, name, value
    for module_name, module in list(sys.modules.items()):
        if module is None or module_name == __name__ or not (
                module_name == "dataloader_sync" or module_name.startswith("dataloader_sync.")):
            continue
        for name, value in list(vars(module).items()):
            yield module, name, value


_current = False


def use(reference: bool) -> None:
    """Route every call through the plain versions (*reference* True) or the fast copies (False).

    Rebinds each binding of one path's functions (``_FAST``) to the other's:
    the attributes of ``DataLoader`` and ``Future``, and the globals of every
    ``dataloader_sync`` module imported so far (a module imported later
    imports names already rebound).
    """
    global _current
    swap = {id(pair[1 - reference]): pair[reference] for pair in _FAST.values()}
    for owner, name, value in _bindings():
        if id(value) in swap:
            setattr(owner, name, swap[id(value)])
    _current = reference


@contextmanager
def using(reference: bool) -> Iterator[None]:
    """``use(reference)`` for the ``with`` block, then the path in use before (for tests)."""
    before = _current
    use(reference)
    try:
        yield
    finally:
        use(before)


if ENABLED:
    use(True)

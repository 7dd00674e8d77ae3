"""Instrumentation: hooks around a loader's dispatches and batch-function calls.

java-dataloader's ``DataLoaderInstrumentation``, for threads: a loader calls
``begin_dispatch(loader)`` when a dispatch starts and ``begin_batch(loader,
keys, environment)`` just before each call of its batch function.  Either may
return a context object; its ``on_completed(result, error)`` is called once
when that dispatch or batch call finishes.  A loader with a ``value_cache=``
also calls ``value_cache_lookup(loader, hits, misses)`` once per lookup (one
per dispatch), before the misses go to the batch function, and as
``(hits, 0)`` once per load-time lookup of the cache's local tier that hit
(``_load_local``: its misses are told by the dispatch's).

Guarantees:
- Zero cost when unused: a loader without an instrumentation tests one
  attribute per dispatch and per batch call, and nothing per ``load()``.
- ``on_completed`` is called exactly once per context returned: a dispatch's
  when ``dispatch()`` returns (with its ``DispatchResult``) or raises; a
  batch's when its keys are decided, before their futures are completed
  (with the list of values, one per key, per-key ``Exception`` instances
  included, and ``error`` None; or with ``result`` None and the error that
  failed the whole batch: the function raised, its Future failed or was
  cancelled, or its result could not be matched to the keys).  For a batch
  function that returns a Future, that is when the Future completes, on the
  thread that completes it.
- ``begin_batch`` runs on the dispatching thread, inside the contextvars
  context the batch function will run in (a copy of the dispatching thread's
  context): context variables it sets (OpenTelemetry's current span, say)
  are seen by the batch function, also on an ``executor=`` thread, and never
  leak back into the dispatching thread.
- An instrumentation that raises (``Exception``) is logged on the
  ``dataloader_sync`` logger and ignored: it never fails a load, a dispatch
  or another instrumentation of a chain.
- No hook is called under a loader's lock.
- ``value_cache_lookup`` is optional: an instrumentation without it (duck
  typed, written before it existed) is simply not told.
- A *context instrumentation* (``set_context_instrumentation``) is added to
  every registry created in that ``contextvars`` context, after the
  registry's own: how a debugging tool (the django-debug-toolbar panel) sees
  one request's loaders without the application's registry factory knowing
  of it.  Creating a registry costs one ``ContextVar.get`` more; loads,
  dispatches and batch calls cost nothing more.
"""
from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Optional

from ._core import (
    BatchLoaderEnvironment,
    DataLoaderInstrumentationContext,
    begin_batch,
    begin_dispatch,
    check_instrumentation,
    completed,
    value_cache_lookup,
)

if TYPE_CHECKING:  # typing only; the loader's module does not import this one (it uses _instrumentation_seam)
    from ._core import DataLoader

__all__ = ["ChainedInstrumentation", "DataLoaderInstrumentation", "DataLoaderInstrumentationContext"]

_LOGGER = logging.getLogger("dataloader_sync")


class DataLoaderInstrumentation:
    """Base class of loader instrumentations; every hook does nothing by default.

    Subclass it and override the hooks you need.  A hook returns None (nothing
    to be told) or an object with ``on_completed(result, error)``.  Give it
    to ``DataLoader(instrumentation=...)``, or to a registry's
    ``instrumentation=`` for every loader registered without its own.

    Hooks may be called from any thread, also concurrently: an instrumentation
    shared by loaders must be thread-safe.  An exception raised by a hook is
    logged and ignored.
    """

    def begin_dispatch(self, loader: DataLoader[Any, Any]) -> Optional[DataLoaderInstrumentationContext]:
        """Called when ``loader`` starts a dispatch (also one with nothing queued).

        Returns:
            None, or a context told when the dispatch call returns.
        """
        return None

    def begin_batch(
        self,
        loader: DataLoader[Any, Any],
        keys: list[Any],
        environment: Optional[BatchLoaderEnvironment],
    ) -> Optional[DataLoaderInstrumentationContext]:
        """Called just before ``loader``'s batch function is called with ``keys``.

        With ``max_batch_size`` one dispatch makes several batch calls, each
        with its own ``begin_batch``.  ``keys`` is the list the batch function
        receives (do not change it).

        Args:
            loader: the loader.
            keys: the keys of this call, in order.
            environment: the ``BatchLoaderEnvironment`` of this call, or None
                when the loader was made without ``pass_env=True``.

        Returns:
            None, or a context told when the batch's keys are decided.
        """
        return None

    def value_cache_lookup(self, loader: DataLoader[Any, Any], hits: int, misses: int) -> None:
        """Called once per lookup of ``loader``'s ``value_cache`` (one ``get_values`` per dispatch).

        It runs after the lookup, before the hits are settled and the misses
        go to the batch function (whose ``begin_batch`` follows).  A lookup
        that failed (the cache raised; logged) counts every key as a miss, as
        the loader's statistics do.  A load-time lookup of the cache's local
        tier (``get_local_values``) that hit is told too, as ``(hits, 0)``,
        after its hits are settled; its misses are told by the dispatch.

        Args:
            loader: the loader.
            hits: keys the value cache answered.
            misses: keys that go to the batch function.
        """

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class _ChainedContext:
    __slots__ = ("contexts",)

    def __init__(self, contexts: list[DataLoaderInstrumentationContext]) -> None:
        self.contexts = contexts

    def on_completed(self, result: Any, error: Optional[BaseException]) -> None:
        for context in self.contexts:
            completed(context, result, error)


def _chain(contexts: list[Optional[DataLoaderInstrumentationContext]]) -> Optional[DataLoaderInstrumentationContext]:
    live = [c for c in contexts if c is not None]
    if not live:
        return None
    if len(live) == 1:  # the common case: no wrapper
        return live[0]
    return _ChainedContext(live)


class ChainedInstrumentation(DataLoaderInstrumentation):
    """Several instrumentations as one: each hook calls them in the given order.

    Contexts are told ``on_completed`` in the same order.  One that raises
    is logged and skipped; the others still run.  Thread-safe if its parts are.

    Args:
        instrumentations: the instrumentations, in call order.

    Raises:
        TypeError: an element lacks ``begin_dispatch`` or ``begin_batch``.
    """

    def __init__(self, instrumentations: Iterable[DataLoaderInstrumentation]) -> None:
        if not isinstance(instrumentations, Iterable):  # e.g. one instrumentation instead of a list
            raise TypeError(f"instrumentations must be an iterable of DataLoaderInstrumentation, "
                            f"got {type(instrumentations).__name__}")
        items = list(instrumentations)
        for i, item in enumerate(items):
            check_instrumentation(item, f"instrumentations[{i}]")
            if item is None:
                raise TypeError(f"instrumentations[{i}] must be a DataLoaderInstrumentation, not None")
        self._instrumentations = tuple(items)

    @property
    def instrumentations(self) -> tuple[DataLoaderInstrumentation, ...]:
        return self._instrumentations

    def begin_dispatch(self, loader: DataLoader[Any, Any]) -> Optional[DataLoaderInstrumentationContext]:
        return _chain([begin_dispatch(i, loader) for i in self._instrumentations])

    def begin_batch(
        self,
        loader: DataLoader[Any, Any],
        keys: list[Any],
        environment: Optional[BatchLoaderEnvironment],
    ) -> Optional[DataLoaderInstrumentationContext]:
        return _chain([begin_batch(i, loader, keys, environment) for i in self._instrumentations])

    def value_cache_lookup(self, loader: DataLoader[Any, Any], hits: int, misses: int) -> None:
        for i in self._instrumentations:
            value_cache_lookup(i, loader, hits, misses)

    def __repr__(self) -> str:
        return f"ChainedInstrumentation({list(self._instrumentations)!r})"


# -- the context instrumentation: added to the registries created in a context -----------------
_context_instrumentation: contextvars.ContextVar[Optional[DataLoaderInstrumentation]] = contextvars.ContextVar(
    "dataloader_sync_context_instrumentation", default=None)


def set_context_instrumentation(
        instrumentation: Optional[DataLoaderInstrumentation]) -> contextvars.Token[Optional[DataLoaderInstrumentation]]:
    """Make every registry created in this context from now on add *instrumentation* to its own.

    Its loaders registered without an instrumentation of their own are then
    told (a loader's own instrumentation still wins, as with the registry's).
    If it has ``registry_created(registry)``, that is called with each such
    registry, from the registry's ``__init__`` (before its fields are set:
    keep a reference, use it later); one that raises is logged and ignored.

    Returns:
        The token for ``reset_context_instrumentation``.
    """
    return _context_instrumentation.set(check_instrumentation(instrumentation))


reset_context_instrumentation = _context_instrumentation.reset


def for_new_registry(registry: object,
                     instrumentation: Optional[DataLoaderInstrumentation]) -> Optional[DataLoaderInstrumentation]:
    """The instrumentation *registry* (being created) uses: *instrumentation* plus the context's, if any."""
    extra = _context_instrumentation.get()
    if extra is None:
        return instrumentation
    hook = getattr(extra, "registry_created", None)
    if hook is not None:
        try:
            hook(registry)
        except Exception:
            _LOGGER.exception("instrumentation %r raised in registry_created; ignored", extra)
    return extra if instrumentation is None else ChainedInstrumentation([instrumentation, extra])


"""The loader's side of instrumentation: the seam, and calling a hook safely.

``DataLoader`` and its batch call see an instrumentation only through
``InstrumentationHooks`` (the two hooks every instrumentation has) and the
functions below, which call a hook, log what it raises and ignore it.  The
public base classes (``DataLoaderInstrumentation``, ``ChainedInstrumentation``)
live in ``_instrumentation``, whose hooks are typed with ``DataLoader``: the
loader never imports that module, so the two do not import each other, not
even for typing.

Guarantees:
- A hook that raises an ``Exception`` is logged on the ``dataloader_sync``
  logger and ignored; it never fails a load, a dispatch or another hook.
- ``value_cache_lookup`` is optional: an instrumentation without it is simply
  not told.
"""
from __future__ import annotations

import logging
from typing import Any, Optional, Protocol

from ._batch_shapes import BatchLoaderEnvironment

__all__ = ["DataLoaderInstrumentationContext", "InstrumentationHooks"]

_LOGGER = logging.getLogger("dataloader_sync")


class DataLoaderInstrumentationContext(Protocol):
    """What ``begin_dispatch`` / ``begin_batch`` may return: told once how the step ended."""

    def on_completed(self, result: Any, error: Optional[BaseException]) -> None:
        """Called once when the dispatch or batch call finishes.

        Args:
            result: a dispatch's ``DispatchResult``; a batch's values, one per
                key (per-key ``Exception`` instances included); None on error.
            error: None on success; else the exception that failed the
                dispatch or the whole batch.
        """


class InstrumentationHooks(Protocol):
    """What a loader calls on its instrumentation (a ``DataLoaderInstrumentation`` has both).

    ``loader`` is the ``DataLoader`` itself; it is ``Any`` here so that this
    seam does not import the loader's module (``DataLoaderInstrumentation``
    types it precisely).
    """

    def begin_dispatch(self, loader: Any) -> Optional[DataLoaderInstrumentationContext]: ...

    def begin_batch(self, loader: Any, keys: list[Any],
                    environment: Optional[BatchLoaderEnvironment]) -> Optional[DataLoaderInstrumentationContext]: ...


def check_instrumentation(value: Any, name: str = "instrumentation") -> Any:
    """*value* if it has the two hooks (or is None).

    Raises:
        TypeError: naming *name*, when a hook is missing or not callable.
    """
    if value is None:
        return None
    if not (callable(getattr(value, "begin_dispatch", None)) and callable(getattr(value, "begin_batch", None))):
        raise TypeError(f"{name} must be a DataLoaderInstrumentation (begin_dispatch, begin_batch) or None")
    return value


def begin_dispatch(instrumentation: InstrumentationHooks, loader: Any) -> Optional[DataLoaderInstrumentationContext]:
    try:
        return instrumentation.begin_dispatch(loader)
    except Exception:
        _LOGGER.exception("instrumentation %r raised in begin_dispatch of %r; ignored", instrumentation, loader)
        return None


def begin_batch(
    instrumentation: InstrumentationHooks,
    loader: Any,
    keys: list[Any],
    environment: Optional[BatchLoaderEnvironment],
) -> Optional[DataLoaderInstrumentationContext]:
    try:
        return instrumentation.begin_batch(loader, keys, environment)
    except Exception:
        _LOGGER.exception("instrumentation %r raised in begin_batch of %r; ignored", instrumentation, loader)
        return None


def value_cache_lookup(instrumentation: InstrumentationHooks, loader: Any, hits: int, misses: int) -> None:
    hook = getattr(instrumentation, "value_cache_lookup", None)  # optional: see the module notes
    if hook is None:
        return
    try:
        hook(loader, hits, misses)
    except Exception:
        _LOGGER.exception("instrumentation %r raised in value_cache_lookup of %r; ignored", instrumentation, loader)


def completed(context: DataLoaderInstrumentationContext, result: Any, error: Optional[BaseException]) -> None:
    try:
        context.on_completed(result, error)
    except Exception:
        _LOGGER.exception("instrumentation context %r raised in on_completed; ignored", context)

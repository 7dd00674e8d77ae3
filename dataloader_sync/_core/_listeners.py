"""Who hears that a loader queued keys: the registries holding it, and the dispatch scope of the load.

This module is the one seam between a ``DataLoader`` and what dispatches it
from outside: registries (``_registry``), their ticks
(``_scheduled_registry``) and GraphQL executions (through
``_registry.wake_tickers``).  They call the functions below, never the
loader's fields; the fields these functions read and write are declared by
``_loader_state.LoaderState`` (``DataLoader`` implements it).

The sleeping-ticker protocol, end to end:

1. A load that makes a loader's queue non-empty calls ``announce``: each
   registry holding the loader hears its name (``_Queued.add``) and, unless
   the load was made in a scope that dispatches itself (a GraphQL execution
   at work, see ``_dispatch_scope``), wakes its ticker.  The scope hears of
   the loader too, once per queue (``heard_locked``).
2. A ticker-mode registry's tick asks ``left_to_execution(loader)`` of each
   loader with queued keys: a queue told to such a scope is left to it (one
   batch per level); when every queued key is, the ticker sleeps.
3. The execution, when it waits or ends, calls ``_registry.wake_tickers``,
   which re-reports (``report_queued``) every loader still holding keys and
   wakes the context's registry: no key is left waiting for a sleeping ticker.

Contract of each function: who calls it, under which lock, in its docstring.
None of them runs user code: they write a few fields, and ``_Queued.add``
takes only the registry's ``_Queued`` lock (never the loader's).  Lock
order: a registry's lock, then the loader's (``watch``); the loader never
takes a registry's lock.

Guarantees:
- A registry hears of a loader once per batch (when its empty queue becomes
  non-empty, or a mix, see ``heard_locked``), a scope once per queue and
  scope: a cached or queued ``load()`` pays one identity test for all of
  this — except while a queue holds keys loaded outside any scope beside a
  scope's (``MIXED``), when every load in a scope tells its scope.
- A loader holds only weak references to the registries' ``_Queued`` (no
  loader <-> registry cycle), and drops the dead ones when it joins another.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Optional

from ._instrumentation_seam import InstrumentationHooks
from ._loader_state import Hearing, LoaderState

__all__ = ["announce", "heard_locked", "left_to_execution", "registered", "report_queued", "unwatch", "watch",
           "watched_by"]

# The _told of a queue that holds keys loaded outside any scope beside a
# scope's (see heard_locked): never left to an execution, so ticks dispatch it.
MIXED: Any = object()


# -- registries: joining, leaving (called by _registry under the registry's lock) ------------
def registered(loader: LoaderState, name: str, instrumentation: Optional[InstrumentationHooks]) -> None:
    """A registry took *loader* under *name*: a loader made without a name
    takes that one, and one made without an instrumentation takes the
    registry's (if it has one; the last such registry wins).

    Called by a registry under its own lock: a few attribute writes, no user code.
    """
    if loader._name is None:
        loader._name = name
    if instrumentation is not None and loader._own_instrumentation is None:
        loader._instrumentation = instrumentation
    if loader._call is not None:  # else the first dispatch makes it with these
        loader._call.registered(loader._name, loader._instrumentation)


def watch(loader: LoaderState, queued_ref: Any, name: str) -> None:
    """Tell the registry's ``_Queued`` (by weak reference) when *loader* queues keys; now if some are.

    Called by a registry under its own lock; takes the loader's lock (the
    lock order above), then reports outside it.
    """
    with loader._lock:
        registries = loader._registries
        if registries:  # drop the registries gone meanwhile, so a shared loader keeps no trace of them
            registries = _flat((ref, held) for ref, held in _pairs(registries) if ref() is not None)
        loader._registries = registries + (queued_ref, name)
        queued = loader._queue is not None and bool(loader._queue.keys)
    if queued:
        queued_ref().add(name, False)  # the registry's lock is held: it wakes its ticker itself


def unwatch(loader: LoaderState, queued_ref: Any, name: str) -> None:
    """The registry of *queued_ref* no longer holds *loader* under *name* (called under the registry's lock)."""
    with loader._lock:
        loader._registries = _flat((ref, held) for ref, held in _pairs(loader._registries)
                                   if not (ref is queued_ref and held == name) and ref() is not None)


def watched_by(loader: LoaderState, queued: Any) -> bool:
    """True when the registry whose ``_Queued`` is *queued* holds *loader* (no lock: a snapshot)."""
    return any(ref() is queued for ref in loader._registries[::2])


def _pairs(registries: tuple[Any, ...]) -> Iterator[tuple[Any, str]]:
    """The ``(weakref, name)`` pairs of a loader's flat ``_registries``."""
    return zip(registries[::2], registries[1::2])


def _flat(pairs: Iterable[tuple[Any, str]]) -> tuple[Any, ...]:
    return tuple(item for pair in pairs for item in pair)


# -- loads (called by DataLoader.load/load_many) ------------------------------------------------
def heard_locked(loader: LoaderState, scope: Any, first: bool) -> Optional[Hearing]:
    """Keys were just queued in *scope* (*first*: the queue was empty): who is to hear of it, None for nobody.

    Called by the loader's ``_enqueue_locked``, under the loader's lock.
    ``_told`` is the dispatch scope told about the current queue (reset
    when the queue is taken), so a scope hears of a loader once per
    batch, not once per load; or ``MIXED`` once the queue holds keys
    loaded outside any scope beside keys of a scope (either order): a
    ticker leaves a queue told to an execution that dispatches itself to
    it (one batch per level), but must not leave an outside key waiting
    for that execution (it may be busy in a slow resolver, or waiting
    for that very key).  ``MIXED`` stays until the queue is taken; the
    scopes that load meanwhile are still told.  The registries hear when
    the queue becomes non-empty or a mix.
    """
    told = loader._told
    if told is scope:
        return Hearing(scope, True, False) if first else None
    mixed = False
    if first or (scope is not None and told is not None and told is not MIXED):
        loader._told = scope
    elif told is not MIXED:
        loader._told = MIXED
        mixed = True
    if first or mixed or scope is not None:
        return Hearing(scope, first or mixed, scope is not None)
    return None


def announce(loader: LoaderState, hearing: Hearing) -> None:
    """Tell who *hearing* names that *loader* queued keys (``_enqueue_locked``'s result).

    Called by the loading thread outside the loader's lock; the scope's
    ``loader_queued`` is library code (a GraphQL execution's), it only records.
    """
    if hearing.registries and loader._registries:
        report_queued(loader, hearing.scope)
    if hearing.scope_hears:
        hearing.scope.loader_queued(loader)


def report_queued(loader: LoaderState, scope: Any) -> None:
    """The queue became non-empty: tell the registries holding *loader* (outside the loader's lock).

    A ticker asleep is woken unless the load was made in a scope that
    dispatches its loaders itself (a GraphQL execution at work, see
    ``_dispatch_scope``): that scope will dispatch this queue.  With
    *scope* None (``_registry.wake_tickers``) every ticker holding the
    loader is woken.
    """
    wake = scope is None or not scope.dispatches_itself
    for ref, name in _pairs(loader._registries):
        queued = ref()
        if queued is not None:
            queued.add(name, wake)


# -- ticks (called by _scheduled_registry, no lock) ------------------------------------------
def left_to_execution(loader: LoaderState) -> bool:
    """Its queued keys were told to a scope that dispatches them itself (a GraphQL execution at work).

    The one question a ticker-mode registry's tick asks a loader: such a
    queue is left to the execution, one batch per level.  A racy look (no
    lock), as the tick's own: a load racing with it reports itself anyway.
    """
    told = loader._told
    return told is not None and told is not MIXED and bool(told.dispatches_itself)

"""The loader as its friend modules see it: ``LoaderState``, every field and method they use, declared once.

``DataLoader`` (``_dataloader``) keeps its state in fields it declares in
``__init__``; the modules that act on that state beside it (``_load_any``,
``_load_many``, ``_load_local``, ``_loader_cache``, ``_loader_fork``,
``_listeners``) read the loader through :class:`LoaderState` and through
nothing else, so a field is named in two places: where the loader makes it,
and here.  What they may write is said below, field by field; the three load
counters are not among the fields: they are the loader's own, changed by its
``_count_locked`` only.  A queued key enters the queue through the loader's
``_enqueue_locked`` (its one copy of the rule "append, stamp, tell"),
which returns a :class:`Hearing`: who must hear of it, once the lock is
released (``_listeners.announce``).
"""
from __future__ import annotations

from collections.abc import Hashable, MutableMapping
from typing import Any, Callable, NamedTuple, Optional, Protocol

from ._batch_call import BatchCall, BatchSettings
from ._batch_shapes import DispatchSink, KeyQueue
from ._future import Future
from ._instrumentation_seam import InstrumentationHooks
from ._sync_on_demand import Ticket

__all__ = ["Hearing", "LoaderState"]


class Hearing(NamedTuple):
    """Who hears that keys were queued (``DataLoader._enqueue_locked``'s result; ``_listeners.announce``).

    Attributes:
        scope: the dispatch scope current at the load (None outside any).
        registries: the registries holding the loader hear of it (its queue
            became non-empty, or a mix of scopes: see ``_listeners.heard_locked``).
        scope_hears: *scope* hears of the loader (once per queue and scope).
    """

    scope: Any
    registries: bool
    scope_hears: bool


class LoaderState(Protocol):
    """What the loader's friend modules read and write of a ``DataLoader`` (which implements it).

    ``_lock`` guards every field but the flags set at construction
    (``_cache_enabled``, ``_dict_cache``, ``_cache_key_fn``, ``_batch``,
    ``_local``); ``_registries`` is replaced whole under it, so it is read
    without the lock as a snapshot.
    """

    # -- set at construction -------------------------------------------------------------
    _lock: Any  # a threading.RLock: the loader's, and the lock of its futures (see _future_lock)
    _cache: MutableMapping[Hashable, Future[Any]]
    _cache_enabled: bool
    _dict_cache: bool  # the cache is a plain dict (its lookup checks a key's hashability)
    _cache_key_fn: Any
    _batch: bool
    # (the value cache, its get_local_values, its get_local_futures or None), or None: the value cache
    # offers no local tier (read once, at construction; see _load_local)
    _local: Optional[tuple[Any, Callable[[list[Any]], list[Any]], Any]]
    # -- the queue: written by the loader, and by _loader_fork (in a forked child) and _loader_cache (a cancel) --
    _queue: Optional[KeyQueue]  # None until a load queues a key (and once a dispatch took it)
    _ticket: Optional[Ticket]  # made with _queue, stamped on its futures (_sync_on_demand)
    _told: Any  # the dispatch scope told of the current queue, _listeners.MIXED, or None
    # -- the listeners' (_listeners): registries and instrumentation ---------------------
    # Flat pairs (weakref to a registry's _Queued, name, ...): one tuple per loader, not one per registration.
    _registries: tuple[Any, ...]
    _name: Optional[str]
    _own_instrumentation: Optional[InstrumentationHooks]
    _instrumentation: Optional[InstrumentationHooks]  # its own, or its registry's
    _call: Optional[BatchCall]  # None until the first dispatch makes it
    _settings: BatchSettings  # set at construction: what a batch call is made from
    # -- the next-load hook (_loader_cache.watch_next_load): written without the lock --------------
    _own_path: bool  # set at construction: load() may take its own path (see DataLoader.load)
    _plain: bool  # load() takes its own path: _own_path and no hook is set
    _next_load: Optional[Callable[[Any], bool]]  # called by the next load() or load_many() while set

    @property
    def _batch_call(self) -> BatchCall: ...

    def _cache_key(self, key: Any) -> Hashable: ...

    def _enqueue_locked(self, new: KeyQueue, scope: Any) -> Optional[Hearing]: ...

    def _count_locked(self, hits: int = 0, misses: int = 0, local_hits: int = 0) -> None: ...

    def _cache_failed(self, kind: str, exc: Exception) -> None: ...

    def _fail_keys(self, batch: KeyQueue, exc: BaseException, sink: Optional[DispatchSink]) -> None: ...

    def _label(self) -> str: ...

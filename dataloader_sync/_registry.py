"""DataLoaderRegistry: named loaders, dispatched together.

Guarantees:
- Work proportional to work: a registry keeps the names of its loaders that
  queued keys since it last looked (``_Queued``); ``dispatch_all()``, a tick
  and ``dispatch_depth`` visit only those, so with 200 registered loaders and
  one holding keys they cost what one loader costs.  A loader reports its
  name once per batch: when a load makes its empty queue non-empty.
- No reference cycle: the registry holds its loaders and its ``_Queued``; a
  loader holds only a weak reference to that ``_Queued`` (and the name), and
  ``_Queued`` holds names, not loaders.  A per-request registry and its
  loaders are freed by reference counting, without the cyclic GC.
"""
from __future__ import annotations

import heapq
import itertools
import threading
import weakref
from collections.abc import Generator, Hashable, ItemsView, Iterable, Iterator, KeysView, ValuesView
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Optional,
    TypeVar,
    overload,
)

from ._core import (
    BoundBatch,
    DataLoader,
    P,
    Statistics,
    Values,
    check_instrumentation,
    check_sync,
    family_key,
    family_label,
    family_options,
    registered,
    report_queued,
    unwatch,
    watch,
    watched_by,
)
from ._instrumentation import DataLoaderInstrumentation, for_new_registry

if TYPE_CHECKING:  # Python 3.9's typing has no Concatenate; annotations are never evaluated
    from typing_extensions import Concatenate

__all__ = ["DataLoaderRegistry", "UnknownLoaderError", "check_entry", "holds", "wake_tickers"]

_R = TypeVar("_R", bound="DataLoaderRegistry")
K = TypeVar("K")
V = TypeVar("V")


class _Queued:
    """The names of a registry's loaders that queued keys since the registry took them.

    Thread-safe.  Invariant: whenever a registered loader has queued keys, its
    name is here, or the load that made its queue non-empty is about to add
    it, or a dispatch that took the name has yet to take that loader's queue.
    """

    __slots__ = ("_lock", "_names", "wake", "__weakref__")

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards _names (swapped whole by take())
        self._names: dict[str, None] = {}  # an ordered set
        # Set once by a ticker-mode registry: a weak reference to it (no cycle
        # through this object), whose _wake() re-arms a sleeping ticker.
        self.wake: Optional[Callable[[], Any]] = None

    def add(self, name: str, wake: bool = True) -> None:
        """Called for a loader (``_listeners``, outside the loader's lock) when a load made its queue non-empty.

        *wake*: also wake the registry's ticker, if it sleeps (see
        ``ScheduledDataLoaderRegistry``); outside this object's lock.
        """
        with self._lock:
            self._names[name] = None
        if wake and self.wake is not None:
            registry = self.wake()
            if registry is not None:
                registry._wake()

    def add_all(self, names: Iterable[str]) -> None:
        with self._lock:
            self._names.update(dict.fromkeys(names))

    def __bool__(self) -> bool:
        # A racy read without the lock (a dict's truth is read atomically): a
        # name added concurrently may be missed, and every caller then leaves
        # it to its next pass, which does see it.
        return bool(self._names)

    def take(self) -> dict[str, None]:
        """Hand out (and forget) the names reported so far."""
        with self._lock:
            names, self._names = self._names, {}
        return names

    def peek(self) -> list[str]:
        with self._lock:
            return list(self._names)

    def discard(self, name: str) -> None:
        with self._lock:
            self._names.pop(name, None)


class UnknownLoaderError(KeyError):
    """``registry[name]`` for a name no loader is registered as; its message lists the registered names."""

    def __init__(self, name: Any, registered: list[str]) -> None:
        super().__init__(name)
        self.name = name
        self.registered = registered

    def __str__(self) -> str:
        shown = self.registered[:_NAMES_SHOWN]
        known = ", ".join(repr(n) for n in shown) if shown else "none"
        if len(self.registered) > len(shown):
            known += f" and {len(self.registered) - len(shown)} more"
        return f"no loader is registered as {self.name!r} in this registry; registered: {known}"


#: How many registered names an UnknownLoaderError's message lists.
_NAMES_SHOWN = 20


def check_entry(name: Any, loader: Any) -> None:
    if not isinstance(name, str):
        raise TypeError("name must be a str")
    if not isinstance(loader, DataLoader):
        raise TypeError("loader must be a DataLoader")


class DataLoaderRegistry:
    """Loaders by name, typically one registry (and so one cache) per request.

    ``dispatch_all()`` dispatches the loaders that have queued keys, in
    registration order; loads queued by callbacks while it runs may be
    included or left to the next dispatch.  A loader with nothing queued is
    not visited (a dispatch would send nothing), so its
    ``time_since_dispatch()`` counts from its last dispatch that could have
    sent keys, and registering many loaders costs nothing per dispatch.

    Thread-safe: registering, looking up and dispatching may happen on any
    threads at once; a dispatch sees a snapshot of the loaders.

    A loader registered without a name takes the name it is registered under
    (errors and spans then name it).

    Args:
        instrumentation: a ``DataLoaderInstrumentation`` for every loader
            registered here without one of its own (java-dataloader's
            registry instrumentation).  Such a loader keeps it after
            ``unregister``; a loader's own instrumentation always wins.

    Raises:
        TypeError: *instrumentation* lacks ``begin_dispatch``/``begin_batch``.
    """

    def __init__(self, *, instrumentation: Optional[DataLoaderInstrumentation] = None) -> None:
        # plus the context instrumentation, if one is set (a debugging tool's: see _instrumentation)
        self._instrumentation = for_new_registry(self, check_instrumentation(instrumentation))
        # _lock guards changes of _loaders and _order; readers use _loaders as
        # it is (a dict read is atomic) or a snapshot of it, so dispatch never
        # holds it.  Lock order: _lock, then a loader's lock (register); a
        # loader never takes _lock.
        self._lock = threading.Lock()
        self._loaders: dict[str, DataLoader[Any, Any]] = {}
        self._order: dict[str, int] = {}  # name -> registration position (unique), for dispatch order
        self._positions = itertools.count()
        self._queued = _Queued()  # names of loaders with (possibly) queued keys
        self._queued_ref = weakref.ref(self._queued)  # what loaders hold
        self._closed = False  # OPEN -> CLOSED, once; written under _lock
        # Loader families (loader_for), guarded by _lock: family key -> its
        # loader, and the name each was registered under -> its key (so that
        # unregistering that name forgets the family's loader too).
        self._families: dict[Hashable, DataLoader[Any, Any]] = {}
        self._family_names: dict[str, Hashable] = {}

    def _wake(self) -> None:
        """Loads were queued outside an execution that dispatches them itself, or such
        an execution ended: a ticker-mode ``ScheduledDataLoaderRegistry`` re-arms its
        ticker if it sleeps.  Nothing to do here.

        Called by ``_Queued.add`` (outside its lock) and ``wake_tickers``;
        never under a loader's lock."""

    # -- lifecycle ---------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def instrumentation(self) -> Optional[DataLoaderInstrumentation]:
        """The instrumentation given to loaders registered without their own, or None."""
        return self._instrumentation

    def close(self) -> None:
        """Mark the registry closed (idempotent).

        A plain registry schedules nothing, so this only records the state;
        ``ScheduledDataLoaderRegistry.close()`` also cancels its pending tasks.
        Loaders keep working, and ``dispatch_all()`` still dispatches.
        Integrations call it when a request ends, whatever the registry type.
        """
        with self._lock:
            self._closed = True

    def __enter__(self: _R) -> _R:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    # -- registration ------------------------------------------------------------
    def register(self, name: str, loader: DataLoader[Any, Any]) -> DataLoaderRegistry:
        """Register *loader* under *name* (replacing any loader of that name).

        Raises:
            TypeError: *name* is not a str, or *loader* is not a DataLoader.
        """
        check_entry(name, loader)
        with self._lock:
            self._put_locked(name, loader)
        return self

    def _put_locked(self, name: str, loader: DataLoader[Any, Any]) -> None:
        registered(loader, name, self._instrumentation)  # a few attribute writes: no user code
        old = self._loaders.get(name)
        self._loaders[name] = loader
        if name not in self._order:  # a replaced loader keeps its name's position
            self._order[name] = next(self._positions)
        if old is not loader:
            key = self._family_names.pop(name, None)
            if key is not None:  # a family's loader replaced by name: the family forgets it
                del self._families[key]
            if old is not None:
                unwatch(old, self._queued_ref, name)
            watch(loader, self._queued_ref, name)  # reports the name at once if keys are queued

    def unregister(self, name: str) -> DataLoaderRegistry:
        """Remove the loader named *name*, if any."""
        with self._lock:
            old = self._loaders.pop(name, None)
            self._order.pop(name, None)
            key = self._family_names.pop(name, None)
            if key is not None:
                del self._families[key]
            if old is not None:
                unwatch(old, self._queued_ref, name)
        self._queued.discard(name)
        return self

    def compute_if_absent(self, name: str, factory: Callable[[str], DataLoader[Any, Any]]) -> DataLoader[Any, Any]:
        """Return the loader named *name*, registering ``factory(name)`` first if absent.

        The factory runs outside the lock; if two threads race, the first
        registration wins and both get that loader.

        Raises:
            TypeError: *name* is not a str, *factory* is not callable, or it
            returned something other than a DataLoader.
        """
        if not isinstance(name, str):
            raise TypeError("name must be a str")
        loader = self._loaders.get(name)
        if loader is not None:
            return loader
        if not callable(factory):
            raise TypeError("factory must be callable")
        made = factory(name)
        with self._lock:
            loader = self._loaders.get(name)
            if loader is None:
                if not isinstance(made, DataLoader):
                    raise TypeError("factory must return a DataLoader")
                self._put_locked(name, made)
                loader = made
        return loader

    # The key and value types come from a sequence-returning batch function,
    # as for DataLoader(batch_fn), with its parameters after the keys as a
    # ParamSpec; any other batch function (a mapped one, a future-returning
    # one, or arguments that do not fit) gives DataLoader[Any, Any].
    @overload
    def loader_for(self, batch_fn: Callable[Concatenate[list[K], P], Values[V]], /,
                   *args: P.args, **kwargs: P.kwargs) -> DataLoader[K, V]: ...

    @overload
    def loader_for(self, batch_fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> DataLoader[Any, Any]: ...

    def loader_for(self, batch_fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> DataLoader[Any, Any]:
        """The loader of the family ``(batch_fn, args, kwargs)``, made and registered on first use.

        graphql-ruby's ``dataloader.with(Source, *args)``: the loader calls
        ``batch_fn(keys, *args, **kwargs)``, so a batch that depends on field
        arguments (a filter, an order, a page size) needs no hand-built
        loader names.  One loader per distinct arguments per registry
        (compared by equality and type: ``1`` and ``True`` are two
        families); it is registered like any other, so it is dispatched with
        the registry's others (levels, ticks, the registry-wide predicate),
        counted in ``statistics()`` and instrumented, under a readable name:
        ``load_users(1, active=True)``, ``load_related(Author.books)``
        (with `` #2``, `` #3`` appended when that name is taken).
        Unregistering that name forgets the family's loader: the next call
        makes a new one.

        Loader options belong to the family, not to a call: the batch
        function's ``dataloader_options`` attribute, when it has one, is a
        mapping of ``DataLoader`` keyword arguments (``max_batch_size``,
        ``cache``, ``executor``, ``value_cache``, ``instrumentation``, ...)
        for each of its loaders.  Two more optional attributes shape the
        family: ``dataloader_key(*args, **kwargs)`` returns the hashable
        family key when the arguments' own equality is not the right one,
        and ``dataloader_name(*args, **kwargs)`` the text between the
        parentheses of the name (the whole name, with
        ``dataloader_name_is_label = True`` beside it).

        Thread-safe: two threads asking for one family at once get one
        loader.  The hooks run outside the registry's lock.

        Args:
            batch_fn: ``fn(keys, *args, **kwargs) -> values``, any shape a
                ``DataLoader`` batch function may have (a sequence, a mapping,
                a future of either).  The positional and keyword
                arguments after it are the family's; each must be hashable.

        Returns:
            The family's ``DataLoader``.

        Raises:
            TypeError: *batch_fn* is not callable or is ``async def``; an argument is unhashable
            (the message names it); ``dataloader_options`` is not a mapping
            or sets ``batch_load_fn``, ``name`` or ``pass_env``.
        """
        if not callable(batch_fn):
            raise TypeError("batch_fn must be callable")
        key = family_key(batch_fn, args, kwargs)
        loader = self._families.get(key)  # a dict read is atomic: the common path takes no lock
        if loader is not None:
            return loader
        check_sync(batch_fn, "batch_fn")
        label = family_label(batch_fn, args, kwargs)
        made = DataLoader(BoundBatch(batch_fn, args, kwargs), **family_options(batch_fn))
        with self._lock:
            loader = self._families.get(key)
            if loader is None:  # first caller wins; a racing thread's loader is dropped unused
                name = self._free_name_locked(label)
                self._put_locked(name, made)
                self._families[key] = made
                self._family_names[name] = key  # after _put_locked, which forgets a replaced family
                loader = made
        return loader

    def _free_name_locked(self, label: str) -> str:
        """*label*, or *label* with `` #2``, `` #3``... appended: the first name not registered."""
        name, n = label, 1
        while name in self._loaders:
            n += 1
            name = f"{label} #{n}"
        return name

    def __getitem__(self, name: str) -> DataLoader[Any, Any]:
        """The loader registered as *name*.

        Raises:
            KeyError: no loader is registered as *name*; the message lists
                the names that are (a ``KeyError`` whose ``str()`` is that
                message, so a GraphQL error shows it).
        """
        try:
            return self._loaders[name]
        except KeyError:
            raise UnknownLoaderError(name, list(self._loaders)) from None

    def get(self, name: str, default: Optional[DataLoader[Any, Any]] = None) -> Optional[DataLoader[Any, Any]]:
        return self._loaders.get(name, default)

    def __contains__(self, name: object) -> bool:
        return name in self._loaders

    def __len__(self) -> int:
        return len(self._loaders)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._loaders))

    def keys(self) -> KeysView[str]:
        return dict(self._loaders).keys()

    def values(self) -> ValuesView[DataLoader[Any, Any]]:
        return dict(self._loaders).values()

    def items(self) -> ItemsView[str, DataLoader[Any, Any]]:
        return dict(self._loaders).items()

    def _snapshot(self) -> list[Any]:
        return list(self._loaders.items())

    def _walk_queued(self) -> Generator[tuple[str, DataLoader[Any, Any]], None, None]:
        """Yield the loaders that have queued keys, in registration order, each once.

        The same loaders, in the same order, that a walk over every registered
        loader would dispatch: one that queues keys during the walk (a
        callback of an earlier batch loading through it) is included when it
        comes later in registration order, and left for the next walk
        otherwise.  The names it takes but does not yield again (not reached
        because the caller stopped, or queued behind the walk) are handed
        back, so they are not forgotten; close the generator when done.
        """
        queued, loaders = self._queued, self._loaders
        heap: list[tuple[int, str]] = []
        later: list[str] = []
        try:
            self._push_taken(heap, later, -1)
            while heap:
                position, name = heapq.heappop(heap)
                loader = loaders.get(name)
                if loader is not None:
                    yield name, loader
                if queued:  # a racy peek (see _Queued.__bool__)
                    self._push_taken(heap, later, position)
        finally:
            if heap or later:
                queued.add_all([name for _, name in heap] + later)

    def _push_taken(self, heap: list[tuple[int, str]], later: list[str], after: int) -> None:
        order = self._order
        for name in self._queued.take():
            position = order.get(name)
            if position is None:
                continue  # unregistered meanwhile
            if position > after:
                heapq.heappush(heap, (position, name))
            else:
                later.append(name)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} loaders={len(self._loaders)}>"

    # -- dispatching ---------------------------------------------------------------
    def dispatch_all(self) -> None:
        """Dispatch every loader."""
        self.dispatch_all_with_count()

    def dispatch_all_with_count(self) -> int:
        """Dispatch every loader that has queued keys; return how many keys were sent."""
        total = 0
        walk = self._walk_queued()
        try:
            for _, loader in walk:
                total += loader.dispatch_count()
        finally:
            walk.close()
        return total

    @property
    def dispatch_depth(self) -> int:
        """Keys queued over all loaders."""
        loaders = self._loaders
        found = {id(loader): loader for loader in (loaders.get(name) for name in self._queued.peek())
                 if loader is not None}
        return sum(loader.dispatch_depth for loader in found.values())

    def statistics(self) -> Statistics:
        """The sum of every loader's statistics."""
        total = Statistics()
        for _, loader in self._snapshot():
            total = total + loader.statistics()
        return total

    def statistics_by_loader(self) -> dict[str, Statistics]:
        """Each loader's statistics by name, in registration order.

        Returns:
            ``{name: Statistics}``, a new dict.  With ``to_dict()`` on each
            value it is JSON-ready, for a metrics endpoint or a log line.
        """
        return {name: loader.statistics() for name, loader in self._snapshot()}


# -- the seam for GraphQL executions (graphql/_run.py) ----------------------------------------
# An execution that dispatches its loaders itself makes ticker-mode registries
# sleep (see _listeners, the sleeping-ticker protocol); these two functions are
# all it asks of a registry.  Both are called on the request thread, outside
# every lock, and run no user code.

def holds(registry: DataLoaderRegistry, loader: DataLoader[Any, Any]) -> bool:
    """True when *loader* is registered in *registry* (under any name): its ``dispatch_all()`` reaches it.

    O(the registries holding the loader); no lock (a snapshot of the loader's).
    """
    return watched_by(loader, registry._queued)


def wake_tickers(registry: Optional[DataLoaderRegistry], loaders: Iterable[DataLoader[Any, Any]]) -> None:
    """An execution waits or ended: wake the tickers that slept while it dispatched *loaders* itself.

    Every loader of *loaders* still holding keys is reported again to each
    registry holding it (``_listeners.report_queued``, waking its ticker),
    and *registry* (the execution's context's, if any) is woken.
    Guarantee: after this call no queued key of *loaders* waits for a
    sleeping ticker.
    """
    for loader in loaders:
        if loader.dispatch_depth:
            report_queued(loader, None)
    if registry is not None:
        registry._wake()

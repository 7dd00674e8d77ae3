"""DataLoader: batching and caching of loads, for threads.

What a dispatch does with the queue it took (the value-cache step, the batch calls, matching
results to keys, settling and failing them) is the work of the loader's ``BatchCall``
(``_batch_call``), which the loader holds: it owns the batch function, its options and its
counters, and shares the loader's lock and cache.  Its friends, each one concept over the fields
the loader declares in ``__init__``, read it through the one Protocol ``_loader_state.LoaderState``
declares (the load counters are the loader's own: ``_count_locked``): ``_listeners`` (the
registries, ticks and dispatch scopes that hear of queued keys: the loader's one seam with them),
``_load_many``, ``_load_any``, ``_load_local`` (hits of a value cache's local tier at load time),
``_loader_cache`` (prime, a cancelled load's eviction) and ``_loader_fork``.

Guarantees:
- ``load()`` queues a key and returns a future; ``dispatch()`` hands every queued key to the
  batch function in one call (or one per ``max_batch_size`` slice).  A cached key returns its
  cached future.
- No key is lost or loaded twice while cached: the cache lookup, the cache insert and the queue
  append happen under one lock acquisition; ``dispatch()`` swaps the queue out under it.
- User code (batch functions, ``cache_key_fn``, ``context_provider``, done callbacks, a value
  cache) never runs under the loader's lock.  ``cache_map`` is a container and is the one
  exception: its ``get``/``__setitem__``/``__delitem__``/``clear`` are called under the lock and
  must not call back into the loader.
- A failing ``cache_map`` degrades, it does not poison the loader: a ``get`` that raises is a
  miss, a ``__setitem__`` that raises leaves the key uncached (it is still queued and loaded), a
  ``__delitem__`` that raises while a failed batch is evicted leaves that entry; each kind of
  failure is logged once per loader.  ``clear()``/``clear_all()`` raise the cache map's error to
  their caller.  ``load_many`` registers every key (cached, settled or queued) or none.
- A cached or queued ``load()`` is constant work: a few dict/list operations and, for a miss,
  one lean future.  Nothing scans the pending keys.
- A failed batch and an escaping ``BaseException``: see ``_batch_call``.

Duplicated for speed (said once here): ``load()`` is the path of every GraphQL field that
loads, so ``_load_any.load_any`` (any loader) inlines ``_cache_key`` and the common case of
``_enqueue_locked`` (one more key for a queue that holds keys: stamp, append, then
``_listeners.heard_locked`` only when the load's scope is not the one told), and ``load()``
itself is its steps for a plain loader (its own dict, keys their own cache keys, batching, no local
tier) and no key context, with ``loader_future`` and that common case inline, falling back to
``load_any`` otherwise; both take the lock with ``acquire``/``release`` rather than ``with``.  Their
plain twins are ``_reference_path.load`` and ``load_any`` (``DATALOADER_SYNC_REFERENCE_PATH=1``
routes every call through them; ``tests/test_reference_path.py`` checks that both paths do the
same); what the copies save is measured by ``tools/bench.py --micro`` (figures in
docs/performance.rst).  Once per queue and scope, not per load:
``_enqueue_locked`` and ``_listeners.announce``, plain calls.
"""
from __future__ import annotations

import concurrent.futures as cf
import threading
import time
import weakref
from collections.abc import Hashable, Iterable, MutableMapping
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Generic,
    Literal,
    Optional,
    TypeVar,
    Union,
    overload,
)

from . import _fork, _instrumentation_seam, _load_many, _loader_cache, _loader_fork
from ._batch_call import BatchCall, BatchSettings, loader_label
from ._batch_shapes import (
    BatchLoaderEnvironment,
    BatchLoadError,
    DispatchResult,
    DispatchSink,
    KeyQueue,
)
from ._compat import PENDING
from ._dispatch_scope import current_scope
from ._future import Future
from ._instrumentation_seam import InstrumentationHooks, check_instrumentation
from ._listeners import announce, heard_locked
from ._load_any import load_any, unhashable
from ._loader_family import BoundBatch
from ._loader_options import LoaderOptions, check_arguments
from ._loader_state import Hearing
from ._new_futures import LoaderFuture, completed_future
from ._statistics import Statistics
from ._sync_on_demand import Ticket
from ._sync_only import ASYNC_FLAGS, SYNC_CODE_TYPES, check_sync
from ._time import check_clock
from ._types import (
    EnvBatchFn,
    EnvFutureBatchFn,
    EnvFutureMappedBatchFn,
    EnvMappedBatchFn,
    FutureBatchFn,
    FutureMappedBatchFn,
    MappedBatchFn,
    SequenceBatchFn,
)
from ._value_cache import ValueCache, check_value_cache, local_lookup_of

if TYPE_CHECKING:  # typing only: typing.Unpack is 3.11+, typing_extensions is not a dependency
    from typing_extensions import Unpack

__all__ = ["BatchLoadError", "BatchLoaderEnvironment", "DataLoader", "DispatchResult"]

K = TypeVar("K")
V = TypeVar("V")
_K = TypeVar("_K")  # a mapped loader's types, scoped to its __init__ overloads
_V = TypeVar("_V")

_DEFAULT_SETTINGS = BatchSettings()  # the batch call's options of a loader made with every option at its default


class DataLoader(Generic[K, V]):
    """Batches and caches loads of keys through one batch function.

    Thread-safe: any number of threads may load, prime, clear and dispatch at
    once.  Typically one loader per request (its cache is the request's).

    Args:
        batch_load_fn: ``fn(keys) -> values`` (same length and order as keys),
            or ``-> Mapping`` (a mapped loader: a missing key gives None), or
            a ``concurrent.futures.Future`` of either.  An ``Exception``
            instance among the values fails that key only.  With
            ``pass_env=True`` it is called as ``fn(keys, env)``.
        name: shown in errors and reprs (registries name loaders too).
        batch: False calls the batch function at once for each load.
        cache: False queues every load, even of a key already loaded.
        max_batch_size: split a dispatch into batch calls of at most this many
            keys, in order.
        cache_key_fn: maps a key to its cache key (for unhashable keys).
        cache_map: the cache container (default a dict); see the module notes.
        cache_exceptions: keep per-key failures cached (default, as
            java-dataloader); False evicts them so a later load retries.
        executor: where the batch function runs.  None: on the thread that
            dispatches.  An executor: batches of different loaders run in
            parallel; each batch call runs there in a copy of the dispatching
            thread's ``contextvars`` context (as ``asyncio.to_thread``), so
            request-scoped context variables (OpenTelemetry's current span,
            logging filters) are seen by the batch function.
        pass_env: pass a ``BatchLoaderEnvironment`` as second argument.
        context, context_provider: the environment's ``context`` (a value, or
            a callable called once per batch).
        value_cache: a ``ValueCache`` shared beyond this loader (e.g.
            ``dataloader_sync.redis.RedisValueCache``): a dispatch looks its
            keys up with one ``get_values`` call, settles the hits, sends
            only the misses to the batch function, and writes the values it
            returned with one ``set_values`` per batch call (never per-key
            errors).  A failing value cache is logged and bypassed.  One
            with a local tier (``get_local_values``: a near cache) is asked
            at load time: a hit is settled and cached at once, never queued.
            ``prime``/``clear``/``clear_all`` act on this loader's own cache
            only; invalidate shared values with ``value_cache.delete(key)``.
            Needs ``cache=True`` (as in java-dataloader).
        clock: seconds, for ``time_since_dispatch()``.
        instrumentation: a ``DataLoaderInstrumentation`` told of every
            dispatch and batch call (see ``_instrumentation.py``).  Without
            one, a registry's ``instrumentation=`` applies once the loader is
            registered there.

    Raises:
        TypeError, ValueError: at once, for an argument of the wrong kind.
    """

    # -- construction: overloads (one per shape of batch function) -----------------------
    # The key and value types come from the batch function: sequence-, mapping-
    # and future-returning, each without and with pass_env; a mapped loader's
    # values are Optional (a missing key gives None).  The last overload takes
    # any other callable (a lambda, a function typed otherwise) as
    # DataLoader[Any, Any]; it has no pass_env=True twin, because a typed
    # env function (BatchLoaderEnvironment holds Any) would then match two
    # overloads and mypy would infer Any.  Each overload names the two
    # parameters whose types depend on it (pass_env, cache_key_fn) and takes
    # every other one as LoaderOptions (PEP 692): a new parameter goes to the
    # implementation and to LoaderOptions (tests/test_types.py checks both).
    @overload
    def __init__(self, batch_load_fn: SequenceBatchFn[K, V], *,
                 pass_env: Literal[False] = ...,
                 cache_key_fn: Optional[Callable[[K], Hashable]] = ..., **options: Unpack[LoaderOptions]) -> None: ...

    @overload
    def __init__(self: DataLoader[_K, Optional[_V]], batch_load_fn: MappedBatchFn[_K, _V], *,
                 pass_env: Literal[False] = ...,
                 cache_key_fn: Optional[Callable[[_K], Hashable]] = ..., **options: Unpack[LoaderOptions]) -> None: ...

    @overload
    def __init__(self, batch_load_fn: FutureBatchFn[K, V], *,
                 pass_env: Literal[False] = ...,
                 cache_key_fn: Optional[Callable[[K], Hashable]] = ..., **options: Unpack[LoaderOptions]) -> None: ...

    @overload
    def __init__(self: DataLoader[_K, Optional[_V]], batch_load_fn: FutureMappedBatchFn[_K, _V], *,
                 pass_env: Literal[False] = ...,
                 cache_key_fn: Optional[Callable[[_K], Hashable]] = ..., **options: Unpack[LoaderOptions]) -> None: ...

    @overload
    def __init__(self, batch_load_fn: EnvBatchFn[K, V], *,
                 pass_env: Literal[True],
                 cache_key_fn: Optional[Callable[[K], Hashable]] = ..., **options: Unpack[LoaderOptions]) -> None: ...

    @overload
    def __init__(self: DataLoader[_K, Optional[_V]], batch_load_fn: EnvMappedBatchFn[_K, _V], *,
                 pass_env: Literal[True],
                 cache_key_fn: Optional[Callable[[_K], Hashable]] = ..., **options: Unpack[LoaderOptions]) -> None: ...

    @overload
    def __init__(self, batch_load_fn: EnvFutureBatchFn[K, V], *,
                 pass_env: Literal[True],
                 cache_key_fn: Optional[Callable[[K], Hashable]] = ..., **options: Unpack[LoaderOptions]) -> None: ...

    @overload
    def __init__(self: DataLoader[_K, Optional[_V]], batch_load_fn: EnvFutureMappedBatchFn[_K, _V], *,
                 pass_env: Literal[True],
                 cache_key_fn: Optional[Callable[[_K], Hashable]] = ..., **options: Unpack[LoaderOptions]) -> None: ...

    @overload
    def __init__(self: DataLoader[Any, Any], batch_load_fn: Callable[..., Any], *,
                 pass_env: Literal[False] = ...,
                 cache_key_fn: Optional[Callable[[Any], Hashable]] = ..., **options: Unpack[LoaderOptions]) -> None: ...

    def __init__(
        self,
        batch_load_fn: Callable[..., Any],
        *,
        name: Optional[str] = None,
        batch: bool = True,
        cache: bool = True,
        max_batch_size: Optional[int] = None,
        cache_key_fn: Optional[Callable[[Any], Hashable]] = None,
        cache_map: Optional[MutableMapping[Hashable, Future[Any]]] = None,
        cache_exceptions: bool = True,
        executor: Optional[cf.Executor] = None,
        pass_env: bool = False,
        context: Any = None,
        context_provider: Optional[Callable[[], Any]] = None,
        value_cache: Optional[ValueCache[Any, Any]] = None,
        clock: Callable[[], float] = time.monotonic,
        instrumentation: Optional[InstrumentationHooks] = None,
    ) -> None:
        if (batch is True and cache is True and cache_exceptions is True and pass_env is False
                and max_batch_size is None and cache_key_fn is None and cache_map is None and executor is None
                and context is None and context_provider is None
                and (name is None or type(name) is str)
                # a sync def, lambda or bound method (_sync_only), or a family's batch (loader_for checked it)
                and ((type(batch_load_fn) in SYNC_CODE_TYPES and not batch_load_fn.__code__.co_flags & ASYNC_FLAGS)
                     or type(batch_load_fn) is BoundBatch)):
            settings = _DEFAULT_SETTINGS if value_cache is None else (  # every option at its default but
                BatchSettings(value_cache=check_value_cache(value_cache)))  # value_cache: nothing else to check
        else:
            check_arguments(batch_load_fn, name=name, flags={"batch": batch, "cache": cache,
                             "cache_exceptions": cache_exceptions, "pass_env": pass_env},
                             max_batch_size=max_batch_size, cache_key_fn=cache_key_fn, context=context,
                             context_provider=context_provider, executor=executor, cache_map=cache_map,
                             value_cache=value_cache)
            check_sync(batch_load_fn, "batch_load_fn")  # methods, partials, objects: ask inspect (_sync_only)
            settings = BatchSettings(executor, pass_env, context, context_provider, max_batch_size, cache_exceptions,
                                     value_cache)
        first_reading = time.monotonic() if clock is time.monotonic else check_clock("clock", clock)
        # Its own instrumentation, and the one in use (its own, or a registry's: _listeners.registered).
        self._own_instrumentation: Optional[InstrumentationHooks] = check_instrumentation(instrumentation)
        self._instrumentation: Optional[InstrumentationHooks] = self._own_instrumentation
        self._batch_load_fn = batch_load_fn
        self._name = name
        self._batch = batch
        self._cache_enabled = cache
        self._cache: MutableMapping[Hashable, Future[Any]] = {} if cache_map is None else cache_map
        self._dict_cache = type(self._cache) is dict  # load() lets a dict check the keys' hashability
        self._local = None if value_cache is None else local_lookup_of(value_cache)  # its local tier (_load_local)
        # The common loader: its own dict, keys their own cache keys, batching, no local tier (load()'s own path).
        self._own_path = batch and cache and cache_map is None and cache_key_fn is None and self._local is None
        # load()'s own path is taken while _plain; a hook on the next load (_loader_cache.watch_next_load)
        # turns it off until the hook has seen what it watches for, so a plain load() pays nothing for it.
        self._plain = self._own_path
        self._next_load: Optional[Callable[[Any], bool]] = None
        self._cache_key_fn = cache_key_fn
        self._clock = clock
        # _lock guards _queue, _ticket, _call, _told, _cache, _last_dispatch and
        # the counters (the batch call's too), and it is the lock of this loader's
        # futures (see _future_lock's lock protocol).  Re-entrant, at the cost of a
        # plain lock: a cache_map's methods run under it, and may touch the
        # futures they hold.
        self._lock = threading.RLock()
        # Made on first use (most loaders of a per-request registry are never used): _queue, None until a load
        # queues a key (and once a dispatch took it), and _ticket, made with it, stamped on its futures
        # (_sync_on_demand).
        self._queue: Optional[KeyQueue] = None
        self._ticket: Optional[Ticket] = None
        self._ref = weakref.ref(self)  # shared by its tickets and its batch call; weak: no cycle
        _fork.watch(self._ref)  # repaired in a forked child (see _loader_fork)
        # What a dispatch does with the queue it took, held, not inherited: the batch call (_batch_call),
        # made by the first dispatch from the settings below (batch=False: now, each load calls at once).
        self._call: Optional[BatchCall] = None
        self._settings = settings
        if not batch:
            self._call = self._batch_call
        self._last_dispatch = first_reading
        # The load counters, the loader's own (_count_locked, load(), _take_queue): hits, misses but the
        # current queue's, local hits.
        self._cache_hit_count = self._miss_count = self._local_hit_count = 0
        # Kept by _listeners (see LoaderState): the registries holding this loader, told when a load
        # makes the queue non-empty, and the dispatch scope told of the current queue (reset by a swap).
        self._registries: tuple[Any, ...] = ()
        self._told: Any = None

    @property
    def _batch_call(self) -> BatchCall:
        """The loader's batch call, made on first use (see ``__init__``)."""
        call = self._call
        if call is None:
            with self._lock:
                call = self._call
                if call is None:
                    call = self._call = BatchCall(
                        self._ref, self._lock, batch_load_fn=self._batch_load_fn, name=self._name,
                        instrumentation=self._instrumentation, settings=self._settings,
                        cache_enabled=self._cache_enabled, cache=self._cache)
        return call

    # -- introspection -----------------------------------------------------------
    @property
    def name(self) -> Optional[str]:
        return self._name

    @property
    def dispatch_depth(self) -> int:
        """How many keys are queued, waiting for a dispatch."""
        queue = self._queue
        return 0 if queue is None else len(queue)

    def time_since_dispatch(self) -> float:
        """Seconds since the last ``dispatch()`` (or since creation)."""
        return self._clock() - self._last_dispatch

    def statistics(self) -> Statistics:
        """A frozen snapshot of this loader's counters."""
        with self._lock:
            call = self._call  # no batch call yet: nothing dispatched, every count 0
            errors, invokes, loads, exceptions, vc_hits, vc_misses = (0,) * 6 if call is None else call.counts_locked()
            hits, vc_hits = self._cache_hit_count, vc_hits + self._local_hit_count  # + value-cache hits at load time
            misses = self._miss_count + (0 if self._queue is None else len(self._queue))  # + the queued keys' loads
            return Statistics(misses + hits, errors, invokes, loads, exceptions, hits, vc_hits, vc_misses)

    @property
    def instrumentation(self) -> Optional[InstrumentationHooks]:
        """The instrumentation in use: the loader's own, or its registry's, or None."""
        return self._instrumentation

    def __repr__(self) -> str:
        return f"<DataLoader {self._name or hex(id(self))} depth={self.dispatch_depth}>"

    def _after_fork_in_child(self) -> None:
        queue = self._queue  # inside os.fork(): runs no user code and waits on no lock (see _loader_fork)
        _loader_fork.repair_in_child(self)
        if queue is not None and self._queue is None:  # the repair dropped it: its loads stay counted
            self._miss_count += len(queue)

    def _label(self) -> str:  # how errors name this loader (as its batch call's do)
        return loader_label(self._name)

    def _cache_failed(self, kind: str, exc: Exception) -> None:
        self._batch_call.cache_failed(kind, exc)

    def _fail_keys(self, batch: KeyQueue, exc: BaseException, sink: Optional[DispatchSink]) -> None:
        self._batch_call.fail_keys(batch, exc, sink)

    # -- loading -----------------------------------------------------------------
    def _cache_key(self, key: Any) -> Hashable:
        ck: Hashable = key if self._cache_key_fn is None else self._cache_key_fn(key)
        try:
            hash(ck)
        except TypeError:
            raise unhashable(ck) from None
        return ck

    def load(self, key: K, key_context: Any = None) -> Future[V]:
        """Return the future of *key*'s value: the cached one, pending or settled, else a new one with *key* queued.

        Raises:
            TypeError: the key (or its cache key) is not hashable.
        """
        if not self._plain or key_context is not None:
            if self._next_load is not None:
                _loader_cache.heard_next_load(self)
            return load_any(self, key, key_context)
        # The path of almost every load: load_any's steps for a plain loader (its own dict, a key its own
        # cache key, batching, no local tier) and no key context, with loader_future and the common case
        # of _enqueue_locked inlined (see the module notes).
        lock: Any = self._lock  # (Any: the futures' _lock, typed as a Lock, is this RLock)
        lock.acquire()  # not ``with``: it costs about twice as much (see _future)
        try:
            try:
                fut = self._cache.get(key)
            except TypeError:  # a dict's get raises it only for an unhashable key
                raise unhashable(key) from None
            if fut is not None:
                self._cache_hit_count += 1  # (_count_locked's, inline)
                return fut
            fut = LoaderFuture()  # loader_future(lock), its stores inline
            fut._lock, fut._state = lock, PENDING
            fut._result = fut._exception = fut._done_callbacks = fut._cond = fut._waiter_list = fut._follow = None
            fut._shared = lock
            self._cache[key] = fut
            queue = self._queue
            scope = current_scope()  # only a load that queues needs it
            if queue is not None and queue.keys and queue.contexts is None:
                # _enqueue_locked's common case, inline: one more key for a queue that holds keys
                fut._ticket = self._ticket
                queue.keys.append(key)  # (no cache_keys column: no cache_key_fn)
                queue.futures.append(fut)
                if self._told is scope:  # its scope heard of it
                    return fut
                hearing = heard_locked(self, scope, False)
            else:
                hearing = self._enqueue_locked(KeyQueue.one(key, key, None, fut, False), scope)
        finally:
            lock.release()
        if hearing is not None:  # once per queue and scope
            announce(self, hearing)
        return fut

    @overload
    def load_many(
        self, keys: Iterable[K], key_contexts: Any = None, *, return_exceptions: Literal[False] = False
    ) -> Future[list[V]]: ...

    @overload
    def load_many(
        self, keys: Iterable[K], key_contexts: Any = None, *, return_exceptions: bool
    ) -> Future[list[Union[V, BaseException]]]: ...

    def load_many(
        self,
        keys: Iterable[K],
        key_contexts: Any = None,
        *,
        return_exceptions: bool = False,
    ) -> Future[list[Any]]:
        """Return a future of the list of values for *keys*, in order.

        The future completes once every key has settled (at once when every
        key is cached and settled), or fails with the first failed key in key
        order (a cancelled one as ``CancelledError``): keys settled by one
        batch are all seen together; a key that fails in one batch while an
        earlier key waits for another is reported once the earlier one settles.

        Args:
            keys: the keys.
            key_contexts: a sequence parallel to ``keys``, or a mapping
                ``{key: key_context}``.
            return_exceptions: put a failed key's exception in the list
                instead of failing the whole future (as ``asyncio.gather``).

        Raises:
            TypeError: a key is not hashable, *keys* is a ``str`` or
            ``bytes`` (its characters would be loaded as keys), or
            ``return_exceptions`` is not a bool (no key is registered then);
            ValueError: ``key_contexts`` is a sequence of another length.
        """
        if self._next_load is not None:
            _loader_cache.heard_next_load(self)
        return _load_many.load_many(self, keys, key_contexts, return_exceptions)

    def prime(self, key: K, value: Union[V, Exception, cf.Future[V]]) -> DataLoader[K, V]:
        """Put *value* in the cache for *key*, unless *key* is cached already.

        As java-dataloader's ``prime(K, V)`` and ``prime(K, CompletableFuture<V>)``:
        an ``Exception`` is cached as a failure; a ``concurrent.futures.Future``
        is cached as its outcome (its value, or its failure; a cancelled one as
        a ``CancelledError`` failure), also when it is not done yet: loads of
        *key* then complete when it does, and nothing is queued for *key*.

        Returns:
            This loader (calls chain).

        Raises:
            TypeError: the key (or its cache key) is not hashable.
        """
        _loader_cache.prime(self, key, value)
        return self

    def clear(self, key: K) -> DataLoader[K, V]:
        """Forget the cached value of *key* (the next load queues it again)."""
        ck = self._cache_key(key)
        with self._lock:
            try:
                del self._cache[ck]
            except KeyError:
                pass
        return self

    def clear_all(self) -> DataLoader[K, V]:
        """Forget every cached value."""
        with self._lock:
            self._cache.clear()
        return self

    # -- _sync_on_demand's TicketLoader seam: a thread blocks on, or cancels, one of our futures --------
    def _dispatch_for(self, ticket: Ticket) -> bool:
        """Dispatch, if the keys stamped with *ticket* are still queued; True if it did.

        Called by a thread blocked on one of those keys (see ``_sync_on_demand``): a dispatch like any
        other (instrumented as one), with every key queued on this loader.
        """
        if ticket is not self._ticket:  # a cheap first look; _take_queue decides under the lock
            return False
        if self._instrumentation is not None:  # the one test an uninstrumented dispatch pays
            told = self._dispatch_told(ticket)
            if told is not None:
                return told.keys_count > 0
        queue = self._take_queue(ticket)
        if queue is None:
            return False
        self._batch_call.send(queue)
        return True

    def _abandoned_at_fork(self, fut: Future[Any]) -> bool:
        """A forked child's thread blocks on *fut*, a key a parent dispatched (see ``_loader_fork.abandon``)."""
        return _loader_fork.abandon(self, fut)

    def _forget_cancelled(self, fut: Future[Any], ticket: Ticket) -> None:
        """*fut* was cancelled (``Future.cancel``): see ``_loader_cache.forget_cancelled``."""
        _loader_cache.forget_cancelled(self, fut, ticket)

    # -- dispatching ---------------------------------------------------------
    def _enqueue_locked(self, new: KeyQueue, scope: Any) -> Optional[Hearing]:
        """Queue the loads of *new* (made by the caller, their futures cached), under ``_lock``.

        The one way a key enters the queue (``load()`` and ``_load_any.load_any`` inline its
        common case: one more key for a queue that holds keys): the queue and its ticket
        are made on the first load since a dispatch, each future is stamped with the ticket
        (``_sync_on_demand``), and ``_listeners.heard_locked`` says who is to hear of it, told by the
        caller once the lock is released (``_listeners.announce``).  A queued load is
        counted with its queue, when a dispatch takes it (``_take_queue``).
        """
        queue = self._queue
        if queue is None:  # the first load since the last dispatch
            queue = self._queue = KeyQueue(self._cache_key_fn is not None)
            self._ticket = Ticket(self._ref)
        first = not queue.keys
        ticket = self._ticket
        for fut in new.futures:
            fut._ticket = ticket
        queue.extend(new)
        return heard_locked(self, scope, first)

    def _count_locked(self, hits: int = 0, misses: int = 0, local_hits: int = 0) -> None:
        """Count loads answered at once, under ``_lock``: *hits* from the cache, *misses* loaded without
        a queue (``batch=False``), *local_hits* by the value cache's local tier (a miss of the cache too).

        The loader's three load counters are changed here and in its own methods only (``load()``
        counts its hit inline); a queued load is counted when a dispatch takes its queue.
        """
        self._cache_hit_count += hits
        self._miss_count += misses + local_hits
        self._local_hit_count += local_hits

    def _take_queue(self, ticket: Optional[Ticket] = None) -> Optional[KeyQueue]:
        """Swap the queue out (None when empty); a dispatch, even an empty one, resets the dispatch time.

        With *ticket*: only if it is still the current one (its keys are still queued), else None.
        """
        now = self._clock()  # an injected clock is user code: not under the lock
        with self._lock:
            if ticket is not None and ticket is not self._ticket:
                return None
            self._last_dispatch = now
            queue = self._queue
            if not queue:  # an idle loader (most of them, on most ticks) allocates nothing
                return None
            ticket = self._ticket
            assert ticket is not None, "a queue has its ticket"
            ticket.taken_in = _fork.generation
            self._queue = self._ticket = None  # the next load makes new ones
            self._miss_count += len(queue)  # the loads of its keys (see __init__)
            self._told = None  # the next load tells its scope again
        return queue

    def dispatch_count(self) -> int:
        """Dispatch the queued keys; return how many (no result future is built)."""
        if self._instrumentation is not None:
            told = self._dispatch_told()
            if told is not None:
                return told.keys_count
        queue = self._take_queue()
        if queue is None:
            return 0
        self._batch_call.send(queue)
        return len(queue)

    def dispatch_with_counts(self) -> DispatchResult:
        """Dispatch the queued keys; return their future and how many there were."""
        if self._instrumentation is not None:
            told = self._dispatch_told()
            if told is not None:
                return told
        return self._dispatch_with_counts()

    def _dispatch_told(self, ticket: Optional[Ticket] = None) -> Optional[DispatchResult]:
        """Every dispatch path's instrumentation: ``begin_dispatch``, the dispatch, its context told how it ended.

        Returns:
            The dispatch's result; None when there is no instrumentation or ``begin_dispatch``
            returned no context (the caller then dispatches its own lean way, nothing done yet).
        """
        instrumentation = self._instrumentation
        if instrumentation is None:
            return None
        context = _instrumentation_seam.begin_dispatch(instrumentation, self)
        if context is None:
            return None
        try:
            result = self._dispatch_with_counts(ticket)
        except BaseException as exc:
            _instrumentation_seam.completed(context, None, exc)
            raise
        _instrumentation_seam.completed(context, result, None)
        return result

    def _dispatch_with_counts(self, ticket: Optional[Ticket] = None) -> DispatchResult:
        queue = self._take_queue(ticket)
        if queue is None:
            return DispatchResult(completed_future([]), 0)
        sink = DispatchSink(len(queue), self._batch_call.slices(len(queue)))
        self._batch_call.send(queue, sink)
        return DispatchResult(sink.future, len(queue))

    def dispatch(self) -> Future[list[V]]:
        """Send every queued key to the batch function; a future of their values (failed if any key fails)."""
        return self.dispatch_with_counts().future

    def dispatch_and_join(self) -> list[V]:
        """Dispatch until nothing is queued, waiting for each; all the values.

        Loads queued by callbacks while waiting are dispatched too.

        Raises:
            Exception: the first error of a dispatched key.
        """
        values = self.dispatch().result()
        while self.dispatch_depth:
            values.extend(self.dispatch().result())
        return values

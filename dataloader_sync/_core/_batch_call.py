"""The batch call of a DataLoader: from the queue a dispatch took to settled futures.

``DataLoader`` (``_dataloader``) queues and caches loads and takes the queue
when it dispatches; what happens to that queue is its ``BatchCall``'s, here: the value-cache
step, the batch function's calls (one per ``max_batch_size`` slice, on the
dispatching thread or an executor, in a copy of the dispatcher's context),
matching its result to the keys, settling the keys' futures, failing and
evicting them.

Guarantees:
- A batch that fails as a whole fails all its keys and evicts them from the
  cache, so a later load retries; a per-key ``Exception`` result fails only
  that key (and stays cached unless ``cache_exceptions=False``).
- Every dispatch settles every key it took, even when a ``BaseException``
  that is not an ``Exception`` (``KeyboardInterrupt``, ``SystemExit``, a
  gevent timeout) escapes a batch function, ``context_provider`` or a
  callback: the keys of the batch that raised fail with it, the keys of
  slices not called yet fail with ``CancelledError`` (its ``__cause__`` is
  the exception), all of them leave the cache, and then the exception
  propagates to the dispatcher.  Callbacks of settled futures all run before.
- The batch function, ``context_provider``, instrumentation and done
  callbacks never run under the loader's lock (see ``_dataloader``).
- On a loader's ``executor=``, the batch function runs inside the job hooks
  (``_job_hooks``), on the executor's thread.
"""
from __future__ import annotations

import concurrent.futures as cf
import contextvars
import inspect
import logging
import threading
import weakref
from collections.abc import Hashable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import (
    Any,
    Callable,
    Optional,
)

from . import _instrumentation_seam, _job_hooks, _value_cache
from ._batch_shapes import (
    BatchLoaderEnvironment,
    BatchLoadError,
    DispatchSink,
    KeyQueue,
)
from ._future import Future, settle
from ._future_lock import settle_many
from ._instrumentation_seam import InstrumentationHooks
from ._single_flight import SingleFlight
from ._value_cache import MISSING, ValueCache

__all__ = ["BatchCall", "BatchSettings", "loader_label"]

_LOGGER = logging.getLogger("dataloader_sync")
_LEASE_LOST = Exception("the key's lease was lost: it was invalidated while it loaded")


@dataclass(frozen=True)
class BatchSettings:
    """A loader's options that only its batch call reads (``DataLoader``'s arguments of these names).

    Checked by the loader before it makes one (``_loader_options.check_arguments``); the
    loader holds it until its first dispatch makes the batch call from it.
    """

    executor: Optional[cf.Executor] = None
    pass_env: bool = False
    context: Any = None
    context_provider: Optional[Callable[[], Any]] = None
    max_batch_size: Optional[int] = None
    cache_exceptions: bool = True
    value_cache: Optional[ValueCache[Any, Any]] = None


class BatchCall:
    """The batch call of one ``DataLoader``, which holds it (as java-dataloader's
    ``DataLoader`` holds its ``DataLoaderHelper``).

    It owns the batch function and everything a batch call needs (executor,
    instrumentation, environment, slicing, the value cache) and the counters
    of what its calls did.  It shares the loader's lock (the lock of the
    loader's futures, see ``_future``) and the loader's cache, whose failed
    keys it evicts; it holds the loader only by weak reference (the loader
    is what instrumentation hooks are told of), so a loader is freed without
    the cyclic GC, and a batch in flight still settles its keys when the
    loader is gone.

    Thread-safe: ``_lock`` (the loader's) guards the counters, ``_cache``
    and ``_cache_errors_logged``, taken only around their updates; user code
    (batch function, ``context_provider``, hooks, callbacks) runs outside it.
    """

    def __init__(
        self,
        loader: weakref.ref[Any],
        lock: threading.RLock,
        *,
        batch_load_fn: Callable[..., Any],
        name: Optional[str],
        instrumentation: Optional[InstrumentationHooks],
        settings: BatchSettings,
        cache_enabled: bool,
        cache: MutableMapping[Hashable, Future[Any]],
    ) -> None:
        self._loader = loader
        self._lock = lock
        self._batch_load_fn = batch_load_fn
        self._name = name
        executor = self._executor = settings.executor
        # An executor that runs each task in a copy of the submitter's contextvars context says so
        # (ScheduledExecutor.copies_context): the batch call then submits the batch function itself.
        self._copies_context = getattr(executor, "copies_context", False) is True
        self._instrumentation = instrumentation
        self._pass_env = settings.pass_env
        self._context = settings.context
        self._context_provider = settings.context_provider
        self._max_batch_size = settings.max_batch_size
        self._cache_enabled = cache_enabled
        self._cache = cache
        self._cache_exceptions = settings.cache_exceptions
        value_cache = self._value_cache = settings.value_cache
        self._leasing = _value_cache.leasing_of(value_cache)  # misses are leased, written by compare and set
        self._cache_errors_logged: tuple[str, ...] = ()  # "read"/"write"/"delete" already logged (no set per loader)
        self._load_error_count = 0
        self._batch_invoke_count = 0
        self._batch_load_count = 0
        self._batch_load_exception_count = 0
        self._value_cache_hit_count = 0
        self._value_cache_miss_count = 0

    def registered(self, name: Optional[str], instrumentation: Optional[InstrumentationHooks]) -> None:
        """The loader's name and instrumentation in use changed (a registry took it)."""
        self._name = name
        self._instrumentation = instrumentation

    def counts_locked(self) -> tuple[int, int, int, int, int, int]:
        """The counters, for the loader's ``statistics()`` (which holds ``_lock``):
        load errors, batch invokes, batch loads, batch exceptions, value-cache hits, misses."""
        return (self._load_error_count, self._batch_invoke_count, self._batch_load_count,
                self._batch_load_exception_count, self._value_cache_hit_count, self._value_cache_miss_count)

    def send(self, queue: KeyQueue, sink: Optional[DispatchSink] = None) -> None:
        """Settle every key of *queue* (a queue the loader took): the value cache, then the batch calls."""
        if self._value_cache is not None:
            # The value-cache step, between taking the queue and the batch
            # calls: hits settle here, only the misses go on (and, with single
            # flight, only those no other thread is loading already).
            self._send_through_value_cache(queue, sink)
            return
        self._send_slices(queue, sink)

    def _send_slices(self, queue: KeyQueue, sink: Optional[Any]) -> None:
        """The batch calls of *queue*: one, or one per ``max_batch_size`` slice."""
        size = self._max_batch_size
        if size is None or len(queue) <= size:
            self._call_batch_load_fn(queue, sink, 0)
        else:
            for i in range(0, len(queue), size):
                try:
                    self._call_batch_load_fn(queue.slice(i, i + size), sink, i)
                except BaseException as exc:  # only non-Exceptions get here: see _call_batch_load_fn
                    self.abandon(queue.slice(i + size, len(queue)), exc, sink)
                    raise

    def slices(self, n_keys: int) -> int:
        """How many batch calls *n_keys* keys make (``max_batch_size``)."""
        size = self._max_batch_size or n_keys or 1
        return -(-n_keys // size)

    def abandon(self, rest: KeyQueue, exc: BaseException, sink: Optional[Any] = None) -> None:
        """Fail the keys of a dispatch that *exc* interrupted before their batch was called."""
        if not rest:
            return
        error = cf.CancelledError(
            f"{self.label()}: batch not called, an earlier batch of the same dispatch raised {type(exc).__name__}"
        )
        error.__cause__ = exc
        self.fail_keys(rest, error, sink)

    # -- the value cache -----------------------------------------------------------
    def _send_through_value_cache(self, queue: KeyQueue, sink: Optional[DispatchSink]) -> None:
        """Look up, settle the hits, send the misses (waiting for other threads' flights, if any)."""
        misses = self._settle_value_cache_hits(queue, sink)
        if misses is None:
            return
        # Lease only after a lookup that worked: one that failed (a breaker turned off) is not asked again.
        leasing = self._leasing and not misses.failed
        flights = _value_cache.flights_of(self._value_cache)
        if flights is None:
            own, waiting = list(misses), list[tuple[int, Any]]()
        else:
            own, waiting = flights.join(queue.cached_under(), queue.futures, misses)
        n_own = self.slices(len(own))
        if sink is not None and (len(own) != len(queue) or waiting):
            # The slices the dispatch's future waits for: ours, plus one held
            # back for the waiting keys until their flights are decided.
            sink.expect(n_own + (1 if waiting else 0))
        if own:
            whole = len(own) == len(queue)
            try:
                if leasing:
                    self._lease(queue, own, sink)
                self._send_slices(queue if whole else queue.take(own),
                                  sink if whole or sink is None else sink.part(own))
            except BaseException as exc:  # not an Exception: the waiting keys settle too
                if waiting:
                    rest = [i for i, _ in waiting]
                    self.abandon(queue.take(rest), exc, None if sink is None else sink.part(rest))
                raise
        if waiting:
            self._wait_for_flights(flights, queue, sink, waiting, leasing)  # type: ignore[arg-type]

    def _wait_for_flights(self, flights: SingleFlight, queue: KeyQueue, sink: Optional[DispatchSink],
                          waiting: list[tuple[int, Any]], leasing: bool) -> None:
        """Settle the keys other threads loaded; load those whose flight failed or was late."""
        outcomes = flights.wait([flight for _, flight in waiting])  # no lock held, bounded
        futures = queue.futures
        fallback: list[int] = []
        escaped: Optional[BaseException] = None
        for (i, _), (ok, value) in zip(waiting, outcomes):
            if not ok:
                fallback.append(i)
                continue
            if sink is not None:
                sink.values[i] = value
            try:
                settle(futures[i], value, None)
            except BaseException as exc:  # a callback's: settle the others first
                if escaped is None:
                    escaped = exc
        if escaped is not None:
            if fallback:
                self.abandon(queue.take(fallback), escaped, None if sink is None else sink.part(fallback))
            elif sink is not None:
                sink.add_slices(-1)
            raise escaped
        if not fallback:
            if sink is not None:
                sink.add_slices(-1)  # the held-back slice: every waiting key landed
            return
        if sink is not None:
            sink.add_slices(self.slices(len(fallback)) - 1)
        if leasing:
            self._lease(queue, fallback, sink)
        self._send_slices(queue.take(fallback), None if sink is None else sink.part(fallback))

    def _lease(self, queue: KeyQueue, indexes: list[int], sink: Optional[DispatchSink]) -> None:
        """Lease the keys at *indexes* of *queue* before their batch call (``queue.leases``); a key the
        cache gave no lease (it failed, or its breaker is open) is loaded and not written."""
        cks = queue.cached_under()
        try:
            leases = _value_cache.take_leases(self._value_cache, [cks[i] for i in indexes])
        except BaseException as exc:  # not an Exception (those are logged): the keys settle first
            self.abandon(queue.take(indexes), exc, None if sink is None else sink.part(indexes))
            raise
        if leases is None:
            return
        column = queue.leases
        if column is None:
            column = queue.leases = [None] * len(queue)
        for i, lease in zip(indexes, leases):
            column[i] = lease

    def _settle_value_cache_hits(self, queue: KeyQueue, sink: Optional[DispatchSink]) -> Optional[Misses]:
        """Look the dispatch's keys up with one ``get_values``; settle the hits.

        Returns:
            The positions of the misses in *queue* (``failed``: the lookup
            failed, every key is one); None when every key was a hit (the
            dispatch is complete).
        """
        try:
            found = _value_cache.look_up(self._value_cache, list(queue.cached_under()))
        except BaseException as exc:  # not an Exception (those are logged): every key settles first
            self.fail_keys(queue, exc, sink)
            raise
        # The one place where a lookup's hits and misses are known (by
        # identity, with no Python per key: see _value_cache.identical).
        n_keys = len(queue)
        if found is None:
            n_hits = 0
        else:
            is_missing = _value_cache.identical(found, MISSING)
            n_hits = n_keys - sum(is_missing)
        with self._lock:
            self._value_cache_hit_count += n_hits
            self._value_cache_miss_count += n_keys - n_hits
        if self._instrumentation is not None:
            _instrumentation_seam.value_cache_lookup(self._instrumentation, self._loader(), n_hits, n_keys - n_hits)
        if not n_hits:
            return Misses(range(n_keys), found is None)
        assert found is not None
        if n_hits == n_keys:  # every key a hit (a warm cache): the lean path
            try:
                settle_many(self._lock, queue.futures, found)  # every key settles before a callback's raise
            finally:
                if sink is not None:
                    sink.values[:] = found
                    sink.expect(0)  # the dispatch's future settles now
            return None
        misses, hits = _value_cache.positions(is_missing)
        futures = queue.futures
        # A callback's BaseException (see Future._invoke_callbacks) must not
        # leave keys pending: settle every hit, abandon the misses, then re-raise.
        escaped: Optional[BaseException] = None
        try:
            settle_many(self._lock, [futures[i] for i in hits], [found[i] for i in hits])
        except BaseException as exc:
            escaped = exc
        if sink is not None:
            values = sink.values
            for i in hits:
                values[i] = found[i]
        if escaped is not None:
            if sink is not None:
                sink.expect(self.slices(len(misses)))
            self.abandon(queue.take(misses), escaped, None if sink is None else sink.part(misses))
            raise escaped
        return Misses(misses)

    # -- the batch call --------------------------------------------------------
    def _call_batch_load_fn(self, batch: KeyQueue, sink: Optional[DispatchSink] = None, offset: int = 0) -> None:
        """Call the user's ``batch_load_fn`` on *batch* (one slice of a dispatch, *offset* keys in; here,
        or on the loader's executor), then settle the batch's futures with its result, at once or when
        the future it returned is done; a raise fails the batch (*sink*: the dispatch's outcome)."""
        keys = list(batch.keys)  # the user's copy: our columns stay as they are
        with self._lock:
            self._batch_invoke_count += 1
            self._batch_load_count += len(keys)
        try:
            args: tuple[Any, ...] = (keys,)
            env = None
            if self._pass_env:
                env = self._environment(batch)
                args = (keys, env)
            if self._executor is None and self._instrumentation is None:
                result = self._batch_load_fn(*args)
            else:
                result = self._call_in_context(batch, keys, env, args)
        except BaseException as exc:
            self._fail_batch(batch, exc, sink)
            if not isinstance(exc, Exception):
                raise
            return
        if isinstance(result, cf.Future):
            result.add_done_callback(lambda f: self._on_batch_future(batch, f, sink, offset))
        else:
            self._complete_batch(batch, result, sink, offset)

    def _call_in_context(self, batch: KeyQueue, keys: list[Any], env: Optional[BatchLoaderEnvironment],
                         args: tuple[Any, ...]) -> Any:
        """The batch call in a copy of this thread's context: ``begin_batch`` runs
        in it first (what it sets there, the batch function sees), then the
        batch function, here or on the executor."""
        instrumentation = self._instrumentation
        executor = self._executor
        fn = self._batch_load_fn
        if executor is not None and _job_hooks.hooks:
            fn = _job_hooks.wrap(fn)  # the executor's thread is not the caller's: the job hooks around it
        if instrumentation is None and self._copies_context and executor is not None:
            return executor.submit(fn, *args)  # it runs tasks in a copy of this context
        context = contextvars.copy_context()
        if instrumentation is not None:
            batch.instr_context = context.run(
                _instrumentation_seam.begin_batch, instrumentation, self._loader(), keys, env)
        if executor is None:
            return context.run(fn, *args)
        if self._copies_context:
            # Submitted from inside our context, which it copies: the task is
            # the batch function itself (or its wrapper, named as it), so its slow-task log names it.
            return context.run(executor.submit, fn, *args)
        return executor.submit(context.run, fn, *args)

    def _end_batch(self, batch: KeyQueue, result: Any, error: Optional[BaseException]) -> None:
        """Tell the batch's instrumentation context how it ended (once: it is taken)."""
        context, batch.instr_context = batch.instr_context, None
        if context is not None:
            _instrumentation_seam.completed(context, result, error)

    def _environment(self, batch: KeyQueue) -> BatchLoaderEnvironment:
        context = self._context if self._context_provider is None else self._context_provider()
        contexts = batch.context_list()
        key_contexts: dict[Any, Any] = {}
        if batch.contexts is not None:
            for key, kc in zip(batch.keys, contexts):
                if kc is not None:
                    try:
                        key_contexts[key] = kc
                    except TypeError:  # an unhashable key (see cache_key_fn): in the list only
                        pass
        return BatchLoaderEnvironment(context, key_contexts, list(contexts))

    def _on_batch_future(self, batch: KeyQueue, fut: cf.Future[Any],
                         sink: Optional[DispatchSink], offset: int) -> None:
        if fut.cancelled():
            self._fail_batch(batch, cf.CancelledError(f"batch of {self.label()} was cancelled"), sink)
            return
        exc = fut.exception()
        if exc is not None:
            self._fail_batch(batch, exc, sink)
            return
        result = fut.result()
        if isinstance(result, cf.Future):  # a Future of a Future, from executor + async fn
            result.add_done_callback(lambda f: self._on_batch_future(batch, f, sink, offset))
        else:
            self._complete_batch(batch, result, sink, offset)

    def label(self) -> str:
        return loader_label(self._name)

    def _values_for(self, batch: KeyQueue, result: Any) -> list[Any]:
        """The batch result as one value per key, in order.

        Raises:
            BatchLoadError: a non-sequence, or a sequence of the wrong length.
            Exception: whatever the result's own ``get``/``len``/iteration raises.
        """
        if isinstance(result, Mapping):
            return [result.get(key) for key in batch.keys]
        if isinstance(result, Sequence) and not isinstance(result, (str, bytes)):
            values = list(result)
            if len(values) != len(batch):
                raise BatchLoadError(
                    f"{self.label()}: batch function returned {len(values)} values "
                    f"for {len(batch)} keys; it must return one per key, in order"
                )
            return values
        if inspect.iscoroutine(result):  # an async batch function behind a sync wrapper
            result.close()  # no "never awaited" warning on top of this error
            raise BatchLoadError(
                f"{self.label()}: batch function must return a sequence (one value per key) "
                "or a mapping, got a coroutine: it is async; write it with def (it runs on a thread: "
                "call your async code with asyncio.run() or asgiref's async_to_sync inside it)"
            )
        raise BatchLoadError(
            f"{self.label()}: batch function must return a sequence (one value per key) "
            f"or a mapping, got {type(result).__name__}"
        )

    def _complete_batch(self, batch: KeyQueue, result: Any,
                        sink: Optional[DispatchSink] = None, offset: int = 0) -> None:
        # A result that cannot be matched to the keys (wrong kind or count, a
        # Mapping lookup that raises, e.g. for unhashable keys) fails the batch:
        # the futures must complete whatever the result looks like.
        try:
            values = self._values_for(batch, result)
        except BaseException as exc:
            self._fail_batch(batch, exc, sink)
            if not isinstance(exc, Exception):
                raise
            return
        if batch.instr_context is not None:  # before the futures: their callbacks are not the batch's time
            self._end_batch(batch, values, None)
        # The failed keys' positions; the common case (no error) is seen from
        # the values' types alone, without a Python-level pass over them.
        failed = ([i for i, value in enumerate(values) if isinstance(value, BaseException)]
                  if any(issubclass(t, BaseException) for t in set(map(type, values))) else [])
        evict_error = None
        if failed:
            with self._lock:
                self._load_error_count += len(failed)
                if not self._cache_exceptions:
                    evict_error = self._evict_locked(batch, failed)
            if evict_error is not None:
                self.cache_failed("delete", evict_error)
        # A callback's BaseException (see Future._invoke_callbacks) must not
        # leave the rest of the batch pending: settle_many settles every key
        # first, and the exception is re-raised last.
        escaped: Optional[BaseException] = None
        try:
            settle_many(self._lock, batch.futures, values)
        except BaseException as exc:
            escaped = exc
        if sink is not None:
            sink.report(offset, values, values[failed[0]] if failed else None)
        if self._value_cache is not None:  # after the loads settled: they do not wait for the write
            cks = list(batch.cached_under())
            landed = values
            if not self._leasing:
                _value_cache.write(self._value_cache, cks, values)
            elif batch.leases is not None:  # no leases (the cache failed): nothing is written
                held = _value_cache.write_leased(self._value_cache, cks, values, batch.leases)
                if not all(_value_cache.identical(held, True)):
                    # A lost lease: the value may be older than an invalidation, and the flight's waiters
                    # load the key themselves, or take the value another load stored in its place.
                    landed = [value if h is True else _LEASE_LOST if h is MISSING else h
                              for value, h in zip(values, held)]
            flights = _value_cache.flights_of(self._value_cache)
            if flights is not None:  # after the write: a miss from now on finds the value in the cache
                flights.land(cks, batch.futures, landed)
        if escaped is not None:
            raise escaped

    def _evict_locked(self, batch: KeyQueue, indexes: Optional[list[int]] = None) -> Optional[Exception]:
        """Drop the batch's keys (or those at *indexes*) from the cache, where still theirs.

        Returns:
            The first error of a failing ``cache_map`` (for the caller to log
            once the lock is released), or None; the other keys are evicted
            all the same.
        """
        if not self._cache_enabled:
            return None
        cache = self._cache
        cks, futures = batch.cached_under(), batch.futures
        error = None
        for i in range(len(futures)) if indexes is None else indexes:
            try:
                if cache.get(cks[i]) is futures[i]:
                    del cache[cks[i]]
            except Exception as exc:
                if error is None:
                    error = exc
        return error

    def _fail_batch(self, batch: KeyQueue, exc: BaseException,
                    sink: Optional[DispatchSink] = None) -> None:
        if batch.instr_context is not None:
            self._end_batch(batch, None, exc)
        with self._lock:
            self._batch_load_exception_count += 1
        self.fail_keys(batch, exc, sink)

    def fail_keys(self, batch: KeyQueue, exc: BaseException, sink: Optional[Any]) -> None:
        """Fail every key of *batch* with *exc* and evict them; a callback's BaseException propagates last."""
        with self._lock:
            self._load_error_count += len(batch)
            evict_error = self._evict_locked(batch)
        if evict_error is not None:
            self.cache_failed("delete", evict_error)
        if self._value_cache is not None:
            flights = _value_cache.flights_of(self._value_cache)
            if flights is not None:  # the keys this batch owned: their waiters load them themselves
                flights.land_failed(batch.cached_under(), batch.futures)
        escaped: Optional[BaseException] = None
        try:
            settle_many(self._lock, batch.futures, [exc] * len(batch.futures))
        except BaseException as cb_exc:
            escaped = cb_exc
        if sink is not None:
            sink.report(0, [], exc)
        if escaped is not None:
            raise escaped

    def cache_failed(self, kind: str, exc: Exception) -> None:
        """Log a failing ``cache_map`` once per loader and kind ("read", "write", "delete")."""
        with self._lock:
            if kind in self._cache_errors_logged:
                return
            self._cache_errors_logged += (kind,)
        what = {"read": "a miss", "write": "the key stays uncached but is loaded",
                "delete": "the entry stays"}[kind]
        _LOGGER.warning("%s: cache_map %s failed (%s; logged once per loader)", self.label(), kind, what,
                        exc_info=exc)


class Misses(list):  # type: ignore[type-arg]
    """The positions of a lookup's misses; ``failed``: the lookup failed (every key is a miss)."""

    __slots__ = ("failed",)

    def __init__(self, positions: Any, failed: bool = False) -> None:
        super().__init__(positions)
        self.failed = failed


def loader_label(name: Optional[str]) -> str:
    """How errors and logs name the loader called *name*."""
    return f"DataLoader {name!r}" if name else "DataLoader"

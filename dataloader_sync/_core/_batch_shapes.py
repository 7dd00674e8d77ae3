"""The shapes around one batch: queued loads, what a batch function receives, how a dispatch reports.

These are data structures of ``DataLoader``; none of them takes a lock of
its own except ``DispatchSink`` (which guards only its own countdown).
"""
from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Any, NamedTuple, Optional

from ._future import Future, settle

__all__ = ["BatchLoadError", "BatchLoaderEnvironment", "DispatchResult"]


class KeyQueue:
    """Queued loads as parallel columns, in load order.

    No tuple per load: the cyclic GC then tracks one object (the future) per
    queued key instead of two, which matters with many requests in flight.
    ``cache_keys`` exists only with a ``cache_key_fn`` (otherwise a key is its
    own cache key); ``contexts`` only once a key context was given.  ``instr_context``
    is the instrumentation context of the batch call these loads are in
    (None until ``begin_batch`` returned one, and again once it was told).
    ``leases`` exists only once a leasing value cache gave the misses their
    leases (``_value_cache.take_leases``): one per load, None where it has none.

    It is an object with an interface, and the columns are part of it: the
    loader and its batch call read ``keys``, ``futures``, ``cache_keys``,
    ``contexts`` and ``instr_context`` directly (``cached_under()`` and
    ``context_list()`` fill in an absent column).  Rows are written only by
    ``one``/``add``/``extend``/``drop``/``slice``/``take``, with two exceptions:
    ``DataLoader.load`` and ``_load_any.load_any`` append to ``keys`` and
    ``futures`` themselves when ``cache_keys`` and ``contexts`` are None,
    which is exactly what ``add`` does then (a method call there is a
    measurable share of every queued load), and ``_load_many`` makes a queue
    of new keys from its two columns (``KeyQueue(False)``, then ``keys`` and
    ``futures`` set).  ``instr_context`` is the batch call's to set and take.
    """

    __slots__ = ("keys", "futures", "cache_keys", "contexts", "instr_context", "leases")

    def __init__(self, with_cache_keys: bool) -> None:
        self.keys: list[Any] = []
        self.futures: list[Future[Any]] = []
        self.cache_keys: Optional[list[Hashable]] = [] if with_cache_keys else None
        self.contexts: Optional[list[Any]] = None
        self.instr_context: Any = None
        self.leases: Optional[list[Any]] = None

    def __len__(self) -> int:
        return len(self.keys)

    @classmethod
    def one(cls, key: Any, ck: Hashable, key_context: Any, fut: Future[Any], with_cache_keys: bool) -> KeyQueue:
        """A queue of one load (a loader's ``_enqueue_locked`` takes queues; ``batch=False`` sends one)."""
        queue = cls(with_cache_keys)
        queue.add(key, ck, key_context, fut)
        return queue

    def add(self, key: Any, ck: Hashable, key_context: Any, fut: Future[Any]) -> None:
        self.keys.append(key)
        self.futures.append(fut)
        if self.cache_keys is not None:
            self.cache_keys.append(ck)
        if key_context is not None or self.contexts is not None:
            if self.contexts is None:
                self.contexts = [None] * (len(self.keys) - 1)
            self.contexts.append(key_context)

    def extend(self, other: KeyQueue) -> None:
        n = len(self.keys)
        self.keys.extend(other.keys)
        self.futures.extend(other.futures)
        if self.cache_keys is not None:
            self.cache_keys.extend(other.cached_under())
        if other.contexts is not None or self.contexts is not None:
            if self.contexts is None:
                self.contexts = [None] * n
            self.contexts.extend(other.context_list())

    def drop(self, index: int) -> None:
        """Remove the load at *index* (a cancelled one); linear in the queue's length."""
        del self.keys[index]
        del self.futures[index]
        if self.cache_keys is not None:
            del self.cache_keys[index]
        if self.contexts is not None:
            del self.contexts[index]
        if self.leases is not None:
            del self.leases[index]

    def slice(self, start: int, stop: int) -> KeyQueue:
        part = KeyQueue(False)
        part.keys = self.keys[start:stop]
        part.futures = self.futures[start:stop]
        if self.cache_keys is not None:
            part.cache_keys = self.cache_keys[start:stop]
        if self.contexts is not None:
            part.contexts = self.contexts[start:stop]
        if self.leases is not None:
            part.leases = self.leases[start:stop]
        return part

    def take(self, indexes: list[int]) -> KeyQueue:
        """The loads at *indexes*, in that order (the misses of a value-cache lookup)."""
        part = KeyQueue(False)
        part.keys = [self.keys[i] for i in indexes]
        part.futures = [self.futures[i] for i in indexes]
        if self.cache_keys is not None:
            part.cache_keys = [self.cache_keys[i] for i in indexes]
        if self.contexts is not None:
            part.contexts = [self.contexts[i] for i in indexes]
        if self.leases is not None:
            part.leases = [self.leases[i] for i in indexes]
        return part

    def cached_under(self) -> list[Hashable]:
        """The cache key of each load."""
        return self.keys if self.cache_keys is None else self.cache_keys

    def context_list(self) -> list[Any]:
        return [None] * len(self.keys) if self.contexts is None else self.contexts


class BatchLoaderEnvironment(NamedTuple):
    """What a ``pass_env=True`` batch function receives as its second argument.

    Attributes:
        context: the loader's ``context=`` value, or what ``context_provider()``
            returned for this batch (None when neither was given).
        key_contexts: ``{key: key_context}`` for the keys of this batch that
            were loaded with a key context (hashable keys only; an unhashable
            key's context is in ``key_contexts_list``).
        key_contexts_list: the key contexts in batch order (None where absent).
    """

    context: Any
    key_contexts: dict[Any, Any]
    key_contexts_list: list[Any]


class DispatchResult(NamedTuple):
    """``dispatch_with_counts()``: the dispatch's future and how many keys it sent."""

    future: Future[list[Any]]
    keys_count: int


class BatchLoadError(Exception):
    """A batch function's result could not be matched to its keys."""


class DispatchSink:
    """The future of one ``dispatch()``, completed from its batch slices' outcomes.

    One report per slice instead of a done-callback per key: the dispatch
    future costs O(slices) callbacks, not O(keys).
    """

    __slots__ = ("future", "values", "slices_left", "lock")

    def __init__(self, n_keys: int, n_slices: int) -> None:
        self.future: Future[list[Any]] = Future()
        self.values: list[Any] = [None] * n_keys
        self.slices_left = n_slices  # guarded by lock; 0 once the future is decided
        self.lock = threading.Lock()

    def expect(self, n_slices: int) -> None:
        """Before any report: the dispatch sends *n_slices* now (a value cache answered some keys).

        0 settles the future with the values set so far.
        """
        with self.lock:
            self.slices_left = n_slices
        if n_slices == 0:
            settle(self.future, self.values, None)

    def add_slices(self, n_slices: int) -> None:
        """While a report is still expected (one slice held back): *n_slices* more (may be -1)."""
        with self.lock:
            if self.slices_left == 0:
                return  # already decided (a slice failed)
            self.slices_left += n_slices
            decided = self.slices_left == 0
        if decided:
            settle(self.future, self.values, None)

    def part(self, positions: list[int]) -> _SinkPart:
        """A sink for a sub-queue whose load j is load ``positions[j]`` of this dispatch."""
        return _SinkPart(self, positions)

    def report(self, offset: int, values: list[Any], error: Optional[BaseException]) -> None:
        if error is None:
            self.values[offset : offset + len(values)] = values
        with self.lock:
            if self.slices_left == 0:
                return  # already failed by another slice
            self.slices_left = 0 if error is not None else self.slices_left - 1
            decided = self.slices_left == 0
        if decided:
            settle(self.future, None if error is not None else self.values, error)


class _SinkPart:
    """Reports of a sub-queue's slices, written at their loads' positions in the whole dispatch."""

    __slots__ = ("sink", "positions")

    def __init__(self, sink: DispatchSink, positions: list[int]) -> None:
        self.sink = sink
        self.positions = positions

    def report(self, offset: int, values: list[Any], error: Optional[BaseException]) -> None:
        if error is None:
            out, positions = self.sink.values, self.positions
            for j, value in enumerate(values, offset):
                out[positions[j]] = value
        self.sink.report(0, [], error)


"""Tests for dataloader_sync._core._load_local: loads answered at load time by a value cache's local tier
(``ValueCache.get_local_values``), with a ValueCache of the test's own.

The Redis near cache's side (no command sent, invalidations of another
process, a near cache that is not live) is in test_redis.py.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any, Optional

import pytest
from test_value_cache import DictValueCache, Recorder

from dataloader_sync import MISSING, DataLoader, completed_future, failed_future
from dataloader_sync._core import _value_cache
from dataloader_sync._core._future import Future

TIMEOUT = 10.0


class LocalDictValueCache(DictValueCache):
    """A DictValueCache with a local tier of its own (``local``), recording each ``get_local_values``."""

    def __init__(self, data: Optional[dict[Any, Any]] = None, local: Optional[dict[Any, Any]] = None) -> None:
        super().__init__(data)
        self.local: dict[Any, Any] = dict(local or {})
        self.local_gets: list[list[Any]] = []
        self.probe: Any = None  # called on each local lookup (to look at the loader's lock)

    def get_local_values(self, keys: Sequence[Any]) -> list[Any]:
        if self.probe is not None:
            self.probe()
        self.local_gets.append(list(keys))
        return [self.local.get(k, MISSING) for k in keys]


@pytest.fixture(autouse=True)
def fresh_failure_log(monkeypatch):
    monkeypatch.setattr(_value_cache, "FAILURES", _value_cache.FailureLog())


def test_load_many_of_local_hits_is_done_at_once_with_no_queue_no_dispatch_no_get_values_no_batch_call():
    vc = LocalDictValueCache(local={1: "one", 2: "two"})
    batch = Recorder()
    loader = DataLoader(batch, value_cache=vc)
    many = loader.load_many([1, 2])
    assert many.done() and many.result(0) == ["one", "two"]
    assert loader.dispatch_depth == 0 and loader.dispatch_count() == 0
    assert vc.gets == [] and batch.calls == [] and vc.local_gets == [[1, 2]]
    one = loader.load(1)
    assert isinstance(one, Future) and one.done() and one.result(0) == "one"
    assert loader.load(1) is one and loader.load(2) is loader.load(2)  # in the loader's cache, as dispatched keys
    assert vc.local_gets == [[1, 2]]  # held keys are not asked again
    stats = loader.statistics()
    assert (stats.load_count, stats.cache_hit_count, stats.value_cache_hit_count, stats.value_cache_miss_count) \
        == (6, 4, 2, 0)
    assert (stats.batch_invoke_count, stats.batch_load_count) == (0, 0)


def test_load_of_a_local_hit_is_a_done_future_and_a_miss_is_queued_and_looked_up_at_dispatch():
    vc = LocalDictValueCache(data={3: "three"}, local={1: "one"})
    batch = Recorder()
    loader = DataLoader(batch, value_cache=vc)
    hit = loader.load(1)
    assert hit.done() and hit.result(0) == "one" and loader.dispatch_depth == 0
    from_shared, loaded = loader.load(3), loader.load(4)
    assert not from_shared.done() and loader.dispatch_depth == 2
    loader.dispatch()
    assert (from_shared.result(TIMEOUT), loaded.result(TIMEOUT)) == ("three", 40)
    assert vc.gets == [[3, 4]] and batch.calls == [[4]]
    stats = loader.statistics()
    assert (stats.value_cache_hit_count, stats.value_cache_miss_count, stats.load_count) == (2, 1, 3)


def test_load_many_of_hits_and_misses_settles_the_hits_and_queues_only_the_misses_in_order():
    vc = LocalDictValueCache(local={1: "one", 3: "three"})
    batch = Recorder()
    loader = DataLoader(batch, value_cache=vc)
    held = loader.load(5)  # the loader holds 5: not asked
    many = loader.load_many([1, 2, 3, 5, 2])
    assert vc.local_gets == [[5], [1, 2, 3, 2]] and loader.dispatch_depth == 2  # 5 and 2 (once)
    assert loader.load(1).done() and loader.load(3).done() and not loader.load(2).done()
    loader.dispatch()
    assert many.result(TIMEOUT) == ["one", 20, "three", 50, 20]
    assert batch.calls == [[5, 2]] and held.result(0) == 50
    stats = loader.statistics()
    assert (stats.value_cache_hit_count, stats.value_cache_miss_count) == (2, 2)
    assert (stats.load_count, stats.cache_hit_count) == (9, 5)  # 5, the second 2, then 1, 3, 2 again


def test_load_many_of_a_repeated_hit_counts_the_repeat_as_a_cache_hit():
    vc = LocalDictValueCache(local={1: "one", 2: "two"})
    loader = DataLoader(Recorder(), value_cache=vc)
    assert loader.load_many([1, 2, 1]).result(0) == ["one", "two", "one"]
    stats = loader.statistics()
    assert (stats.load_count, stats.cache_hit_count, stats.value_cache_hit_count) == (3, 1, 2)
    assert loader.load(1) is loader.load(1)


def test_a_local_hit_that_is_an_exception_instance_fails_its_key_as_at_dispatch():
    error = ValueError("stored failure")
    vc = LocalDictValueCache(local={1: "one", 2: error})
    loader = DataLoader(Recorder(), value_cache=vc)
    assert loader.load_many([1, 2], return_exceptions=True).result(0) == ["one", error]
    with pytest.raises(ValueError, match="stored failure"):
        loader.load_many([1, 2]).result(0)
    assert loader.load(2).exception(0) is error


def test_prime_clear_and_clear_all_act_on_a_local_hit_as_on_any_cached_key():
    vc = LocalDictValueCache(local={1: "one"})
    batch = Recorder()
    loader = DataLoader(batch, value_cache=vc)
    first = loader.load(1)
    loader.prime(1, "primed")  # cached already: prime keeps it
    assert loader.load(1) is first
    loader.clear(1)
    vc.local[1] = "uno"
    again = loader.load(1)  # asked again
    assert again is not first and again.result(0) == "uno"
    loader.clear_all()
    vc.local.clear()
    missed = loader.load(1)
    assert not missed.done()
    loader.dispatch()
    assert missed.result(TIMEOUT) == 10 and batch.calls == [[1]]


def test_local_lookup_sees_cache_keys_and_works_with_batch_false_and_a_cache_map():
    vc = LocalDictValueCache(local={"k1": "one"})
    batch = Recorder()
    loader = DataLoader(batch, value_cache=vc, cache_key_fn=lambda key: f"k{key}")
    assert loader.load(1).result(0) == "one" and vc.local_gets == [["k1"]]
    assert loader.load_many([1]).result(0) == ["one"]
    each = DataLoader(batch, value_cache=vc, batch=False, cache_key_fn=lambda key: f"k{key}")
    assert each.load(1).result(0) == "one" and batch.calls == []  # batch=False: a hit calls nothing
    assert each.load(2).result(TIMEOUT) == 20 and batch.calls == [[2]]
    mapped = DataLoader(batch, value_cache=vc, cache_map={}, cache_key_fn=lambda key: f"k{key}")
    assert mapped.load_many([1, 3]).result(TIMEOUT) == ["one", 30] and batch.calls == [[2], [3]]


def test_a_value_cache_without_get_local_values_behaves_as_before():
    for vc in (DictValueCache({1: "one"}), LocalDictValueCache({1: "one"})):
        if isinstance(vc, LocalDictValueCache):
            vc.get_local_values = None  # type: ignore[assignment]  # an instance may turn it off
        loader = DataLoader(Recorder(), value_cache=vc)
        assert loader._local is None and loader._plain  # load() keeps its own path
        fut = loader.load(1)
        assert not fut.done() and loader.dispatch_depth == 1
        loader.dispatch()
        assert fut.result(TIMEOUT) == "one" and vc.gets == [[1]]
        assert loader.statistics().value_cache_hit_count == 1


def test_the_local_lookup_runs_outside_the_loaders_lock():
    held: list[bool] = []
    vc = LocalDictValueCache(local={1: "one"})
    loader = DataLoader(Recorder(), value_cache=vc)

    def probe() -> None:
        free = loader._lock.acquire(blocking=False)
        if free:
            loader._lock.release()
        held.append(not free)
        loader.statistics()  # takes the loader's lock: would deadlock if it were held

    vc.probe = probe
    loader.load(1)
    loader.load_many([1, 2, 3])
    assert held == [False, False]


def test_a_raising_or_malformed_local_lookup_is_logged_and_the_keys_load_at_dispatch(caplog):
    class Raising(LocalDictValueCache):
        def get_local_values(self, keys: Sequence[Any]) -> list[Any]:
            raise RuntimeError("local tier broken")

    class Short(LocalDictValueCache):
        def get_local_values(self, keys: Sequence[Any]) -> list[Any]:
            return []

    for vc in (Raising(data={1: "one"}), Short(data={1: "one"})):
        loader = DataLoader(Recorder(), value_cache=vc)
        with caplog.at_level(logging.WARNING, logger="dataloader_sync"):
            many = loader.load_many([1, 2])
            single = loader.load(3)
        loader.dispatch()
        assert many.result(TIMEOUT) == ["one", 20] and single.result(TIMEOUT) == 30
    messages = [r.getMessage() for r in caplog.records if r.name == "dataloader_sync"]
    assert len(messages) == 2 and all("get_local_values" in m for m in messages)


def test_the_instrumentation_is_told_of_load_time_hits_only_the_dispatch_tells_the_misses():
    log: list[Any] = []

    class Lookups:
        def begin_dispatch(self, loader: Any) -> None:
            return None

        def begin_batch(self, loader: Any, keys: list[Any], environment: Any) -> None:
            log.append(("batch", list(keys)))

        def value_cache_lookup(self, loader: Any, hits: int, misses: int) -> None:
            log.append(("lookup", hits, misses))

    vc = LocalDictValueCache(data={3: "three"}, local={1: "one", 2: "two"})
    loader = DataLoader(Recorder(), value_cache=vc, instrumentation=Lookups())
    loader.load_many([1, 2])
    loader.load(1)  # held: no lookup
    loader.load_many([2, 3, 4])
    loader.dispatch()
    assert log == [("lookup", 2, 0), ("lookup", 1, 1), ("batch", [4])]


def test_threads_loading_the_same_keys_get_one_future_per_key():
    vc = LocalDictValueCache(local={k: k * 100 for k in range(50)})
    loader = DataLoader(Recorder(), value_cache=vc)
    start = threading.Barrier(8)
    results: list[list[Future[Any]]] = []
    lock = threading.Lock()

    def run() -> None:
        start.wait(TIMEOUT)
        futures = [loader.load(k) for k in range(50)]
        loader.load_many(list(range(50))).result(TIMEOUT)
        with lock:
            results.append(futures)

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert len(results) == 8
    stats = loader.statistics()
    assert (stats.load_count, stats.value_cache_hit_count, stats.cache_hit_count) == (800, 50, 750)  # once a key
    assert stats.batch_invoke_count == 0
    for futures in results:
        assert all(f is loader.load(k) for k, f in enumerate(futures))


class FuturesValueCache(LocalDictValueCache):
    """A local tier that also hands out futures of its own (``get_local_futures``)."""

    def __init__(self, futures: dict[Any, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.futures = futures
        self.futures_gets: list[list[Any]] = []

    def get_local_futures(self, keys: Sequence[Any]) -> list[Any]:
        self.futures_gets.append(list(keys))
        return [self.futures.get(k, MISSING) for k in keys]


def test_load_many_caches_the_tiers_own_finished_futures_when_every_key_hits():
    shared = {1: completed_future("one"), 2: completed_future("two")}
    vc = FuturesValueCache(shared, local={1: "one", 2: "two"})
    first, second = DataLoader(Recorder(), value_cache=vc), DataLoader(Recorder(), value_cache=vc)
    assert first.load_many([1, 2]).result(0) == ["one", "two"]
    assert second.load_many([2, 1]).result(0) == ["two", "one"]
    assert first.load(1) is shared[1] is second.load(1)  # no future of the loader's own per hit
    assert vc.local_gets == [] and vc.futures_gets == [[1, 2], [2, 1]]
    stats = first.statistics()
    assert (stats.load_count, stats.value_cache_hit_count, stats.cache_hit_count) == (3, 2, 1)


def test_an_answer_of_get_local_futures_that_is_not_all_finished_values_is_checked_key_by_key():
    pending: Future[Any] = Future()
    vc = FuturesValueCache({1: completed_future("one"), 2: pending, 3: failed_future(ValueError("no")),
                            4: "not a future"}, local={1: "one"})
    batch = Recorder()
    loader = DataLoader(batch, value_cache=vc)
    many = loader.load_many([1, 2, 3])  # 2 pending and 3 failed: misses, loaded at dispatch
    assert loader.load(1).done() and loader.dispatch_depth == 2
    loader.dispatch()
    assert many.result(TIMEOUT) == ["one", 20, 30] and batch.calls == [[2, 3]] and not pending.done()
    other = DataLoader(batch, value_cache=vc)
    fut = other.load_many([4])  # not a future: the tier broke its contract (logged), a miss
    other.dispatch()
    assert fut.result(TIMEOUT) == [40]

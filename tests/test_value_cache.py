"""Tests for dataloader_sync._core._value_cache (ValueCache, MISSING) and DataLoader(value_cache=).

``DictValueCache`` is a complete in-process ValueCache over a dict, recording
its calls; the Redis and Django implementations are tested against real
servers in test_redis.py and test_django_value_cache.py.
"""
from __future__ import annotations

import concurrent.futures as cf
import logging
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Sequence
from typing import Any, Optional

import pytest
from value_cache_helpers import warnings_of

import dataloader_sync
from dataloader_sync import MISSING, DataLoader, Statistics, ValueCache, failed_future
from dataloader_sync._core import _value_cache

TIMEOUT = 10.0


class DictValueCache(ValueCache[Any, Any]):
    """A ValueCache over a dict that records every call."""

    def __init__(self, data: Optional[dict[Any, Any]] = None) -> None:
        self.data: dict[Any, Any] = dict(data or {})
        self.gets: list[list[Any]] = []
        self.sets: list[dict[Any, Any]] = []
        self.lock = threading.Lock()

    def get_values(self, keys: Sequence[Any]) -> list[Any]:
        with self.lock:
            self.gets.append(list(keys))
            return [self.data.get(k, MISSING) for k in keys]

    def set_values(self, keys: Sequence[Any], values: Sequence[Any]) -> None:
        with self.lock:
            self.sets.append(dict(zip(keys, values)))
            self.data.update(zip(keys, values))

    def delete(self, key: Any) -> None:
        with self.lock:
            self.data.pop(key, None)

    def clear(self) -> None:
        with self.lock:
            self.data.clear()


class BrokenValueCache(DictValueCache):
    """Raises on every call while ``broken`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.broken = True

    def get_values(self, keys: Sequence[Any]) -> list[Any]:
        if self.broken:
            raise ConnectionError("cache is down")
        return super().get_values(keys)

    def set_values(self, keys: Sequence[Any], values: Sequence[Any]) -> None:
        if self.broken:
            raise ConnectionError("cache is down")
        super().set_values(keys, values)


class Recorder:
    """A batch function that records its calls; "err*" keys fail, others load as key * 10 (str: key + "!")."""

    def __init__(self) -> None:
        self.calls: list[list[Any]] = []

    def __call__(self, keys: list[Any]) -> list[Any]:
        self.calls.append(list(keys))
        return [ValueError(k) if isinstance(k, str) and k.startswith("err") else
                (k + "!" if isinstance(k, str) else k * 10) for k in keys]


@pytest.fixture(autouse=True)
def fresh_failure_log(monkeypatch):
    """Each test gets its own rate-limited failure log (no state from other tests)."""
    monkeypatch.setattr(_value_cache, "FAILURES", _value_cache.FailureLog())


# -- the contract's names ----------------------------------------------------------------
def test_ValueCache_and_MISSING_are_public():
    assert "ValueCache" in dataloader_sync.__all__ and "MISSING" in dataloader_sync.__all__
    assert repr(MISSING) == "MISSING"
    assert MISSING is dataloader_sync.MISSING


def test_ValueCache_is_abstract_until_all_four_methods_exist():
    class OnlyGet(ValueCache):
        def get_values(self, keys):
            return [MISSING] * len(keys)

    with pytest.raises(TypeError):
        OnlyGet()  # type: ignore[abstract]
    DictValueCache()  # all four: fine


def test_DataLoader_value_cache_of_the_wrong_kind_is_a_TypeError():
    with pytest.raises(TypeError, match="value_cache"):
        DataLoader(Recorder(), value_cache=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="value_cache"):
        DataLoader(Recorder(), value_cache={})  # type: ignore[arg-type]


def test_DataLoader_value_cache_needs_caching():
    with pytest.raises(ValueError, match="value_cache needs cache=True"):
        DataLoader(Recorder(), cache=False, value_cache=DictValueCache())


# -- lookup and write-back ---------------------------------------------------------------
def test_DataLoader_value_cache_hits_complete_without_the_batch_function():
    vc = DictValueCache({1: "one", 3: "three"})
    batch = Recorder()
    loader = DataLoader(batch, value_cache=vc)
    futures = [loader.load(k) for k in (1, 2, 3, 4)]
    assert loader.dispatch().result(TIMEOUT) == ["one", 20, "three", 40]
    assert [f.result(TIMEOUT) for f in futures] == ["one", 20, "three", 40]
    assert vc.gets == [[1, 2, 3, 4]]  # one lookup for the dispatch
    assert batch.calls == [[2, 4]]  # only the misses
    assert vc.sets == [{2: 20, 4: 40}]  # one write of what the batch function returned


def test_DataLoader_value_cache_all_hits_make_no_batch_call():
    vc = DictValueCache({"a": 1, "b": None})  # None is a value, not a miss
    batch = Recorder()
    loader = DataLoader(batch, value_cache=vc)
    a, b = loader.load("a"), loader.load("b")
    result = loader.dispatch_with_counts()
    assert result.keys_count == 2
    assert result.future.result(TIMEOUT) == [1, None]
    assert (a.result(TIMEOUT), b.result(TIMEOUT)) == (1, None)
    assert batch.calls == [] and vc.sets == []


class Incomparable:
    """A value that cannot be compared (as a NumPy array's == answers no bool)."""

    __hash__ = object.__hash__

    def __eq__(self, other: object) -> bool:
        raise AssertionError("a cached value was compared")


def test_DataLoader_value_cache_tells_hits_from_misses_by_identity_never_by_a_values_eq():
    one, three = Incomparable(), Incomparable()
    vc = DictValueCache({1: one, 3: three})
    batch = Recorder()
    loader = DataLoader(batch, value_cache=vc)
    futures = [loader.load(k) for k in (1, 2, 3)]
    loader.dispatch()
    assert [f.result(TIMEOUT) is v for f, v in zip(futures, (one, None, three))] == [True, False, True]
    assert futures[1].result(TIMEOUT) == 20 and batch.calls == [[2]]
    loader = DataLoader(batch, value_cache=vc)  # all hits: the lean path
    many = loader.load_many([3, 1])
    loader.dispatch()
    got = many.result(TIMEOUT)
    assert got[0] is three and got[1] is one
    assert vc.gets[-1] == [3, 1] and batch.calls == [[2]]


def test_DataLoader_value_cache_second_loader_is_answered_by_the_first_loaders_writes():
    vc = DictValueCache()
    batch = Recorder()
    first = DataLoader(batch, value_cache=vc)
    first.load_many([1, 2])
    first.dispatch_and_join()
    second = DataLoader(batch, value_cache=vc)  # a new request: an empty per-request cache
    many = second.load_many([1, 2, 3])
    second.dispatch()
    assert many.result(TIMEOUT) == [10, 20, 30]
    assert batch.calls == [[1, 2], [3]]


def test_DataLoader_value_cache_never_stores_per_key_errors_or_failed_batches():
    vc = DictValueCache()
    loader = DataLoader(Recorder(), value_cache=vc)
    many = loader.load_many(["a", "err1", "b"], return_exceptions=True)
    loader.dispatch()
    values = many.result(TIMEOUT)
    assert values[0] == "a!" and isinstance(values[1], ValueError) and values[2] == "b!"
    assert vc.sets == [{"a": "a!", "b": "b!"}]

    def failing(keys):
        return failed_future(RuntimeError("batch failed"))

    broken_batch = DataLoader(failing, value_cache=vc)
    fut = broken_batch.load("c")
    broken_batch.dispatch()
    with pytest.raises(RuntimeError):
        fut.result(TIMEOUT)
    assert "c" not in vc.data and len(vc.sets) == 1


def test_DataLoader_value_cache_with_max_batch_size_looks_up_once_and_slices_the_misses():
    vc = DictValueCache({k: f"cached {k}" for k in (0, 2, 4, 6)})
    batch = Recorder()
    loader = DataLoader(batch, value_cache=vc, max_batch_size=2)
    many = loader.load_many(range(8))
    dispatched = loader.dispatch()
    expected = ["cached 0", 10, "cached 2", 30, "cached 4", 50, "cached 6", 70]
    assert dispatched.result(TIMEOUT) == expected
    assert many.result(TIMEOUT) == expected
    assert vc.gets == [list(range(8))]
    assert batch.calls == [[1, 3], [5, 7]]  # the misses, two per call
    assert vc.sets == [{1: 10, 3: 30}, {5: 50, 7: 70}]  # one write per batch call


def test_DataLoader_value_cache_dispatch_future_fails_with_a_missed_keys_error():
    vc = DictValueCache({"a": "cached"})
    loader = DataLoader(Recorder(), value_cache=vc, max_batch_size=1)
    a, err = loader.load("a"), loader.load("err")
    dispatched = loader.dispatch()
    with pytest.raises(ValueError):
        dispatched.result(TIMEOUT)
    assert a.result(TIMEOUT) == "cached"
    assert isinstance(err.exception(TIMEOUT), ValueError)


def test_DataLoader_value_cache_sees_cache_keys():
    vc = DictValueCache({"k1": "cached"})
    batch = Recorder()
    loader = DataLoader(lambda keys: batch([k["id"] for k in keys]), value_cache=vc,
                        cache_key_fn=lambda key: f"k{key['id']}")
    one, two = loader.load({"id": 1}), loader.load({"id": 2})
    loader.dispatch()
    assert (one.result(TIMEOUT), two.result(TIMEOUT)) == ("cached", 20)
    assert vc.gets == [["k1", "k2"]] and vc.sets == [{"k2": 20}]


def test_DataLoader_value_cache_with_batch_false_looks_up_each_load():
    vc = DictValueCache({1: "cached"})
    batch = Recorder()
    loader = DataLoader(batch, batch=False, value_cache=vc)
    assert loader.load(1).result(TIMEOUT) == "cached"
    assert loader.load(2).result(TIMEOUT) == 20
    assert vc.gets == [[1], [2]] and batch.calls == [[2]] and vc.sets == [{2: 20}]


def test_DataLoader_value_cache_write_follows_a_batch_future_on_an_executor():
    vc = DictValueCache({1: "cached"})
    batch = Recorder()
    with cf.ThreadPoolExecutor(1) as pool:
        loader = DataLoader(batch, value_cache=vc, executor=pool)
        many = loader.load_many([1, 2])
        loader.dispatch()
        assert many.result(TIMEOUT) == ["cached", 20]
    # The pool is shut down: the batch's completion (and its write) has run.
    assert batch.calls == [[2]] and vc.sets == [{2: 20}]


def test_DataLoader_value_cache_with_pass_env_gives_the_misses_their_key_contexts():
    vc = DictValueCache({"a": "cached"})
    seen: list[Any] = []

    def batch(keys, env):
        seen.append((list(keys), env.key_contexts_list))
        return [k + "!" for k in keys]

    loader = DataLoader(batch, pass_env=True, value_cache=vc)
    many = loader.load_many(["a", "b", "c"], ["ctx a", "ctx b", "ctx c"])
    loader.dispatch()
    assert many.result(TIMEOUT) == ["cached", "b!", "c!"]
    assert seen == [(["b", "c"], ["ctx b", "ctx c"])]


# -- prime / clear act on the per-request cache only ---------------------------------------
def test_DataLoader_prime_and_clear_do_not_touch_the_value_cache():
    vc = DictValueCache({1: "shared"})
    batch = Recorder()
    loader = DataLoader(batch, value_cache=vc)
    loader.prime(2, "primed")
    assert loader.load(2).result(TIMEOUT) == "primed"
    assert 2 not in vc.data and vc.sets == []
    first = loader.load(1)
    loader.dispatch()
    assert first.result(TIMEOUT) == "shared"
    loader.clear(1).clear_all()
    assert vc.data == {1: "shared"}  # clear/clear_all forget the request's futures only
    again = loader.load(1)
    loader.dispatch()
    assert again.result(TIMEOUT) == "shared" and batch.calls == []
    vc.delete(1)  # the application's invalidation
    loader.clear(1)
    fresh = loader.load(1)
    loader.dispatch()
    assert fresh.result(TIMEOUT) == 10 and batch.calls == [[1]]


# -- statistics ----------------------------------------------------------------------------
def test_Statistics_count_value_cache_hits_and_misses():
    vc = DictValueCache({1: "one"})
    loader = DataLoader(Recorder(), value_cache=vc)
    loader.load_many([1, 2, 3])
    loader.dispatch()
    loader.load(1)  # a per-request cache hit: no lookup
    stats = loader.statistics()
    assert (stats.value_cache_hit_count, stats.value_cache_miss_count) == (1, 2)
    assert (stats.batch_invoke_count, stats.batch_load_count, stats.cache_hit_count) == (1, 2, 1)
    assert stats.value_cache_hit_ratio == pytest.approx(1 / 3)
    assert stats.to_dict()["value_cache_hit_count"] == 1


def test_Statistics_count_a_failed_lookup_as_misses():
    loader = DataLoader(Recorder(), value_cache=BrokenValueCache())
    loader.load_many([1, 2])
    loader.dispatch()
    stats = loader.statistics()
    assert (stats.value_cache_hit_count, stats.value_cache_miss_count) == (0, 2)


def test_Statistics_without_a_value_cache_keep_their_value_cache_counts_at_zero():
    loader = DataLoader(Recorder())
    loader.load(1)
    loader.dispatch()
    stats = loader.statistics()
    assert stats.value_cache_hit_count == stats.value_cache_miss_count == 0
    assert stats.value_cache_hit_ratio == 0.0
    assert stats == Statistics(1, 0, 1, 1, 0, 0)  # old positional construction still matches


# -- a failing value cache -------------------------------------------------------------------
def test_DataLoader_value_cache_without_a_breaker_that_raises_is_bypassed_and_warned_about_once(caplog):
    vc = BrokenValueCache()
    vc.breaker = None  # no breaker: every call is tried, failures are logged rate-limited
    batch = Recorder()
    for _ in range(20):  # twenty requests while the cache is down
        loader = DataLoader(batch, value_cache=vc)
        many = loader.load_many([1, 2])
        loader.dispatch()
        assert many.result(TIMEOUT) == [10, 20]
    assert len(batch.calls) == 20
    warned = warnings_of(caplog)
    assert len(warned) == 1
    assert "cache is down" in warned[0].exc_text and "get_values" in warned[0].getMessage()

    vc.broken = False  # back: lookups and writes resume, and the recovery is said once
    with caplog.at_level(logging.INFO, logger="dataloader_sync"):
        loader = DataLoader(batch, value_cache=vc)
        many = loader.load_many([1, 2])
        loader.dispatch()
        assert many.result(TIMEOUT) == [10, 20]
    assert vc.data == {1: 10, 2: 20}
    infos = [r for r in caplog.records if r.levelno == logging.INFO and "works again" in r.getMessage()]
    assert len(infos) == 1 and "39 failures" in infos[0].getMessage()  # 20 lookups + 20 writes - 1 warned


def test_DataLoader_value_cache_that_fails_only_on_write_still_loads():
    class ReadOnly(DictValueCache):
        def set_values(self, keys, values):
            raise PermissionError("read-only replica")

    vc = ReadOnly({1: "cached"})
    loader = DataLoader(Recorder(), value_cache=vc)
    many = loader.load_many([1, 2])
    loader.dispatch()
    assert many.result(TIMEOUT) == ["cached", 20]


def test_DataLoader_value_cache_answer_of_the_wrong_length_is_all_miss(caplog):
    class Short(DictValueCache):
        def get_values(self, keys):
            return [f"bogus {k}" for k in keys[:-1]]

    batch = Recorder()
    loader = DataLoader(batch, value_cache=Short())
    many = loader.load_many([1, 2, 3])
    loader.dispatch()
    assert many.result(TIMEOUT) == [10, 20, 30]
    assert batch.calls == [[1, 2, 3]]
    assert "2 entries for 3 keys" in warnings_of(caplog)[0].exc_text


def test_DataLoader_value_cache_BaseException_fails_every_key_then_propagates():
    class Interrupted(DictValueCache):
        def get_values(self, keys):
            raise KeyboardInterrupt

    batch = Recorder()
    loader = DataLoader(batch, value_cache=Interrupted())
    futures = [loader.load(k) for k in (1, 2)]
    with pytest.raises(KeyboardInterrupt):
        loader.dispatch()
    for fut in futures:
        assert isinstance(fut.exception(TIMEOUT), KeyboardInterrupt)
    assert batch.calls == []
    retried = loader.load(1)  # the failed keys left the cache: a later load retries
    assert retried is not futures[0]


def test_DataLoader_value_cache_hit_whose_callback_raises_a_BaseException_settles_every_key():
    vc = DictValueCache({1: "cached"})
    batch = Recorder()
    loader = DataLoader(batch, value_cache=vc)
    hit, miss = loader.load(1), loader.load(2)

    def interrupt(_f):
        raise KeyboardInterrupt

    hit.add_done_callback(interrupt)
    with pytest.raises(KeyboardInterrupt):
        loader.dispatch()
    assert hit.result(TIMEOUT) == "cached"
    error = miss.exception(TIMEOUT)  # not sent: abandoned, as the later slices of an interrupted dispatch
    assert isinstance(error, cf.CancelledError) and isinstance(error.__cause__, KeyboardInterrupt)
    assert batch.calls == []


def test_DataLoader_value_cache_is_not_called_under_the_loaders_lock():
    held: list[bool] = []

    class Probe(DictValueCache):
        def get_values(self, keys):
            free = loader._lock.acquire(blocking=False)
            if free:
                loader._lock.release()
            held.append(not free)
            loader.statistics()  # takes the loader's lock: would deadlock if it were held
            return super().get_values(keys)

        def set_values(self, keys, values):
            loader.statistics()
            super().set_values(keys, values)

    loader = DataLoader(Recorder(), value_cache=Probe())
    fut = loader.load(1)
    loader.dispatch()
    assert fut.result(TIMEOUT) == 10 and held == [False]


def test_FailureLog_warns_again_after_the_interval_with_the_count_in_between(caplog):
    now = [100.0]
    log = _value_cache.FailureLog(interval=60.0, clock=lambda: now[0])
    cache = DictValueCache()
    for _ in range(5):
        log.failed(cache, "get_values", ConnectionError("down"))
    now[0] += 59.0
    log.failed(cache, "set_values", ConnectionError("down"))
    assert len(warnings_of(caplog)) == 1
    now[0] += 1.0
    log.failed(cache, "get_values", ConnectionError("down"))
    warned = warnings_of(caplog)
    assert len(warned) == 2 and "5 more failures" in warned[1].getMessage()
    other = DictValueCache()  # another cache has its own budget
    log.failed(other, "get_values", ConnectionError("down"))
    assert len(warnings_of(caplog)) == 3


FORK_WHILE_LOCKED = """
import os, signal, sys
from dataloader_sync._core import _value_cache

log = _value_cache.FAILURES
bad = 0
for _ in range(20):
    with log._lock:  # held at the fork, as by another thread logging a failure
        pid = os.fork()
        if pid == 0:
            signal.alarm(2)  # a child stuck on the inherited lock dies instead of hanging
            log.failed(object(), "get_values", ConnectionError("down"))
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    bad += status != 0
print(bad)
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_FailureLog_works_in_a_child_forked_while_its_lock_was_held():
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", FORK_WHILE_LOCKED], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0"


# -- the breaker in front of a user's own cache ---------------------------------------------------
def test_DataLoader_user_value_cache_gets_a_breaker_of_its_own(caplog):
    from dataloader_sync._core._breaker import live_breakers

    vc = BrokenValueCache()
    batch = Recorder()
    for _ in range(5):
        assert dataloader_sync_load(DataLoader(batch, value_cache=vc), [1, 2]) == [10, 20]
    breaker = _value_cache.breaker_of(vc)
    assert breaker is not None and breaker.is_open and breaker.name == "BrokenValueCache"
    assert breaker in live_breakers() and breaker.cool_down == _value_cache.DEFAULT_COOL_DOWN
    assert len(batch.calls) == 5 and len(warnings_of(caplog)) == 1


def test_DataLoader_user_value_cache_breaker_attribute_chooses_its_breaker():
    from conftest import FakeClock

    from dataloader_sync._core._breaker import Breaker

    clock = FakeClock()

    class Counting(BrokenValueCache):
        tried = 0

        def get_values(self, keys):
            Counting.tried += 1
            return super().get_values(keys)

    vc = Counting()
    vc.breaker = Breaker("mine", 2.0, clock=clock)
    batch = Recorder()
    for _ in range(3):
        dataloader_sync_load(DataLoader(batch, value_cache=vc), [1])
    assert Counting.tried == 1
    vc.broken = False
    clock.advance(2.0)
    assert dataloader_sync_load(DataLoader(batch, value_cache=vc), [1]) == [10]
    assert Counting.tried == 2 and not vc.breaker.is_open and vc.data == {1: 10}


def dataloader_sync_load(loader: DataLoader, keys: list[Any]) -> list[Any]:
    many = loader.load_many(keys)
    loader.dispatch()
    return many.result(TIMEOUT)


# -- single flight ----------------------------------------------------------------------------------
class CountingFlights:
    """A SingleFlight that says how many keys joined flights (owners and waiters), for the tests to wait on."""

    def __new__(cls, timeout: float = 10.0) -> Any:
        from dataloader_sync._core._single_flight import SingleFlight

        class Counting(SingleFlight):
            def __init__(self) -> None:
                super().__init__(timeout)
                self.joined = 0
                self.changed = threading.Condition()

            def join(self, cache_keys, futures, indexes):
                out = super().join(cache_keys, futures, indexes)
                with self.changed:
                    self.joined += len(indexes)
                    self.changed.notify_all()
                return out

            def wait_for_joins(self, n: int) -> bool:
                with self.changed:
                    return self.changed.wait_for(lambda: self.joined >= n, TIMEOUT)

        return Counting()


def stampede(vc: Any, batch: Any, n_threads: int, keys: list[Any]) -> list[list[Any]]:
    """*n_threads* requests at once, each a fresh loader loading *keys*; their values."""
    start = threading.Barrier(n_threads)

    def request(_: int) -> list[Any]:
        loader = DataLoader(batch, value_cache=vc)
        many = loader.load_many(keys)
        start.wait(TIMEOUT)
        loader.dispatch()
        return many.result(TIMEOUT)

    with cf.ThreadPoolExecutor(n_threads) as pool:
        return list(pool.map(request, range(n_threads)))


@pytest.mark.parametrize("single_flight", [True, False])
def test_DataLoader_single_flight_32_threads_missing_one_key_make_one_batch_call(single_flight):
    vc = DictValueCache()
    flights = CountingFlights()
    if single_flight:
        vc.flights = flights  # type: ignore[attr-defined]
    calls: list[list[Any]] = []
    lock = threading.Lock()
    all_in = threading.Barrier(32)

    def batch(keys):
        with lock:
            calls.append(list(keys))
        if single_flight:
            assert flights.wait_for_joins(64)  # every other request is waiting for this flight (2 keys each)
        else:
            all_in.wait(TIMEOUT)  # every request calls its batch function: none finds the value written
        return [f"row {k}" for k in keys]

    values = stampede(vc, batch, 32, ["hot", "cold"])
    assert values == [["row hot", "row cold"]] * 32
    per_key = {k: sum(k in c for c in calls) for k in ("hot", "cold")}
    if single_flight:
        assert per_key == {"hot": 1, "cold": 1} and len(flights) == 0  # no flight left behind
    else:
        assert per_key == {"hot": 32, "cold": 32}  # the stampede single flight prevents


def test_DataLoader_single_flight_failure_releases_the_waiters_to_load_themselves():
    vc = DictValueCache()
    flights = CountingFlights(600.0)  # a waiter that waited for the timeout would fail the test
    vc.flights = flights  # type: ignore[attr-defined]
    owner_in = threading.Event()
    release = threading.Event()
    calls: list[list[Any]] = []

    def batch(keys):
        calls.append(list(keys))
        if len(calls) == 1:
            owner_in.set()
            release.wait(TIMEOUT)
            return [ValueError("db hiccup") for _ in keys]  # the owner's keys fail: never written
        return [f"row {k}" for k in keys]

    owner = DataLoader(batch, value_cache=vc)
    owned = owner.load("k")
    waiter = DataLoader(batch, value_cache=vc)
    waited = waiter.load("k")
    with cf.ThreadPoolExecutor(2) as pool:
        first = pool.submit(owner.dispatch)
        assert owner_in.wait(TIMEOUT)
        second = pool.submit(waiter.dispatch)
        assert flights.wait_for_joins(2)  # the waiter is waiting for the owner's flight
        release.set()
        first.result(TIMEOUT)
        assert second.result(TIMEOUT).result(TIMEOUT) == ["row k"]
    with pytest.raises(ValueError, match="hiccup"):
        owned.result(TIMEOUT)
    assert waited.result(TIMEOUT) == "row k"  # loaded by the waiter's own batch function
    assert calls == [["k"], ["k"]] and vc.data == {"k": "row k"}


def test_DataLoader_single_flight_waiter_waits_at_most_the_timeout_then_loads_itself():
    from dataloader_sync._core._single_flight import SingleFlight

    vc = DictValueCache()
    vc.flights = SingleFlight(0.2)  # type: ignore[attr-defined]
    owner_in, release = threading.Event(), threading.Event()
    calls: list[list[Any]] = []

    def batch(keys):
        calls.append(list(keys))
        if len(calls) == 1:  # the owner hangs
            owner_in.set()
            release.wait(TIMEOUT)
            return ["late " + k for k in keys]
        return ["own " + k for k in keys]

    owner = DataLoader(batch, value_cache=vc)
    owned = owner.load("k")
    with cf.ThreadPoolExecutor(1) as pool:
        first = pool.submit(owner.dispatch)
        try:
            assert owner_in.wait(TIMEOUT)
            waiter = DataLoader(batch, value_cache=vc)
            waited = waiter.load("k")
            waiter.dispatch()  # returns after the timeout, its key loaded by its own call
            assert waited.result(0) == "own k"
        finally:
            release.set()
        first.result(TIMEOUT)
    assert owned.result(TIMEOUT) == "late k" and len(calls) == 2


def test_DataLoader_single_flight_never_waits_for_a_flight_of_its_own_thread():
    from dataloader_sync._core._single_flight import SingleFlight

    vc = DictValueCache()
    vc.flights = SingleFlight(600.0)  # waiting would outlast the test's timeout
    calls: list[list[Any]] = []

    def inner(keys):
        calls.append(["inner", *keys])
        return [f"inner {k}" for k in keys]

    def outer(keys):
        calls.append(["outer", *keys])
        other = DataLoader(inner, value_cache=vc)  # same cache, same key, same thread, in the owner's flight
        fut = other.load(keys[0])
        other.dispatch()
        return [fut.result(TIMEOUT)]

    loader = DataLoader(outer, value_cache=vc)
    fut = loader.load("k")
    loader.dispatch()
    assert fut.result(TIMEOUT) == "inner k"
    assert calls == [["outer", "k"], ["inner", "k"]]


def test_DataLoader_single_flight_dispatch_future_holds_hits_owned_and_waited_keys_in_order():
    from dataloader_sync._core._single_flight import SingleFlight

    vc = DictValueCache({"hit": "cached"})
    vc.flights = SingleFlight(10.0)  # type: ignore[attr-defined]
    owner_in, release = threading.Event(), threading.Event()

    def slow(keys):
        owner_in.set()
        release.wait(TIMEOUT)
        return [f"slow {k}" for k in keys]

    def fast(keys):
        return [f"fast {k}" for k in keys]

    owner = DataLoader(slow, value_cache=vc)
    owner.load("w")
    with cf.ThreadPoolExecutor(2) as pool:
        first = pool.submit(owner.dispatch)
        assert owner_in.wait(TIMEOUT)
        waiter = DataLoader(fast, value_cache=vc, max_batch_size=1)
        many = waiter.load_many(["a", "w", "hit", "b"])
        dispatched = pool.submit(lambda: waiter.dispatch().result(TIMEOUT))
        with pytest.raises(cf.TimeoutError):
            dispatched.result(0.05)  # "w" is in the air: the dispatch waits for it
        release.set()
        assert dispatched.result(TIMEOUT) == ["fast a", "slow w", "cached", "fast b"]
        first.result(TIMEOUT)
    assert many.result(TIMEOUT) == ["fast a", "slow w", "cached", "fast b"]
    stats = waiter.statistics()
    assert stats.batch_load_count == 2 and stats.value_cache_hit_count == 1


def test_DataLoader_single_flight_two_requests_owning_what_the_other_waits_for_do_not_hold_each_other_up():
    from dataloader_sync import Future
    from dataloader_sync._core._single_flight import SingleFlight

    vc = DictValueCache()
    vc.flights = SingleFlight(600.0)  # waiting for each other would outlast the test's timeout
    both_own = threading.Barrier(2)
    calls: list[list[Any]] = []

    def request(own: str, other: str) -> list[Any]:
        pending: Future[list[Any]] = Future()  # settled by this thread once its dispatches returned,
        # as a GraphQL execution settles a batch future on its own thread

        def owner_batch(keys):
            calls.append(list(keys))
            return pending

        def waiter_batch(keys):
            calls.append(list(keys))
            return [f"self {k}" for k in keys]

        owner = DataLoader(owner_batch, value_cache=vc)
        owned = owner.load(own)
        owner.dispatch()  # owns its key's flight; the batch is still pending
        both_own.wait(TIMEOUT)
        waiter = DataLoader(waiter_batch, value_cache=vc)
        waited = waiter.load(other)
        waiter.dispatch()  # the other's flight: wait for it, or (second to come) load it
        pending.set_result([f"owner {own}"])
        return [owned.result(TIMEOUT), waited.result(TIMEOUT)]

    with cf.ThreadPoolExecutor(2) as pool:
        one = pool.submit(request, "x", "y")
        two = pool.submit(request, "y", "x")
        results = [one.result(TIMEOUT), two.result(TIMEOUT)]
    assert sorted(r[0] for r in results) == ["owner x", "owner y"]
    waited = sorted(r[1] for r in results)
    assert waited in (["owner x", "self y"], ["owner y", "self x"], ["self x", "self y"]), waited


SINGLE_FLIGHT_FORKS = textwrap.dedent("""
    import os, threading
    from dataloader_sync import MISSING, DataLoader, ValueCache
    from dataloader_sync._core._single_flight import SingleFlight

    class Dict(ValueCache):
        def __init__(self): self.data = {}
        def get_values(self, keys): return [self.data.get(k, MISSING) for k in keys]
        def set_values(self, keys, values): self.data.update(zip(keys, values))
        def delete(self, key): self.data.pop(key, None)
        def clear(self): self.data.clear()

    vc = Dict()
    vc.flights = SingleFlight(600.0)
    in_air, release = threading.Event(), threading.Event()
    def slow(keys):
        in_air.set()
        release.wait(30)
        return ["parent"] * len(keys)
    owner = DataLoader(slow, value_cache=vc)
    owner.load("k")
    t = threading.Thread(target=owner.dispatch)
    t.start()
    in_air.wait(30)  # a flight of another thread is in the air at every fork
    bad = 0
    for i in range(20):
        held, go = threading.Event(), threading.Event()
        def hold():
            with vc.flights._lock:
                held.set()
                go.wait(30)
        h = threading.Thread(target=hold)
        h.start()
        held.wait(30)
        pid = os.fork()
        if pid == 0:
            loader = DataLoader(lambda keys: ["child"] * len(keys), value_cache=vc)
            fut = loader.load("k")
            loader.dispatch()  # neither the held lock nor the parent's flight holds it up
            os._exit(0 if fut.result(5) == "child" else 1)
        go.set()
        h.join()
        _, status = os.waitpid(pid, 0)
        bad += status != 0
    release.set()
    t.join()
    print(bad)
""")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_SingleFlight_in_a_child_forked_with_its_lock_held_and_a_flight_in_the_air():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", SINGLE_FLIGHT_FORKS], capture_output=True,
                         text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0"


def test_DataLoader_single_flight_under_concurrent_graphene_executions_one_batch_call_per_key():
    graphene = pytest.importorskip("graphene")
    from dataloader_sync.graphql import DataLoaderExecutionContext

    vc = DictValueCache()
    flights = CountingFlights()
    vc.flights = flights  # type: ignore[attr-defined]
    n = 8
    calls: list[list[Any]] = []
    lock = threading.Lock()

    def batch(ids):
        with lock:
            calls.append(list(ids))
        assert flights.wait_for_joins(2 * n)  # every request has joined: the others wait for this call
        return [f"title {i}" for i in ids]

    class Query(graphene.ObjectType):
        title = graphene.String(id=graphene.Int(required=True))

        def resolve_title(root, info, id):
            return info.context["title"].load(id).then(lambda t: t.upper())

    schema = graphene.Schema(query=Query)
    start = threading.Barrier(n)

    def request(_: int) -> Any:
        context = {"title": DataLoader(batch, value_cache=vc)}
        start.wait(TIMEOUT)
        return schema.execute("{ a: title(id: 1) b: title(id: 2) }", context_value=context,
                              execution_context_class=DataLoaderExecutionContext)

    with cf.ThreadPoolExecutor(n) as pool:
        results = list(pool.map(request, range(n)))
    assert all(not r.errors and r.data == {"a": "TITLE 1", "b": "TITLE 2"} for r in results), results
    assert calls == [[1, 2]]


# -- leases: invalidation is final ---------------------------------------------------------------
class LeasingDictCache(DictValueCache):
    """A DictValueCache that leases (``Leasing``): a lease is a ``("lease", n)`` tuple in the value's place."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[Any] = []
        self.tokens = 0
        self.fail_lease: Optional[BaseException] = None
        self.store_answer: Optional[list[Any]] = None

    def get_values(self, keys: Sequence[Any]) -> list[Any]:
        self.log.append(("get_values", list(keys)))
        with self.lock:
            return [MISSING if _is_dict_lease(self.data.get(k)) else self.data.get(k, MISSING) for k in keys]

    def lease(self, keys: Sequence[Any]) -> list[Any]:
        self.log.append(("lease", list(keys)))
        if self.fail_lease is not None:
            raise self.fail_lease
        with self.lock:
            out = []
            for k in keys:
                if not _is_dict_lease(self.data.get(k)):
                    self.tokens += 1
                    self.data[k] = ("lease", self.tokens)
                out.append(self.data[k])
            return out

    def set_leased_values(self, keys: Sequence[Any], values: Sequence[Any], leases: Sequence[Any]) -> list[Any]:
        self.log.append(("set_leased_values", list(keys), list(leases)))
        if self.store_answer is not None:
            return self.store_answer
        with self.lock:
            held: list[Any] = []
            for k, v, lease in zip(keys, values, leases):
                now = self.data.get(k, MISSING)
                if now == lease:
                    self.data[k] = v
                    held.append(True)
                else:
                    held.append(MISSING if now is MISSING or _is_dict_lease(now) else now)
            return held

    def delete(self, key: Any) -> None:
        self.log.append(("delete", key))
        super().delete(key)


def _is_dict_lease(value: Any) -> bool:
    return type(value) is tuple and len(value) == 2 and value[0] == "lease"


def test_DataLoader_leases_the_misses_before_the_batch_call_and_writes_them_with_their_leases():
    cache = LeasingDictCache()
    cache.data[2] = 20
    seen: list[Any] = []

    def batch(keys: list[int]) -> list[int]:
        seen.append(list(cache.log))
        return [k * 10 for k in keys]

    loader = DataLoader(batch, value_cache=cache)
    assert loader.load_many([1, 2, 3]).result(TIMEOUT) == [10, 20, 30]
    assert seen == [[("get_values", [1, 2, 3]), ("lease", [1, 3])]]  # leased before the batch call
    assert cache.log[2:] == [("set_leased_values", [1, 3], [("lease", 1), ("lease", 2)])]
    assert cache.data == {1: 10, 2: 20, 3: 30}
    assert not cache.sets  # a leasing cache is never written with set_values


def test_DataLoader_a_value_read_before_delete_is_not_stored_after_it():
    cache = LeasingDictCache()
    rows = {1: "v1"}

    def batch(keys: list[int]) -> list[str]:
        values = [rows[k] for k in keys]
        rows[1] = "v2"  # a commit lands after the read ...
        cache.delete(1)  # ... and its invalidation before the write-back
        return values

    loader = DataLoader(batch, value_cache=cache)
    assert loader.load(1).result(TIMEOUT) == "v1"
    assert 1 not in cache.data  # refused: the next load reads the row again
    assert DataLoader(lambda keys: [rows[k] for k in keys], value_cache=cache).load(1).result(TIMEOUT) == "v2"


def test_DataLoader_a_key_whose_lease_failed_is_loaded_and_not_written(caplog):
    cache = LeasingDictCache()
    cache.breaker = None  # the rate-limited failure log, not a breaker
    cache.fail_lease = ConnectionError("cache is down")
    loader = DataLoader(lambda keys: [k * 10 for k in keys], value_cache=cache)
    assert loader.load_many([1, 2]).result(TIMEOUT) == [10, 20]
    assert [entry[0] for entry in cache.log] == ["get_values", "lease"]  # no write without a lease
    assert cache.data == {}
    assert "failed in lease" in warnings_of(caplog)[0].getMessage()


def test_DataLoader_a_lease_that_raises_a_BaseException_fails_the_keys_and_propagates():
    cache = LeasingDictCache()
    cache.fail_lease = KeyboardInterrupt()
    loader = DataLoader(lambda keys: [k * 10 for k in keys], value_cache=cache)
    fut = loader.load(1)
    with pytest.raises(KeyboardInterrupt):
        loader.dispatch()
    assert fut.done() and isinstance(fut.exception(0), cf.CancelledError)


def test_DataLoader_a_malformed_set_leased_values_answer_is_logged_and_fails_no_load(caplog):
    cache = LeasingDictCache()
    cache.breaker = None
    cache.store_answer = [True]  # one flag for two keys
    loader = DataLoader(lambda keys: [k * 10 for k in keys], value_cache=cache)
    assert loader.load_many([1, 2]).result(TIMEOUT) == [10, 20]
    assert "set_leased_values returned 1 flags for 2 keys" in str(warnings_of(caplog)[0].exc_info[1])

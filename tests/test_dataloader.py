"""Tests for dataloader_sync._core._dataloader (DataLoader), ported from java-dataloader.

Scenarios follow java-dataloader's DataLoaderTest, DataLoaderBatchLoaderEnvironmentTest,
DataLoaderCacheMapTest and DataLoaderTimeTest where they apply to DESIGN §2, plus the
thread-safety, stress and scaling guarantees of this library.
"""
from __future__ import annotations

import collections
import concurrent.futures as cf
import gc
import os
import queue
import random
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any, Optional

import pytest
from conftest import FakeClock

from dataloader_sync import (
    BatchLoaderEnvironment,
    BatchLoadError,
    DataLoader,
    DispatchResult,
    Future,
    completed_future,
    failed_future,
    gather,
)
from dataloader_sync._core._dispatch_scope import current_scope, using_scope

TIMEOUT = 10.0  # generous upper bound for anything that should be quick


# -- helpers ---------------------------------------------------------------------


class IdLoader:
    """A batch function returning its keys, recording every call (thread-safe)."""

    def __init__(self) -> None:
        self.calls: list[list[Any]] = []
        self.lock = threading.Lock()

    def __call__(self, keys: list[Any]) -> list[Any]:
        with self.lock:
            self.calls.append(list(keys))
        return list(keys)


def id_loader(**kwargs: Any):
    fn = IdLoader()
    return DataLoader(fn, **kwargs), fn.calls


class RecordingScope:
    """A dispatch scope recording which loaders reported queued keys."""

    dispatches_itself = False  # a DispatchScope (see _dispatch_scope): a tick may dispatch what it was told

    def __init__(self) -> None:
        self.queued: list[DataLoader] = []

    def loader_queued(self, loader: DataLoader) -> None:
        self.queued.append(loader)


def odd_even_exceptions(keys: list[int]) -> list[Any]:
    """Odd keys fail (per key), even keys succeed."""
    return [ValueError(f"odd key {k}") if k % 2 else k for k in keys]


def raises_on_batch(calls: list[list[Any]]):
    def batch(keys: list[Any]) -> list[Any]:
        calls.append(list(keys))
        raise RuntimeError("Error")

    return batch


# -- basics ------------------------------------------------------------------------


def test_DataLoader_load_resolves_after_dispatch():
    loader, calls = id_loader()
    fut = loader.load(1)
    assert isinstance(fut, cf.Future) and isinstance(fut, Future)
    assert not fut.done()
    assert calls == []
    loader.dispatch()
    assert fut.result(timeout=TIMEOUT) == 1
    assert calls == [[1]]


def test_DataLoader_has_a_name():
    assert DataLoader(lambda ks: ks, name="users").name == "users"
    assert DataLoader(lambda ks: ks).name is None
    assert "users" in repr(DataLoader(lambda ks: ks, name="users"))


def test_DataLoader_batches_multiple_requests():
    loader, calls = id_loader()
    f1, f2 = loader.load(1), loader.load(2)
    loader.dispatch()
    assert (f1.result(TIMEOUT), f2.result(TIMEOUT)) == (1, 2)
    assert calls == [[1, 2]]


def test_DataLoader_dispatch_returns_the_values_of_its_keys_in_order():
    loader, _ = id_loader()
    for k in "abc":
        loader.load(k)
    assert loader.dispatch().result(TIMEOUT) == ["a", "b", "c"]


def test_DataLoader_dispatch_with_counts_counts_keys_not_loads():
    loader, _ = id_loader()
    f1, f2 = loader.load(1), loader.load(2)
    loader.load(1)  # a cache hit: not dispatched again
    result = loader.dispatch_with_counts()
    assert isinstance(result, DispatchResult)
    assert result.keys_count == 2
    assert result.future.result(TIMEOUT) == [1, 2]
    assert f1.done() and f2.done()


def test_DataLoader_dispatch_with_nothing_queued_is_zero_keys_and_an_empty_list():
    loader, calls = id_loader()
    result = loader.dispatch_with_counts()
    assert result.keys_count == 0
    assert result.future.result(TIMEOUT) == []
    assert loader.dispatch().result(TIMEOUT) == []
    assert calls == []


def test_DataLoader_dispatch_depth_counts_queued_keys():
    loader, _ = id_loader()
    assert loader.dispatch_depth == 0
    loader.load("a")
    loader.load("b")
    loader.load("a")  # cached: not queued twice
    loader.load_many(["c", "d"])
    assert loader.dispatch_depth == 4
    loader.dispatch()
    assert loader.dispatch_depth == 0


def test_DataLoader_coalesces_identical_requests():
    loader, calls = id_loader()
    f1a, f1b = loader.load(1), loader.load(1)
    assert f1a is f1b
    loader.dispatch()
    assert f1a.result(TIMEOUT) == 1
    assert calls == [[1]]


def test_DataLoader_caches_repeated_requests():
    loader, calls = id_loader()
    fa, fb = loader.load("A"), loader.load("B")
    loader.dispatch()
    assert (fa.result(TIMEOUT), fb.result(TIMEOUT)) == ("A", "B")
    assert calls == [["A", "B"]]

    fa1, fc = loader.load("A"), loader.load("C")
    loader.dispatch()
    assert (fa1.result(TIMEOUT), fc.result(TIMEOUT)) == ("A", "C")
    assert calls == [["A", "B"], ["C"]]

    futures = [loader.load(k) for k in "ABC"]
    loader.dispatch()
    assert [f.result(TIMEOUT) for f in futures] == ["A", "B", "C"]
    assert calls == [["A", "B"], ["C"]]


def test_DataLoader_returns_the_same_future_for_a_cached_key_pending_and_settled():
    # docs/dataloader.rst: the cache keeps a settled key's future, not its value.
    loader, _ = id_loader()
    pending = loader.load("A")
    assert loader.load("A") is pending and not pending.done()
    failing = DataLoader(lambda keys: [ValueError(k) for k in keys])
    bad = failing.load("B")
    loader.dispatch()
    failing.dispatch()
    assert pending.result(TIMEOUT) == "A" and loader.load("A") is pending
    assert isinstance(bad.exception(TIMEOUT), ValueError) and failing.load("B") is bad
    held = {pending}
    assert loader.load("A") in held
    loader.clear("A")
    assert loader.load("A") is not pending


def test_DataLoader_does_not_redispatch_a_previous_load():
    loader, calls = id_loader()
    fa = loader.load("A")
    loader.dispatch()
    fb = loader.load("B")
    loader.dispatch()
    assert (fa.result(TIMEOUT), fb.result(TIMEOUT)) == ("A", "B")
    assert calls == [["A"], ["B"]]


def test_DataLoader_caches_on_redispatch_with_load_many():
    loader, calls = id_loader()
    f1 = loader.load("A")
    loader.dispatch()
    f2 = loader.load_many(["A", "B"])
    loader.dispatch()
    f3 = loader.load_many(["A", "C"], {"A": None, "C": None})
    loader.dispatch()
    assert f1.result(TIMEOUT) == "A"
    assert f2.result(TIMEOUT) == ["A", "B"]
    assert f3.result(TIMEOUT) == ["A", "C"]
    assert calls == [["A"], ["B"], ["C"]]


def test_DataLoader_accepts_objects_as_keys():
    loader, calls = id_loader()
    key_a, key_b = object(), object()
    fa, fb = loader.load(key_a), loader.load(key_b)
    loader.dispatch()
    assert fa.result(TIMEOUT) is key_a and fb.result(TIMEOUT) is key_b
    assert calls == [[key_a, key_b]]
    loader.clear(key_a)
    loader.load(key_a)
    loader.load(key_b)
    loader.dispatch()
    assert calls == [[key_a, key_b], [key_a]]


def test_DataLoader_accepts_None_as_a_key():
    loader, calls = id_loader()
    f = loader.load(None)
    assert loader.load(None) is f
    loader.dispatch()
    assert f.result(TIMEOUT) is None
    assert calls == [[None]]


# -- load_many -------------------------------------------------------------------


def test_DataLoader_load_many_keeps_order_and_duplicates():
    loader, calls = id_loader()
    fut = loader.load_many([3, 1, 2, 1, 3])
    loader.dispatch()
    assert fut.result(TIMEOUT) == [3, 1, 2, 1, 3]
    assert calls == [[3, 1, 2]]


def test_DataLoader_load_many_of_no_keys_is_an_empty_list_without_a_batch():
    loader, calls = id_loader()
    fut = loader.load_many([])
    assert fut.result(TIMEOUT) == []
    assert loader.dispatch_with_counts().keys_count == 0
    assert calls == []


def test_DataLoader_load_many_accepts_any_iterable():
    loader, _ = id_loader()
    fut = loader.load_many(k for k in range(3))
    loader.dispatch()
    assert fut.result(TIMEOUT) == [0, 1, 2]


def test_DataLoader_load_many_fails_with_the_first_error_by_default():
    loader = DataLoader(odd_even_exceptions)
    fut = loader.load_many([2, 3, 4])
    loader.dispatch()
    with pytest.raises(ValueError, match="odd key 3"):
        fut.result(TIMEOUT)


def test_DataLoader_load_many_return_exceptions_puts_errors_in_the_list():
    loader = DataLoader(odd_even_exceptions)
    fut = loader.load_many([2, 3, 4, 5], return_exceptions=True)
    loader.dispatch()
    values = fut.result(TIMEOUT)
    assert values[0] == 2 and values[2] == 4
    assert isinstance(values[1], ValueError) and str(values[1]) == "odd key 3"
    assert isinstance(values[3], ValueError) and str(values[3]) == "odd key 5"


def test_DataLoader_load_many_key_contexts_must_match_keys_in_length():
    loader, _ = id_loader()
    with pytest.raises(ValueError, match="key_contexts"):
        loader.load_many([1, 2], ["only one"])
    assert loader.dispatch_depth == 0


# -- caching -----------------------------------------------------------------------


def test_DataLoader_clear_forgets_one_key_and_returns_the_loader():
    loader, calls = id_loader()
    loader.load("A")
    loader.load("B")
    loader.dispatch()
    assert loader.clear("A") is loader
    fa, fb = loader.load("A"), loader.load("B")
    loader.dispatch()
    assert (fa.result(TIMEOUT), fb.result(TIMEOUT)) == ("A", "B")
    assert calls == [["A", "B"], ["A"]]
    assert loader.clear("never loaded") is loader  # no error


def test_DataLoader_clear_all_forgets_every_key_and_returns_the_loader():
    loader, calls = id_loader()
    loader.load("A")
    loader.load("B")
    loader.dispatch()
    assert loader.clear_all() is loader
    loader.load("A")
    loader.load("B")
    loader.dispatch()
    assert calls == [["A", "B"], ["A", "B"]]


def test_DataLoader_prime_fills_the_cache_and_returns_the_loader():
    loader, calls = id_loader()
    assert loader.prime("A", "A") is loader
    fa, fb = loader.load("A"), loader.load("B")
    assert fa.done()
    loader.dispatch()
    assert (fa.result(TIMEOUT), fb.result(TIMEOUT)) == ("A", "B")
    assert calls == [["B"]]


def test_DataLoader_prime_does_not_replace_a_cached_key():
    loader, calls = id_loader()
    loader.prime("A", "X")
    fa, fb = loader.load("A"), loader.load("B")
    loader.dispatch().result(TIMEOUT)
    assert (fa.result(TIMEOUT), fb.result(TIMEOUT)) == ("X", "B")
    loader.prime("A", "Y").prime("B", "Y")
    fa, fb = loader.load("A"), loader.load("B")
    loader.dispatch().result(TIMEOUT)
    assert (fa.result(TIMEOUT), fb.result(TIMEOUT)) == ("X", "B")
    assert calls == [["B"]]


def test_DataLoader_clear_then_prime_replaces_a_cached_key():
    loader, calls = id_loader()
    loader.prime("A", "X")
    loader.load("A")
    loader.load("B")
    loader.dispatch().result(TIMEOUT)
    loader.clear("A").prime("A", "Y")
    loader.clear("B").prime("B", "Y")
    fa, fb = loader.load("A"), loader.load("B")
    loader.dispatch().result(TIMEOUT)
    assert (fa.result(TIMEOUT), fb.result(TIMEOUT)) == ("Y", "Y")
    assert calls == [["B"]]


def test_DataLoader_prime_with_an_exception_caches_a_failure():
    loader, calls = id_loader()
    loader.prime(1, KeyError("primed"))
    fut = loader.load(1)
    loader.dispatch()
    with pytest.raises(KeyError, match="primed"):
        fut.result(TIMEOUT)
    assert calls == []


def test_DataLoader_cache_false_queues_every_load():
    loader, calls = id_loader(cache=False)
    fa, fb = loader.load("A"), loader.load("B")
    loader.dispatch()
    assert (fa.result(TIMEOUT), fb.result(TIMEOUT)) == ("A", "B")
    fa1, fc = loader.load("A"), loader.load("C")
    assert fa1 is not fa
    loader.dispatch()
    assert (fa1.result(TIMEOUT), fc.result(TIMEOUT)) == ("A", "C")
    futures = [loader.load(k) for k in "ABC"]
    loader.dispatch()
    assert [f.result(TIMEOUT) for f in futures] == ["A", "B", "C"]
    assert calls == [["A", "B"], ["A", "C"], ["A", "B", "C"]]


def test_DataLoader_cache_false_sends_duplicate_keys():
    loader, calls = id_loader(cache=False)
    f1, f2, f3 = loader.load("A"), loader.load("B"), loader.load("A")
    loader.dispatch()
    assert [f.result(TIMEOUT) for f in (f1, f2, f3)] == ["A", "B", "A"]
    assert calls == [["A", "B", "A"]]


def test_DataLoader_cache_false_accepts_unhashable_keys():
    loader, calls = id_loader(cache=False)
    f = loader.load([1, 2])
    loader.dispatch()
    assert f.result(TIMEOUT) == [1, 2]


def test_DataLoader_cache_true_sends_a_duplicate_key_once():
    loader, calls = id_loader()
    f1, f2, f3 = loader.load("A"), loader.load("B"), loader.load("A")
    loader.dispatch()
    assert [f.result(TIMEOUT) for f in (f1, f2, f3)] == ["A", "B", "A"]
    assert calls == [["A", "B"]]


def _json_cache_key(key: dict[str, Any]) -> str:
    return "".join(sorted(f"{k}:{v}" for k, v in key.items()))


def test_DataLoader_cache_key_fn_maps_equal_dict_keys_to_one_load():
    loader, calls = id_loader(cache_key_fn=_json_cache_key)
    key1, key2 = {"id": 123}, {"id": 123}
    f1, f2 = loader.load(key1), loader.load(key2)
    assert f1 is f2
    loader.dispatch()
    assert calls == [[key1]]
    assert f1.result(TIMEOUT) == key1 and f2.result(TIMEOUT) == key1


def test_DataLoader_cache_key_fn_ignores_the_order_of_dict_items():
    loader, calls = id_loader(cache_key_fn=_json_cache_key)
    key1, key2 = {"a": 123, "b": 321}, {"b": 321, "a": 123}
    _f1, f2 = loader.load(key1), loader.load(key2)
    loader.dispatch()
    assert calls == [[key1]]
    assert f2.result(TIMEOUT) == key2


def test_DataLoader_cache_key_fn_applies_to_clear():
    loader, calls = id_loader(cache_key_fn=_json_cache_key)
    key1, key2 = {"id": 123}, {"id": 123}
    f1 = loader.load(key1)
    loader.dispatch()
    loader.clear(key2)  # an equivalent key
    f2 = loader.load(key1)
    loader.dispatch()
    assert calls == [[key1], [key1]]
    assert f1.result(TIMEOUT) == key1 and f2.result(TIMEOUT) == key1


def test_DataLoader_cache_key_fn_applies_to_prime():
    loader, calls = id_loader(cache_key_fn=_json_cache_key)
    key1, key2 = {"id": 123}, {"id": 123}
    loader.prime(key1, key1)
    f1, f2 = loader.load(key1), loader.load(key2)
    loader.dispatch()
    assert calls == []
    assert f1.result(TIMEOUT) == key1 and f2.result(TIMEOUT) == key1


def test_DataLoader_cache_key_fn_applies_to_load_many():
    loader, calls = id_loader(cache_key_fn=_json_cache_key)
    fut = loader.load_many([{"id": 1}, {"id": 2}, {"id": 1}])
    loader.dispatch()
    assert fut.result(TIMEOUT) == [{"id": 1}, {"id": 2}, {"id": 1}]
    assert calls == [[{"id": 1}, {"id": 2}]]


class CustomCacheMap:
    """A cache_map that is not a dict (java's CustomCacheMap)."""

    def __init__(self) -> None:
        self.stash: dict[Any, Any] = {}

    def get(self, key: Any, default: Any = None) -> Any:
        return self.stash.get(key, default)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.stash[key] = value

    def __delitem__(self, key: Any) -> None:
        del self.stash[key]

    def clear(self) -> None:
        self.stash.clear()


def test_DataLoader_uses_a_custom_cache_map():
    cache = CustomCacheMap()
    loader, calls = id_loader(cache_map=cache)
    f1, f2 = loader.load("a"), loader.load("b")
    loader.dispatch().result(TIMEOUT)
    assert (f1.result(TIMEOUT), f2.result(TIMEOUT)) == ("a", "b")
    assert calls == [["a", "b"]]
    assert list(cache.stash) == ["a", "b"]
    assert cache.stash["a"] is f1

    f3, f2a = loader.load("c"), loader.load("b")
    loader.dispatch().result(TIMEOUT)
    assert (f3.result(TIMEOUT), f2a.result(TIMEOUT)) == ("c", "b")
    assert calls == [["a", "b"], ["c"]]
    assert list(cache.stash) == ["a", "b", "c"]

    loader.clear("b")
    assert list(cache.stash) == ["a", "c"]
    f2b = loader.load("b")
    loader.dispatch().result(TIMEOUT)
    assert f2b.result(TIMEOUT) == "b"
    assert calls == [["a", "b"], ["c"], ["b"]]
    assert set(cache.stash) == {"a", "b", "c"}

    loader.clear_all()
    assert cache.stash == {}


def test_DataLoader_cache_holds_the_futures_handed_out():
    cache: dict[Any, Any] = {}
    loader, _ = id_loader(cache_map=cache)
    f1, f2, f3 = loader.load(1), loader.load(2), loader.load(3)
    assert cache == {1: f1, 2: f2, 3: f3}


# -- batch=False -------------------------------------------------------------------


def test_DataLoader_batch_false_calls_the_batch_function_at_once_per_load():
    loader, calls = id_loader(batch=False)
    fa, fb = loader.load("A"), loader.load("B")
    assert fa.done() and fb.done()
    fa1, fb1 = loader.load("A"), loader.load("B")
    assert fa1 is fa and fb1 is fb
    assert [f.result(TIMEOUT) for f in (fa, fb, fa1, fb1)] == ["A", "B", "A", "B"]
    assert calls == [["A"], ["B"]]
    assert loader.dispatch_depth == 0


def test_DataLoader_batch_false_and_cache_false_call_for_every_load():
    loader, calls = id_loader(batch=False, cache=False)
    futures = [loader.load(k) for k in "ABAB"]
    assert futures[0] is not futures[2]
    assert [f.result(TIMEOUT) for f in futures] == ["A", "B", "A", "B"]
    assert calls == [["A"], ["B"], ["A"], ["B"]]


def test_DataLoader_batch_false_load_many_calls_once_per_new_key():
    loader, calls = id_loader(batch=False)
    fut = loader.load_many(["A", "B", "A"])
    assert fut.result(TIMEOUT) == ["A", "B", "A"]
    assert calls == [["A"], ["B"]]


# -- max_batch_size ----------------------------------------------------------------


def test_DataLoader_max_batch_size_splits_keys_in_order():
    loader, calls = id_loader(max_batch_size=2)
    futures = [loader.load(k) for k in (1, 2, 3)]
    loader.dispatch()
    assert [f.result(TIMEOUT) for f in futures] == [1, 2, 3]
    assert calls == [[1, 2], [3]]


def test_DataLoader_max_batch_size_splits_21_keys_into_slices_of_5():
    loader, calls = id_loader(max_batch_size=5)
    for i in range(21):
        loader.load(i)
    assert loader.dispatch().result(TIMEOUT) == list(range(21))
    assert calls == [list(range(5)), list(range(5, 10)), list(range(10, 15)),
                     list(range(15, 20)), [20]]


def test_DataLoader_max_batch_size_a_failing_slice_fails_only_its_keys():
    calls: list[list[int]] = []

    def batch(keys: list[int]) -> list[int]:
        calls.append(list(keys))
        if 3 in keys:
            raise RuntimeError("slice with 3")
        return keys

    loader = DataLoader(batch, max_batch_size=2)
    futures = [loader.load(k) for k in (1, 2, 3, 4, 5)]
    loader.dispatch()
    assert [futures[i].result(TIMEOUT) for i in (0, 1, 4)] == [1, 2, 5]
    for i in (2, 3):
        with pytest.raises(RuntimeError, match="slice with 3"):
            futures[i].result(TIMEOUT)
    assert calls == [[1, 2], [3, 4], [5]]


# -- failures ------------------------------------------------------------------------


def test_DataLoader_per_key_exceptions_fail_only_their_keys():
    calls: list[list[int]] = []

    def batch(keys: list[int]) -> list[Any]:
        calls.append(list(keys))
        return odd_even_exceptions(keys)

    loader = DataLoader(batch)
    futures = [loader.load(k) for k in (1, 2, 3, 4)]
    dispatched = loader.dispatch()
    with pytest.raises(ValueError, match="odd key 1"):
        futures[0].result(TIMEOUT)
    assert futures[1].result(TIMEOUT) == 2
    assert isinstance(futures[2].exception(TIMEOUT), ValueError)
    assert futures[3].result(TIMEOUT) == 4
    assert calls == [[1, 2, 3, 4]]
    assert isinstance(dispatched.exception(TIMEOUT), ValueError)  # dispatch fails if a key fails


def test_DataLoader_resolves_to_an_error_to_indicate_failure():
    loader = DataLoader(odd_even_exceptions)
    f1 = loader.load(1)
    loader.dispatch()
    assert isinstance(f1.exception(TIMEOUT), ValueError)
    f2 = loader.load(2)
    loader.dispatch()
    assert f2.result(TIMEOUT) == 2


def test_DataLoader_per_key_exceptions_are_cached_by_default():
    calls: list[list[int]] = []

    def batch(keys: list[int]) -> list[Any]:
        calls.append(list(keys))
        return [KeyError(k) for k in keys]

    loader = DataLoader(batch)
    f1 = loader.load(1)
    loader.dispatch()
    assert isinstance(f1.exception(TIMEOUT), KeyError)
    f2 = loader.load(1)
    loader.dispatch()
    assert f2 is f1
    assert calls == [[1]]


def test_DataLoader_cache_exceptions_false_evicts_per_key_failures():
    calls: list[list[int]] = []

    def batch(keys: list[int]) -> list[Any]:
        calls.append(list(keys))
        return [KeyError(k) if k == 1 else k for k in keys]

    loader = DataLoader(batch, cache_exceptions=False)
    f1, f2 = loader.load(1), loader.load(2)
    loader.dispatch()
    assert isinstance(f1.exception(TIMEOUT), KeyError)
    assert f2.result(TIMEOUT) == 2
    f1b, f2b = loader.load(1), loader.load(2)
    assert f1b is not f1 and f2b is f2  # only the failed key left the cache
    loader.dispatch()
    assert isinstance(f1b.exception(TIMEOUT), KeyError)
    assert calls == [[1, 2], [1]]


def test_DataLoader_batch_function_that_raises_fails_every_key_and_uncaches_them():
    calls: list[list[Any]] = []
    loader = DataLoader(raises_on_batch(calls))
    f1, f2 = loader.load(1), loader.load(2)
    loader.dispatch()
    for f in (f1, f2):
        with pytest.raises(RuntimeError, match="^Error$"):
            f.result(TIMEOUT)
    f1b = loader.load(1)  # retried: the failed batch left the cache
    assert f1b is not f1
    loader.dispatch()
    assert isinstance(f1b.exception(TIMEOUT), RuntimeError)
    assert calls == [[1, 2], [1]]


def test_DataLoader_clear_in_a_failure_callback_allows_a_retry():
    calls: list[list[int]] = []

    def batch(keys: list[int]) -> list[Any]:
        calls.append(list(keys))
        return [KeyError(k) for k in keys]

    loader = DataLoader(batch)

    def clear_on_error(fut: cf.Future) -> None:
        if fut.exception() is not None:
            loader.clear(1)

    f1 = loader.load(1)
    f1.add_done_callback(clear_on_error)
    loader.dispatch()
    assert isinstance(f1.exception(TIMEOUT), KeyError)
    f2 = loader.load(1)
    f2.add_done_callback(clear_on_error)
    loader.dispatch()
    assert isinstance(f2.exception(TIMEOUT), KeyError)
    assert calls == [[1], [1]]


def test_DataLoader_batch_function_returning_a_failed_future_fails_every_key():
    loader = DataLoader(lambda ks: failed_future(ConnectionError("db down")))
    f1, f2 = loader.load(1), loader.load(2)
    loader.dispatch()
    for f in (f1, f2):
        with pytest.raises(ConnectionError, match="db down"):
            f.result(TIMEOUT)
    assert loader.load(1) is not f1


@pytest.mark.parametrize("result", [None, 42, "ab", object(), iter([1, 2])])
def test_DataLoader_batch_function_returning_a_non_sequence_fails_every_key(result):
    loader = DataLoader(lambda ks: result, name="weird")
    f1, f2 = loader.load(1), loader.load(2)
    loader.dispatch()
    for f in (f1, f2):
        exc = f.exception(TIMEOUT)
        assert isinstance(exc, BatchLoadError)
        assert "'weird'" in str(exc) and type(result).__name__ in str(exc)
    assert loader.load(1) is not f1


@pytest.mark.parametrize("returned", [1, 3, 6])
def test_DataLoader_wrong_number_of_values_fails_the_batch_naming_loader_and_counts(returned):
    calls: list[list[str]] = []

    def batch(keys: list[str]) -> list[str]:
        calls.append(list(keys))
        return (list(keys) * 2)[:returned]

    loader = DataLoader(batch, name="letters")
    futures = [loader.load(k) for k in "ABCD"]
    loader.dispatch()
    for f in futures:
        exc = f.exception(TIMEOUT)
        assert isinstance(exc, BatchLoadError)
        message = str(exc)
        assert "'letters'" in message
        assert f"returned {returned} values" in message and "for 4 keys" in message
    retry = loader.load("A")
    assert retry is not futures[0]  # the keys left the cache
    loader.dispatch()
    assert calls[-1] == ["A"]


def test_DataLoader_wrong_number_of_values_fails_all_keys_of_that_batch_only():
    def batch(keys: list[int]) -> list[int]:
        return keys[:-1] if 3 in keys else keys

    loader = DataLoader(batch, max_batch_size=2)
    futures = [loader.load(k) for k in (1, 2, 3, 4)]
    loader.dispatch()
    assert futures[0].result(TIMEOUT) == 1 and futures[1].result(TIMEOUT) == 2
    assert isinstance(futures[2].exception(TIMEOUT), BatchLoadError)
    assert isinstance(futures[3].exception(TIMEOUT), BatchLoadError)


def test_DataLoader_propagates_a_batch_error_to_all_loads():
    calls: list[list[Any]] = []
    loader = DataLoader(raises_on_batch(calls))
    f1, f2 = loader.load(1), loader.load(2)
    loader.dispatch()
    assert f1.exception(TIMEOUT) is f2.exception(TIMEOUT)
    assert str(f1.exception(TIMEOUT)) == "Error"
    assert calls == [[1, 2]]


def test_DataLoader_failing_batch_function_does_not_affect_other_loaders():
    bad = DataLoader(raises_on_batch([]))
    good, _ = id_loader()
    fb, fg = bad.load(1), good.load(1)
    bad.dispatch()
    good.dispatch()
    assert isinstance(fb.exception(TIMEOUT), RuntimeError)
    assert fg.result(TIMEOUT) == 1


def test_DataLoader_mapping_whose_lookup_raises_fails_the_batch_instead_of_hanging():
    class ExplodingMapping(dict):
        def get(self, key, default=None):
            raise LookupError("mapping broke")

    loader = DataLoader(lambda ks: ExplodingMapping())
    f = loader.load(1)
    loader.dispatch()
    with pytest.raises(LookupError, match="mapping broke"):
        f.result(TIMEOUT)
    assert loader.load(1) is not f


def test_DataLoader_mapped_loader_with_unhashable_keys_fails_the_batch_instead_of_hanging():
    loader = DataLoader(lambda ks: {1: "one"}, cache_key_fn=lambda k: k["id"])
    f = loader.load({"id": 1})
    loader.dispatch()
    assert isinstance(f.exception(TIMEOUT), TypeError)


def test_DataLoader_context_provider_that_raises_fails_the_batch():
    def provider() -> Any:
        raise PermissionError("no context")

    loader = DataLoader(lambda ks, env: ks, pass_env=True, context_provider=provider)
    f = loader.load(1)
    loader.dispatch()
    with pytest.raises(PermissionError):
        f.result(TIMEOUT)


def test_DataLoader_batch_function_raising_BaseException_fails_keys_and_propagates():
    class Stop(BaseException):
        pass

    def batch(keys: list[int]) -> list[int]:
        raise Stop()

    loader = DataLoader(batch)
    f = loader.load(1)
    with pytest.raises(Stop):
        loader.dispatch()
    assert isinstance(f.exception(TIMEOUT), Stop)


def test_DataLoader_a_user_cancelled_load_does_not_break_the_batch():
    loader, _ = id_loader()
    f1, f2 = loader.load(1), loader.load(2)
    assert f1.cancel()
    loader.dispatch()
    assert f2.result(TIMEOUT) == 2
    assert f1.cancelled()


def test_DataLoader_a_cancelled_queued_load_is_done_for_wait_and_as_completed_at_once():
    loader, calls = id_loader()
    f1, f2 = loader.load(1), loader.load(2)
    assert f1.cancel()
    done, not_done = cf.wait([f1], timeout=0)          # as a ThreadPoolExecutor future cancelled while queued
    assert done == {f1} and not not_done
    assert list(cf.as_completed([f1], timeout=TIMEOUT)) == [f1]
    again = loader.load(1)                             # the key left the cache: a new load
    assert again is not f1 and not again.done()
    assert loader.dispatch().result(TIMEOUT) == [2, 1]
    assert calls == [[2, 1]]                           # one batch, the cancelled load withdrawn from it
    assert f2.result(TIMEOUT) == 2 and again.result(TIMEOUT) == 1
    assert f1.cancelled()


def test_DataLoader_a_cancelled_load_in_flight_is_done_at_once_and_loaded_again_later():
    release, started = threading.Event(), threading.Event()
    calls: list[list[int]] = []

    def batch(keys: list[int]) -> list[int]:
        calls.append(list(keys))
        started.set()
        assert release.wait(TIMEOUT)
        return list(keys)

    with cf.ThreadPoolExecutor(1, thread_name_prefix="test-cancel-in-flight") as pool:
        loader = DataLoader(batch, executor=pool)
        f1, f2 = loader.load(1), loader.load(2)
        waiting = loader.load_many([1, 2], return_exceptions=True)
        loader.dispatch()
        assert started.wait(TIMEOUT)
        assert f1.cancel()
        assert cf.wait([f1, f2], timeout=TIMEOUT, return_when=cf.FIRST_COMPLETED).done == {f1}
        assert list(cf.as_completed([f1], timeout=TIMEOUT)) == [f1]
        release.set()
        assert f2.result(TIMEOUT) == 2                 # the batch and the other key go on
        assert isinstance(waiting.result(TIMEOUT)[0], cf.CancelledError)
        assert loader.load(1).result(TIMEOUT) == 1     # not the cancelled future: loaded again
        assert calls == [[1, 2], [1]]


# -- mapped loaders ------------------------------------------------------------------


def test_DataLoader_mapped_loader_gives_None_for_missing_keys():
    def evens_only(keys: list[str]) -> dict[str, str]:
        return {k: k for i, k in enumerate(keys) if i % 2 == 0}

    loader = DataLoader(evens_only)
    loader.load("A")
    loader.load("B")
    loader.load_many(["C", "D"])
    loader.load_many(["E", "F"], {"E": None, "F": None})
    assert loader.dispatch_and_join() == ["A", None, "C", None, "E", None]


def test_DataLoader_mapped_loader_accepts_too_few_or_too_many_entries():
    loader = DataLoader(lambda ks: {"A": "a", "B": "b", "Z": "z"})
    futures = [loader.load(k) for k in "ABCD"]
    loader.dispatch()
    assert [f.result(TIMEOUT) for f in futures] == ["a", "b", None, None]


def test_DataLoader_mapped_loader_per_key_exception_fails_that_key():
    loader = DataLoader(lambda ks: {1: 1, 2: KeyError("two")})
    f1, f2 = loader.load(1), loader.load(2)
    loader.dispatch()
    assert f1.result(TIMEOUT) == 1
    assert isinstance(f2.exception(TIMEOUT), KeyError)


# -- environment: context, key contexts ----------------------------------------------


def context_batch(keys: list[str], env: BatchLoaderEnvironment) -> list[str]:
    assert isinstance(env, BatchLoaderEnvironment)
    return [
        f"{k}-{env.context}-m:{env.key_contexts.get(k)}-l:{env.key_contexts_list[i]}"
        for i, k in enumerate(keys)
    ]


def test_DataLoader_pass_env_gives_the_context_value():
    loader = DataLoader(lambda ks, env: [f"{k}-{env.context}" for k in ks], pass_env=True, context="ctx")
    loader.load("A")
    loader.load_many(["B", "C"])
    assert loader.dispatch_and_join() == ["A-ctx", "B-ctx", "C-ctx"]


def test_DataLoader_pass_env_calls_the_context_provider_once_per_batch():
    provided = []

    def provider() -> str:
        provided.append(threading.current_thread())
        return f"ctx{len(provided)}"

    loader = DataLoader(lambda ks, env: [f"{k}-{env.context}" for k in ks], pass_env=True,
                        context_provider=provider, max_batch_size=2)
    for k in "ABC":
        loader.load(k)
    assert loader.dispatch_and_join() == ["A-ctx1", "B-ctx1", "C-ctx2"]
    assert len(provided) == 2


def test_DataLoader_pass_env_context_is_None_when_not_given():
    loader = DataLoader(lambda ks, env: [f"{k}-{env.context}" for k in ks], pass_env=True)
    loader.load("A")
    loader.load_many(["B"])
    assert loader.dispatch_and_join() == ["A-None", "B-None"]


def test_DataLoader_key_contexts_reach_the_batch_function():
    loader = DataLoader(context_batch, pass_env=True, context_provider=lambda: "ctx")
    loader.load("A", "aCtx")
    loader.load("B", "bCtx")
    loader.load_many(["C", "D"], ["cCtx", "dCtx"])
    loader.load_many(["E", "F"], {"E": "eCtx", "F": "fCtx"})
    assert loader.dispatch_and_join() == [
        "A-ctx-m:aCtx-l:aCtx", "B-ctx-m:bCtx-l:bCtx", "C-ctx-m:cCtx-l:cCtx",
        "D-ctx-m:dCtx-l:dCtx", "E-ctx-m:eCtx-l:eCtx", "F-ctx-m:fCtx-l:fCtx",
    ]


def test_DataLoader_missing_key_contexts_are_None():
    loader = DataLoader(context_batch, pass_env=True, context_provider=lambda: "ctx")
    loader.load("A", "aCtx")
    loader.load("B")
    loader.load_many(["C", "D"], ["cCtx", None])
    loader.load_many(["E", "F"], {"E": "eCtx"})
    assert loader.dispatch_and_join() == [
        "A-ctx-m:aCtx-l:aCtx", "B-ctx-m:None-l:None", "C-ctx-m:cCtx-l:cCtx",
        "D-ctx-m:None-l:None", "E-ctx-m:eCtx-l:eCtx", "F-ctx-m:None-l:None",
    ]


def test_DataLoader_key_contexts_reach_the_batch_function_when_batching_is_disabled():
    loader = DataLoader(context_batch, pass_env=True, batch=False, context_provider=lambda: "ctx")
    a, b = loader.load("A", "aCtx"), loader.load("B", "bCtx")
    cd = loader.load_many(["C", "D"], ["cCtx", "dCtx"])
    assert [a.result(TIMEOUT), b.result(TIMEOUT)] + cd.result(TIMEOUT) == [
        "A-ctx-m:aCtx-l:aCtx", "B-ctx-m:bCtx-l:bCtx", "C-ctx-m:cCtx-l:cCtx", "D-ctx-m:dCtx-l:dCtx",
    ]


def test_DataLoader_key_contexts_mapping_keeps_the_last_of_duplicate_keys():
    loader = DataLoader(context_batch, pass_env=True, cache=False, context_provider=lambda: "ctx")
    loader.load("A", "aCtx")
    loader.load("B", "bCtx")
    loader.load("A", "overridesCtx")
    assert loader.dispatch_and_join() == [
        "A-ctx-m:overridesCtx-l:aCtx", "B-ctx-m:bCtx-l:bCtx", "A-ctx-m:overridesCtx-l:overridesCtx",
    ]


def test_DataLoader_mapped_loader_gets_the_environment():
    def batch(keys: list[str], env: BatchLoaderEnvironment) -> dict[str, str]:
        return {k: f"{k}-{env.context}-{env.key_contexts.get(k)}" for k in keys}

    loader = DataLoader(batch, pass_env=True, context_provider=lambda: "ctx")
    loader.load("A", "aCtx")
    loader.load("B")
    assert loader.dispatch_and_join() == ["A-ctx-aCtx", "B-ctx-None"]


def test_DataLoader_key_contexts_of_unhashable_keys_are_in_the_list_only():
    seen: list[BatchLoaderEnvironment] = []

    def batch(keys: list[dict[str, int]], env: BatchLoaderEnvironment) -> list[int]:
        seen.append(env)
        return [k["id"] for k in keys]

    loader = DataLoader(batch, pass_env=True, cache_key_fn=lambda k: k["id"])
    f = loader.load({"id": 7}, "ctx7")
    loader.dispatch()
    assert f.result(TIMEOUT) == 7
    assert seen[0].key_contexts_list == ["ctx7"]


def test_DataLoader_without_pass_env_calls_the_batch_function_with_keys_only():
    loader = DataLoader(lambda keys: keys, context="ignored")
    f = loader.load(1, "kc")
    loader.dispatch()
    assert f.result(TIMEOUT) == 1


# -- dispatch_and_join -------------------------------------------------------------


def test_DataLoader_dispatch_and_join_returns_all_values():
    loader, _ = id_loader()
    loader.load(1)
    loader.load_many([2, 3])
    assert loader.dispatch_and_join() == [1, 2, 3]
    assert loader.dispatch_and_join() == []


def test_DataLoader_dispatch_and_join_dispatches_loads_queued_by_callbacks():
    users = {1: {"invited_by": 3}, 2: {"invited_by": 4}, 3: {"invited_by": None}, 4: {"invited_by": None}}
    calls: list[list[int]] = []

    def batch(keys: list[int]) -> list[dict[str, Any]]:
        calls.append(list(keys))
        return [users[k] for k in keys]

    loader = DataLoader(batch)
    inviters: list[Any] = []
    for uid in (1, 2):
        loader.load(uid).then(lambda u: loader.load(u["invited_by"])).then(inviters.append)
    results = loader.dispatch_and_join()
    assert len(results) == 4
    assert calls == [[1, 2], [3, 4]]
    assert inviters == [users[3], users[4]]


def test_DataLoader_dispatch_and_join_batches_loads_made_on_other_threads():
    loader, calls = id_loader()
    with cf.ThreadPoolExecutor(2) as pool:
        for f in [pool.submit(loader.load, k) for k in "abcd"]:
            f.result(TIMEOUT)
    assert sorted(loader.dispatch_and_join()) == ["a", "b", "c", "d"]
    assert len(calls) == 1 and sorted(calls[0]) == ["a", "b", "c", "d"]


def test_DataLoader_dispatch_and_join_raises_the_first_error():
    loader = DataLoader(odd_even_exceptions)
    loader.load(2)
    loader.load(3)
    with pytest.raises(ValueError, match="odd key 3"):
        loader.dispatch_and_join()


def test_DataLoader_dispatch_and_join_waits_for_an_executor():
    with cf.ThreadPoolExecutor(1) as pool:
        loader_ex = DataLoader(IdLoader(), executor=pool)
        loader_ex.load(1).then(lambda v: loader_ex.load(v + 1))
        assert loader_ex.dispatch_and_join() == [1, 2]


def test_DataLoader_can_call_a_loader_from_a_loader():
    deep_calls: list[list[str]] = []

    def deep_batch(keys: list[str]) -> Future:
        deep_calls.append(list(keys))
        return completed_future(list(keys))

    deep = DataLoader(deep_batch)
    a_calls: list[list[str]] = []
    b_calls: list[list[str]] = []

    def a_batch(keys):
        a_calls.append(list(keys))
        return deep.load_many(keys)

    def b_batch(keys):
        b_calls.append(list(keys))
        return deep.load_many(keys)

    a, b = DataLoader(a_batch), DataLoader(b_batch)
    a1, a2, b1, b2 = a.load("A1"), a.load("A2"), b.load("B1"), b.load("B2")
    dispatched = [a.dispatch(), deep.dispatch(), b.dispatch(), deep.dispatch()]
    for d in dispatched:
        d.result(TIMEOUT)
    assert [f.result(TIMEOUT) for f in (a1, a2, b1, b2)] == ["A1", "A2", "B1", "B2"]
    assert a_calls == [["A1", "A2"]] and b_calls == [["B1", "B2"]]
    assert deep_calls == [["A1", "A2"], ["B1", "B2"]]


# -- futures and executors -------------------------------------------------------------


def test_DataLoader_async_batch_function_returning_a_future():
    pending: list[Future] = []

    def batch(keys: list[int]) -> Future:
        fut: Future = Future()
        pending.append(fut)
        return fut

    loader = DataLoader(batch)
    f1, f2 = loader.load(1), loader.load(2)
    loader.dispatch()
    assert not f1.done()
    completer = threading.Thread(target=pending[0].set_result, args=([10, 20],))
    completer.start()
    assert (f1.result(TIMEOUT), f2.result(TIMEOUT)) == (10, 20)
    completer.join(TIMEOUT)


def test_DataLoader_async_batch_function_returning_a_stdlib_future_of_a_mapping():
    with cf.ThreadPoolExecutor(1) as pool:
        loader = DataLoader(lambda ks: pool.submit(lambda: {k: k * 10 for k in ks}))
        f1, f2 = loader.load(1), loader.load(2)
        loader.dispatch()
        assert (f1.result(TIMEOUT), f2.result(TIMEOUT)) == (10, 20)


def test_DataLoader_without_executor_runs_the_batch_on_the_dispatching_thread():
    threads: list[threading.Thread] = []
    loader = DataLoader(lambda ks: threads.append(threading.current_thread()) or ks)
    loader.load(1)
    loader.dispatch()
    assert threads == [threading.current_thread()]


def test_DataLoader_executor_runs_batches_of_different_loaders_in_parallel():
    # Each batch function waits until both have started: this completes only if
    # the two batch calls run at the same time (a sequential run breaks the barrier).
    barrier = threading.Barrier(2, timeout=TIMEOUT)
    threads: list[threading.Thread] = []

    def batch(keys: list[int]) -> list[int]:
        threads.append(threading.current_thread())
        barrier.wait()
        return keys

    with cf.ThreadPoolExecutor(2) as pool:
        a, b = DataLoader(batch, executor=pool), DataLoader(batch, executor=pool)
        fa, fb = a.load(1), b.load(2)
        da, db = a.dispatch(), b.dispatch()
        assert (fa.result(TIMEOUT), fb.result(TIMEOUT)) == (1, 2)
        assert da.result(TIMEOUT) == [1] and db.result(TIMEOUT) == [2]
    assert threading.current_thread() not in threads


def test_DataLoader_executor_that_is_shut_down_fails_the_batch():
    pool = cf.ThreadPoolExecutor(1)
    pool.shutdown()
    loader = DataLoader(lambda ks: ks, executor=pool)
    f = loader.load(1)
    loader.dispatch()
    assert isinstance(f.exception(TIMEOUT), RuntimeError)
    assert loader.load(1) is not f


def test_DataLoader_executor_batch_function_that_raises_fails_the_keys():
    with cf.ThreadPoolExecutor(1) as pool:
        loader = DataLoader(raises_on_batch([]), executor=pool)
        f = loader.load(1)
        loader.dispatch()
        with pytest.raises(RuntimeError, match="Error"):
            f.result(TIMEOUT)


def test_DataLoader_executor_with_max_batch_size_runs_each_slice():
    with cf.ThreadPoolExecutor(2) as pool:
        fn = IdLoader()
        loader = DataLoader(fn, executor=pool, max_batch_size=2)
        futures = [loader.load(k) for k in range(5)]
        assert loader.dispatch().result(TIMEOUT) == [0, 1, 2, 3, 4]
        assert [f.result(TIMEOUT) for f in futures] == [0, 1, 2, 3, 4]
        assert sorted(fn.calls) == [[0, 1], [2, 3], [4]]



class _InlineExecutor(cf.Executor):
    """Runs each task at once, recording what it was handed (the batch function, or a context's run)."""

    def __init__(self) -> None:
        self.submitted: list[Any] = []

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> cf.Future[Any]:
        self.submitted.append(fn)
        future: cf.Future[Any] = cf.Future()
        future.set_result(fn(*args, **kwargs))
        return future


class _ContextCopyingExecutor(_InlineExecutor):
    copies_context = True  # as ScheduledExecutor: submit() runs a task in a copy of the caller's context


def test_DataLoader_wraps_the_batch_in_a_context_copy_unless_the_executor_says_it_copies_contexts():
    for executor, wrapped in ((_InlineExecutor(), True), (_ContextCopyingExecutor(), False)):
        fn = IdLoader()
        loader = DataLoader(fn, executor=executor)
        future = loader.load(1)
        loader.dispatch()
        assert future.result(TIMEOUT) == 1
        # (the job hooks' wrapper, there once dataloader_sync.django is imported, is the function itself
        # by name and __wrapped__: it copies no context)
        assert [getattr(submitted, "__wrapped__", submitted) is fn for submitted in executor.submitted] == [not wrapped]


# -- then chains -----------------------------------------------------------------------


def test_DataLoader_then_chains_a_load_on_a_load():
    loader, calls = id_loader()
    chained = loader.load(1).then(lambda v: loader.load(v + 10)).then(lambda v: v * 2)
    loader.dispatch()
    assert not chained.done()
    assert loader.dispatch_depth == 1
    loader.dispatch()
    assert chained.result(TIMEOUT) == 22
    assert calls == [[1], [11]]


def test_DataLoader_then_propagates_a_load_error():
    loader = DataLoader(odd_even_exceptions)
    called = []
    chained = loader.load(1).then(called.append)
    loader.dispatch()
    assert isinstance(chained.exception(TIMEOUT), ValueError)
    assert called == []


# -- dispatch scope --------------------------------------------------------------------


def test_DataLoader_load_reports_a_newly_queued_key_to_the_scope_once_per_batch():
    loader, _ = id_loader()
    scope, other = RecordingScope(), RecordingScope()
    with using_scope(scope):
        loader.load(1)
        assert scope.queued == [loader]
        loader.load(1)  # a cache hit queues nothing
        loader.load_many([1])
        loader.load(2)  # the scope already knows of this batch
        loader.load_many([1, 2, 3])
        assert scope.queued == [loader]
    with using_scope(other):
        loader.load(5)  # another scope is told, mid-batch too
        assert other.queued == [loader]
    loader.dispatch()
    with using_scope(scope):
        loader.load_many([6, 7])  # a new batch: told again
        assert scope.queued == [loader, loader]
    loader.load(8)  # no scope current
    assert scope.queued == [loader, loader] and other.queued == [loader]


def test_DataLoader_load_with_a_primed_key_does_not_report_to_the_scope():
    loader, _ = id_loader()
    loader.prime("x", 1)
    scope = RecordingScope()
    with using_scope(scope):
        loader.load("x")
        loader.load_many(["x", "x"])
    assert scope.queued == []


def test_DataLoader_scope_is_told_outside_the_loader_lock():
    loader, _ = id_loader()
    seen: list[int] = []

    class ReentrantScope:
        dispatches_itself = False

        def loader_queued(self, queued: DataLoader) -> None:
            seen.append(queued.dispatch_depth)
            queued.statistics()  # takes the loader's lock: would deadlock under it
            queued.prime("primed-in-scope", 1)

    with using_scope(ReentrantScope()):
        loader.load(1)
    assert seen == [1]


def test_DataLoader_then_runs_with_the_scope_of_the_then_call_on_another_thread():
    chained_loader, _ = id_loader()
    scope = RecordingScope()
    ran_on: list[threading.Thread] = []
    release = threading.Event()

    def slow_batch(keys: list[int]) -> list[int]:
        release.wait(TIMEOUT)  # so the batch completes on the pool thread
        return keys

    with cf.ThreadPoolExecutor(1) as pool:
        source = DataLoader(slow_batch, executor=pool)
        with using_scope(scope):
            chain = source.load(1).then(
                lambda v: ran_on.append(threading.current_thread()) or chained_loader.load(v)
            )
        assert current_scope() is None
        scope.queued.clear()
        dispatched = source.dispatch()
        release.set()
        dispatched.result(TIMEOUT)
        chained_loader.dispatch_and_join()
        assert chain.result(TIMEOUT) == 1
    assert ran_on and ran_on[0] is not threading.current_thread()
    assert scope.queued == [chained_loader]


def test_DataLoader_then_made_outside_a_scope_does_not_report_to_the_completing_threads_scope():
    loader, _ = id_loader()
    chained_loader, _ = id_loader()
    chain = loader.load(1).then(lambda v: chained_loader.load(v))
    other = RecordingScope()
    with using_scope(other):
        loader.dispatch()  # completes the source, so runs the then callback, here
    assert other.queued == []
    chained_loader.dispatch()
    assert chain.result(TIMEOUT) == 1


# -- time_since_dispatch ---------------------------------------------------------------


def test_DataLoader_time_since_dispatch_uses_the_injected_clock():
    clock = FakeClock()
    loader = DataLoader(lambda ks: ks, clock=clock)
    assert loader.time_since_dispatch() == 0
    clock.advance(1.0)
    assert loader.time_since_dispatch() == pytest.approx(1.0)
    loader.dispatch()  # even an empty dispatch resets it
    assert loader.time_since_dispatch() == 0
    clock.advance(0.25)
    loader.load(1)
    assert loader.time_since_dispatch() == pytest.approx(0.25)
    loader.dispatch()
    assert loader.time_since_dispatch() == 0


def test_DataLoader_calls_the_clock_outside_its_lock():
    holder: dict[str, Optional[DataLoader]] = {"loader": None}
    locked_during_clock: list[bool] = []

    def clock() -> float:
        loader = holder["loader"]
        if loader is not None:
            locked_during_clock.append(loader._lock._is_owned())
        return 0.0

    holder["loader"] = loader = DataLoader(lambda ks: ks, clock=clock)
    loader.load(1)
    loader.dispatch()
    loader.time_since_dispatch()
    assert locked_during_clock and not any(locked_during_clock)


# -- bad input -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, error, parameter",
    [
        ({"max_batch_size": 0}, ValueError, "max_batch_size"),
        ({"max_batch_size": -1}, ValueError, "max_batch_size"),
        ({"max_batch_size": 2.0}, TypeError, "max_batch_size"),
        ({"max_batch_size": "10"}, TypeError, "max_batch_size"),
        ({"max_batch_size": True}, TypeError, "max_batch_size"),
        ({"cache_key_fn": "id"}, TypeError, "cache_key_fn"),
        ({"context_provider": 42}, TypeError, "context_provider"),
        ({"executor": object()}, TypeError, "executor"),
        ({"cache_map": [1, 2]}, TypeError, "cache_map"),
        ({"clock": 1.0}, TypeError, "clock"),
        ({"name": 12}, TypeError, "name"),
        ({"context": 1, "context_provider": lambda: 2}, ValueError, "context"),
    ],
)
def test_DataLoader_rejects_bad_arguments_naming_the_parameter(kwargs, error, parameter):
    with pytest.raises(error, match=parameter):
        DataLoader(lambda ks: ks, **kwargs)


def test_DataLoader_rejects_a_non_callable_batch_function():
    with pytest.raises(TypeError, match="batch_load_fn"):
        DataLoader("not callable")  # type: ignore[arg-type]


def test_DataLoader_rejects_unhashable_keys_naming_the_key():
    loader, _ = id_loader()
    for call in (lambda: loader.load([1]), lambda: loader.load_many([1, [2]]),
                 lambda: loader.prime({}, 1), lambda: loader.clear({})):
        with pytest.raises(TypeError, match="key must be hashable.*cache_key_fn"):
            call()
    assert loader.dispatch_depth == 0  # load_many queued nothing


@pytest.mark.parametrize("cache_map", [None, type("Map", (dict,), {})()], ids=["dict", "dict subclass"])
def test_DataLoader_rejects_unhashable_keys_whatever_the_cache_map(cache_map):
    loader, _ = id_loader(cache_map=cache_map)
    with pytest.raises(TypeError, match="key must be hashable.*cache_key_fn"):
        loader.load({"a": 1})
    assert loader.dispatch_depth == 0 and loader.statistics().load_count == 0


def test_DataLoader_rejects_an_unhashable_cache_key():
    loader, _ = id_loader(cache_key_fn=lambda k: [k])
    with pytest.raises(TypeError, match="hashable"):
        loader.load(1)


def test_DataLoader_cache_key_fn_that_raises_fails_the_load_call():
    def cache_key(k: Any) -> Any:
        raise KeyError("no id")

    loader, _ = id_loader(cache_key_fn=cache_key)
    with pytest.raises(KeyError):
        loader.load({})
    assert loader.dispatch_depth == 0


# -- thread safety: stress -------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("use_executor", [False, True], ids=["inline", "executor"])
def test_DataLoader_stress_concurrent_loads_and_dispatches(use_executor):
    """8 threads x 3,000 random loads over 500 keys while 2 threads dispatch."""
    n_loaders, n_loads, n_keys = 8, 3000, 500
    seen = collections.Counter()
    seen_lock = threading.Lock()

    def batch(keys: list[int]) -> list[int]:
        with seen_lock:
            seen.update(keys)
        return [k * 2 for k in keys]

    pool = cf.ThreadPoolExecutor(2) if use_executor else None
    try:
        loader = DataLoader(batch, executor=pool)
        stop_dispatching = threading.Event()
        start = threading.Barrier(n_loaders + 2, timeout=TIMEOUT)
        results: list[list[Any]] = [[] for _ in range(n_loaders)]
        errors: list[BaseException] = []

        def load_worker(i: int) -> None:
            rng = random.Random(i)
            out = results[i]
            try:
                start.wait()
                for _ in range(n_loads):
                    key = rng.randrange(n_keys)
                    if rng.random() < 0.1:
                        out.append((key, loader.load_many([key, (key + 1) % n_keys])))
                    else:
                        out.append((key, loader.load(key)))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        def dispatch_worker() -> None:
            try:
                start.wait()
                while not stop_dispatching.is_set():
                    loader.dispatch()
                    stop_dispatching.wait(0.0005)  # pace, so loaders get the GIL too
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        loaders = [threading.Thread(target=load_worker, args=(i,)) for i in range(n_loaders)]
        dispatchers = [threading.Thread(target=dispatch_worker) for _ in range(2)]
        for t in loaders + dispatchers:
            t.start()
        for t in loaders:
            t.join(TIMEOUT * 3)
        stop_dispatching.set()
        for t in dispatchers:
            t.join(TIMEOUT)
        assert not errors, errors
        assert not any(t.is_alive() for t in loaders + dispatchers)

        loader.dispatch()  # the final dispatch: nothing stays queued
        assert loader.dispatch_depth == 0
        for out in results:
            assert len(out) == n_loads
            for key, fut in out:
                value = fut.result(timeout=TIMEOUT)
                if isinstance(value, list):
                    assert value == [key * 2, ((key + 1) % n_keys) * 2]
                else:
                    assert value == key * 2
        assert max(seen.values()) == 1, "a cached key reached the batch function twice"
        assert set(seen) <= set(range(n_keys))
        stats = loader.statistics()
        assert stats.batch_load_count == len(seen)
        assert stats.load_count == stats.cache_hit_count + stats.batch_load_count
    finally:
        if pool is not None:
            pool.shutdown(wait=True)


# -- cost: nothing linear in the pending keys ------------------------------------------
#
# These guard against quadratic behaviour (the graphql-ruby Source#sync lesson:
# a step that scans every pending key).  They compare costs measured in the same
# test, best of several runs, and bound the RATIO generously, so that a loaded
# machine does not fail them but an O(n) step per key (ratio ~100 for 10x the
# keys, or ~10 for a per-operation cost) does.


def _best_of(runs: int, fn) -> float:
    """The best CPU time of this thread over *runs* calls, with the cyclic GC off
    (as ``timeit`` does): a collection's cost depends on everything alive in the
    process, not on the code measured; and thread CPU time, unlike wall time, is
    not skewed by other processes competing for the machine's cores."""
    best = float("inf")
    gc.collect()
    gc.disable()
    try:
        for _ in range(runs):
            t0 = time.thread_time()
            fn()
            best = min(best, time.thread_time() - t0)
    finally:
        gc.enable()
    return best


def _round_trip(n: int) -> None:
    loader = DataLoader(lambda ks: ks)
    fut = loader.load_many(range(n))
    loader.dispatch()
    assert len(fut.result(TIMEOUT)) == n


def test_DataLoader_load_many_cost_grows_linearly_with_keys():
    _round_trip(5_000)  # warm up
    small = _best_of(3, lambda: _round_trip(5_000))
    large = _best_of(3, lambda: _round_trip(50_000))
    # Linear: ~10x.  Quadratic: ~100x.
    assert large / small <= 20, f"50k keys cost {large / small:.1f}x 5k keys"


def _per_op_cost_with_pending(n_pending: int, ops: int = 2000) -> float:
    loader = DataLoader(lambda ks: ks)
    loader.load_many(range(n_pending))
    done = completed_future(1)
    assert loader.dispatch_depth == n_pending
    counter = iter(range(n_pending, n_pending + 10 * ops))

    def ops_run() -> None:
        load = loader.load
        for _ in range(ops):
            load(next(counter))
            load(0)  # a cache hit of a pending key
            done.result()

    return _best_of(5, ops_run)


def test_DataLoader_load_cost_does_not_grow_with_pending_keys():
    _per_op_cost_with_pending(5_000)  # warm up
    small = _per_op_cost_with_pending(5_000)
    large = _per_op_cost_with_pending(50_000)
    # Constant per operation: ~1x.  A step scanning the pending keys: ~10x.
    assert large / small <= 5, f"a load with 50k pending cost {large / small:.1f}x one with 5k"


def _load_dispatch_result(n_pending: int) -> float:
    def run() -> None:
        loader = DataLoader(lambda ks: ks)
        loader.load_many(range(n_pending))
        fut = loader.load(-1)
        loader.dispatch()
        assert fut.result(TIMEOUT) == -1

    return _best_of(3, run)


def test_DataLoader_load_dispatch_result_cost_grows_linearly_with_pending_keys():
    _load_dispatch_result(5_000)  # warm up
    small = _load_dispatch_result(5_000)
    large = _load_dispatch_result(50_000)
    # The dispatch sends every pending key (linear, ~10x); quadratic would be ~100x.
    assert large / small <= 20, f"50k pending cost {large / small:.1f}x 5k pending"


def test_DataLoader_dispatch_future_joins_slices_completing_out_of_order():
    pending = []  # the batch futures, completed by the test in reverse order

    def batch(keys):
        fut = cf.Future()
        pending.append((fut, list(keys)))
        return fut

    loader = DataLoader(batch, max_batch_size=2)
    futures = [loader.load(k) for k in range(5)]
    result = loader.dispatch()
    assert [keys for _, keys in pending] == [[0, 1], [2, 3], [4]]
    for fut, keys in reversed(pending):
        assert not result.done()
        fut.set_result([k * 10 for k in keys])
    assert result.result(timeout=5) == [0, 10, 20, 30, 40]
    assert [f.result(timeout=5) for f in futures] == [0, 10, 20, 30, 40]


def test_DataLoader_dispatch_future_fails_with_a_slice_error_and_keeps_other_keys():
    def batch(keys):
        if 2 in keys:
            raise ValueError("slice with 2 failed")
        return [KeyError(k) if k == 4 else k for k in keys]

    loader = DataLoader(batch, max_batch_size=2)
    futures = [loader.load(k) for k in range(6)]
    result = loader.dispatch()
    with pytest.raises(ValueError, match="slice with 2 failed"):
        result.result(timeout=5)
    assert futures[0].result(timeout=5) == 0 and futures[5].result(timeout=5) == 5
    with pytest.raises(KeyError):
        futures[4].result(timeout=5)


# -- a BaseException mid-dispatch settles every key of that dispatch ------------------


class Interrupt(BaseException):
    """Stands for KeyboardInterrupt/SystemExit or a gevent Timeout (not an Exception)."""


def raise_interrupt(_: Any) -> None:
    raise Interrupt()


class InterruptOnCall(IdLoader):
    """An ``IdLoader`` that raises ``Interrupt`` on its ``n``-th call (recorded in ``calls`` too)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def __call__(self, keys: list[Any]) -> list[Any]:
        result = super().__call__(keys)
        if len(self.calls) == self.n:
            raise Interrupt()
        return result


def test_DataLoader_BaseException_in_the_first_slice_settles_and_evicts_every_key_then_propagates():
    batch = InterruptOnCall(1)
    loader = DataLoader(batch, max_batch_size=2)
    futures = [loader.load(k) for k in range(4)]
    with pytest.raises(Interrupt):
        loader.dispatch()
    assert batch.calls == [[0, 1]]  # later slices are not called once the dispatch is interrupted
    assert all(f.done() for f in futures)
    assert isinstance(futures[0].exception(0), Interrupt)
    assert isinstance(futures[2].exception(0), cf.CancelledError)
    assert isinstance(futures[2].exception(0).__cause__, Interrupt)
    # every key left the cache: a later load retries
    again = [loader.load(k) for k in range(4)]
    assert all(a is not f for a, f in zip(again, futures))
    loader.dispatch()
    assert [f.result(TIMEOUT) for f in again] == [0, 1, 2, 3]
    stats = loader.statistics()
    assert stats.load_error_count == 4 and stats.batch_invoke_count == 3


def test_DataLoader_BaseException_in_a_then_callback_settles_the_rest_of_the_batch_then_propagates():
    loader = DataLoader(lambda keys: list(keys))
    first = loader.load(1)
    ran: list[int] = []
    chained = first.then(raise_interrupt)
    first.add_done_callback(lambda f: ran.append(f.result()))  # a later callback of the same future
    others = [loader.load(k) for k in (2, 3, 4)]
    with pytest.raises(Interrupt):
        loader.dispatch()
    # ... but only after everything was settled
    assert ran == [1]
    assert [f.result(0) for f in others] == [2, 3, 4]
    assert isinstance(chained.exception(0), Interrupt)
    assert loader.dispatch_depth == 0


def test_DataLoader_settles_every_key_of_a_batch_before_any_callback_runs():
    loader = DataLoader(lambda keys: list(keys))
    futures = [loader.load(k) for k in range(3)]
    seen: list[list[bool]] = []
    futures[0].add_done_callback(lambda f: seen.append([g.done() for g in futures]))
    chained = futures[0].then(lambda v: [g.done() for g in futures])
    loader.dispatch()
    assert seen == [[True, True, True]]
    assert chained.result(TIMEOUT) == [True, True, True]


def test_DataLoader_BaseException_in_a_slice_after_the_first_settles_the_rest():
    loader = DataLoader(InterruptOnCall(2), max_batch_size=1)
    futures = [loader.load(k) for k in range(3)]
    with pytest.raises(Interrupt):
        loader.dispatch()
    assert futures[0].result(0) == 0
    assert isinstance(futures[1].exception(0), Interrupt)
    assert isinstance(futures[2].exception(0), cf.CancelledError)


def test_DataLoader_BaseException_from_a_mapping_result_fails_the_batch_then_propagates():
    class Exploding(dict):
        def get(self, key: Any, default: Any = None) -> Any:
            raise Interrupt()

    loader = DataLoader(lambda keys: Exploding())
    futures = [loader.load(k) for k in range(2)]
    with pytest.raises(Interrupt):
        loader.dispatch()
    assert all(isinstance(f.exception(0), Interrupt) for f in futures)
    assert loader.load(0) is not futures[0]


def test_DataLoader_BaseException_from_context_provider_settles_every_slice():
    def provider() -> Any:
        raise Interrupt()

    loader = DataLoader(lambda keys, env: keys, pass_env=True, context_provider=provider, max_batch_size=1)
    futures = [loader.load(k) for k in range(3)]
    with pytest.raises(Interrupt):
        loader.dispatch()
    assert all(f.done() for f in futures)
    assert loader.load(2) is not futures[2]


def test_DataLoader_batch_false_load_many_BaseException_settles_the_keys_not_called():
    batch = InterruptOnCall(1)
    loader = DataLoader(batch, batch=False)
    with pytest.raises(Interrupt):
        loader.load_many([1, 2, 3])
    assert batch.calls == [[1]]
    # no key stays cached unsettled: each is loaded again
    assert [loader.load(k).result(0) for k in (1, 2, 3)] == [1, 2, 3]
    assert batch.calls == [[1], [1], [2], [3]]


def test_DataLoader_BaseException_in_a_done_callback_still_runs_the_other_callbacks():
    fut: Future[int] = Future()
    seen: list[str] = []
    fut.add_done_callback(raise_interrupt)
    fut.add_done_callback(lambda f: seen.append("second"))
    with pytest.raises(Interrupt):
        fut.set_result(1)
    assert seen == ["second"] and fut.result(0) == 1


# -- prime(key, future) ------------------------------------------------------------------


def test_DataLoader_prime_with_a_future_caches_its_outcome():
    loader, calls = id_loader()
    loader.prime("A", completed_future("a"))
    loader.prime("B", failed_future(KeyError("b")))
    assert loader.load("A").result(TIMEOUT) == "a"
    with pytest.raises(KeyError):
        loader.load("B").result(TIMEOUT)
    std: cf.Future = cf.Future()
    std.set_result("c")
    loader.prime("C", std)
    assert loader.load("C").result(TIMEOUT) == "c"
    assert calls == [] and loader.dispatch_depth == 0


def test_DataLoader_prime_with_a_pending_future_completes_the_load_when_it_completes():
    loader, calls = id_loader()
    source: cf.Future = cf.Future()
    loader.prime("A", source)
    f = loader.load("A")
    assert not f.done() and loader.dispatch_depth == 0
    done = threading.Event()

    def complete() -> None:
        source.set_result("from another thread")
        done.set()

    t = threading.Thread(target=complete)
    t.start()
    assert f.result(TIMEOUT) == "from another thread"
    t.join(TIMEOUT)
    assert loader.load("A") is f and calls == []


def test_DataLoader_prime_with_a_pending_future_that_fails_or_is_cancelled():
    loader, _ = id_loader()
    failing: Future[Any] = Future()
    cancelled: cf.Future = cf.Future()
    loader.prime("F", failing).prime("C", cancelled)
    failing.set_exception(ValueError("no"))
    cancelled.cancel()
    with pytest.raises(ValueError):
        loader.load("F").result(TIMEOUT)
    assert isinstance(loader.load("C").exception(TIMEOUT), cf.CancelledError)


def test_DataLoader_prime_with_a_future_does_not_replace_a_cached_key():
    loader, _ = id_loader()
    loader.prime("A", "a")
    source: Future[str] = Future()
    loader.prime("A", source)
    assert loader.load("A").result(TIMEOUT) == "a"
    assert source._done_callbacks is None  # nothing left waiting on a future that was not used


# -- a failing cache_map -----------------------------------------------------------------


class FailingCacheMap(CustomCacheMap):
    """A cache map that raises on reads and/or writes of the keys in *bad*."""

    def __init__(self, bad: Any, reads: bool = True, writes: bool = False, deletes: bool = False) -> None:
        super().__init__()
        self.bad, self.reads, self.writes, self.deletes = set(bad), reads, writes, deletes

    def get(self, key: Any, default: Any = None) -> Any:
        if self.reads and key in self.bad:
            raise ConnectionError(f"cache read of {key!r}")
        return super().get(key, default)

    def __setitem__(self, key: Any, value: Any) -> None:
        if self.writes and key in self.bad:
            raise ConnectionError(f"cache write of {key!r}")
        super().__setitem__(key, value)

    def __delitem__(self, key: Any) -> None:
        if self.deletes and key in self.bad:
            raise ConnectionError(f"cache delete of {key!r}")
        super().__delitem__(key)


def test_DataLoader_cache_map_read_error_is_a_miss_logged_once(caplog: pytest.LogCaptureFixture):
    loader, calls = id_loader(cache_map=FailingCacheMap({"bad"}))
    with caplog.at_level("WARNING", logger="dataloader_sync"):
        f1, f2 = loader.load("bad"), loader.load("bad")
        loader.dispatch()
    assert (f1.result(TIMEOUT), f2.result(TIMEOUT)) == ("bad", "bad")
    assert calls == [["bad", "bad"]]
    records = [r for r in caplog.records if r.name == "dataloader_sync"]
    assert len(records) == 1 and "cache_map" in records[0].getMessage()
    stats = loader.statistics()
    assert stats.load_count == 2 and stats.cache_hit_count == 0 and stats.load_error_count == 0


@pytest.mark.parametrize("options", [{}, {"cache_key_fn": str}, {"cache": False}, {"batch": False}])
def test_DataLoader_load_count_counts_every_load_whether_queued_dispatched_or_cancelled(options: dict[str, Any]):
    # The loads of queued keys are counted with their queue (as it leaves): the count is the same
    # whenever it is read, through load(), load() with a key context and load_many().
    loader = DataLoader(lambda keys: list(keys), **options)
    expected = 0

    def check(loads: int, hits: int = 0) -> None:
        nonlocal expected
        expected += loads
        stats = loader.statistics()
        assert stats.load_count == expected and stats.cache_hit_count + stats.cache_miss_count == expected

    loader.load(1)
    check(1)
    loader.load(2, key_context="c")
    loader.load_many([3, 4])
    check(3)
    cancelled = loader.load(5)
    assert cancelled.cancel() is options.get("batch", True)  # dropped from the queue (batch=False: done)
    check(1)
    loader.dispatch()
    check(0)
    loader.load_many([1, 6])  # a hit (cached loaders) and a miss
    loader.load(7)
    check(3)
    loader.dispatch_and_join()
    check(0)
    assert loader.statistics().cache_hit_count == (0 if not options.get("cache", True) else 1)


def test_DataLoader_load_many_with_a_failing_cache_read_never_half_registers(caplog: pytest.LogCaptureFixture):
    cache = FailingCacheMap({"bad"})
    loader, calls = id_loader(cache_map=cache)
    with caplog.at_level("WARNING", logger="dataloader_sync"):
        many = loader.load_many(["a", "bad"])
    assert loader.dispatch_depth == 2
    loader.dispatch()
    assert many.result(TIMEOUT) == ["a", "bad"]
    assert loader.load("a").result(TIMEOUT) == "a"  # cached, completes
    assert calls == [["a", "bad"]]
    assert loader.statistics().load_count == 3


def test_DataLoader_cache_map_write_error_leaves_the_key_uncached_but_loaded(caplog: pytest.LogCaptureFixture):
    cache = FailingCacheMap({"bad"}, reads=False, writes=True)
    loader, calls = id_loader(cache_map=cache)
    with caplog.at_level("WARNING", logger="dataloader_sync"):
        many = loader.load_many(["a", "bad", "b"])
        single = loader.load("bad")
        loader.dispatch()
    assert many.result(TIMEOUT) == ["a", "bad", "b"] and single.result(TIMEOUT) == "bad"
    assert set(cache.stash) == {"a", "b"}
    assert calls == [["a", "bad", "b", "bad"]]
    records = [r for r in caplog.records if r.name == "dataloader_sync"]
    assert len(records) == 1 and "cache_map" in records[0].getMessage()


def test_DataLoader_cache_map_delete_error_on_a_failed_batch_still_settles_every_key(
        caplog: pytest.LogCaptureFixture):
    cache = FailingCacheMap({1}, reads=False, deletes=True)

    def fail(keys: list[int]) -> list[int]:
        raise RuntimeError("backend down")

    loader = DataLoader(fail, cache_map=cache)
    futures = [loader.load(k) for k in (1, 2)]
    with caplog.at_level("WARNING", logger="dataloader_sync"):
        loader.dispatch()
    assert all(isinstance(f.exception(0), RuntimeError) for f in futures)
    assert list(cache.stash) == [1]  # could not be evicted: logged, the other key left
    assert any("cache_map" in r.getMessage() for r in caplog.records if r.name == "dataloader_sync")


def test_DataLoader_load_many_interrupted_by_the_cache_map_queues_every_key_it_cached():
    class InterruptingCacheMap(CustomCacheMap):
        def __setitem__(self, key: Any, value: Any) -> None:
            if key == "bad":
                raise Interrupt()
            super().__setitem__(key, value)

    loader, calls = id_loader(cache_map=InterruptingCacheMap())
    with pytest.raises(Interrupt):
        loader.load_many(["a", "bad", "c"])
    assert loader.dispatch_depth == 1  # "a" was cached, so it is queued too
    loader.dispatch()
    assert loader.load("a").result(0) == "a"
    assert calls == [["a"]]
    assert loader.statistics().load_count == 2


# -- sync on demand: blocking on a load nobody dispatched ----------------------------------


def test_DataLoader_result_of_a_load_nobody_dispatched_dispatches_that_loader_only():
    users, user_calls = id_loader()
    posts, post_calls = id_loader()
    first, second = users.load(1), users.load(2)
    post = posts.load("p")
    assert first.result(timeout=TIMEOUT) == 1
    assert user_calls == [[1, 2]]  # one batch, with every key queued on that loader
    assert second.done() and users.dispatch_depth == 0
    assert post_calls == [] and not post.done() and posts.dispatch_depth == 1  # not its loader


def test_DataLoader_exception_and_a_zero_timeout_dispatch_too():
    def batch(keys: list[int]) -> list[Any]:
        return [ValueError(k) if k < 0 else k for k in keys]

    loader = DataLoader(batch)
    assert isinstance(loader.load(-1).exception(timeout=TIMEOUT), ValueError)
    assert loader.load(5).result(timeout=0) == 5  # a poll dispatches: the batch runs on this thread


def test_DataLoader_result_returns_when_its_own_key_is_settled_not_the_others():
    release = threading.Event()

    def batch(keys: list[int]) -> list[int]:
        if 2 in keys:
            assert release.wait(TIMEOUT)
        return list(keys)

    with cf.ThreadPoolExecutor(2, thread_name_prefix="test-own-key") as pool:
        loader = DataLoader(batch, max_batch_size=1, executor=pool)
        mine, stuck = loader.load(1), loader.load(2)
        assert mine.result(timeout=TIMEOUT) == 1
        assert not stuck.done()  # its own key only: the other slice is still running
        release.set()
        assert stuck.result(timeout=TIMEOUT) == 2


def test_DataLoader_result_does_not_dispatch_keys_queued_after_its_own_batch():
    release = threading.Event()

    def batch(keys: list[int]) -> list[int]:
        assert release.wait(TIMEOUT)
        return list(keys)

    with cf.ThreadPoolExecutor(1, thread_name_prefix="test-in-flight") as pool:
        loader = DataLoader(batch, executor=pool)
        mine = loader.load(1)
        loader.dispatch()  # in flight on the pool
        later = loader.load(2)
        with pytest.raises(cf.TimeoutError):
            mine.result(timeout=0.01)  # nothing to dispatch for this key: it only waits
        assert loader.dispatch_depth == 1 and not later.done()
        release.set()
        assert mine.result(timeout=TIMEOUT) == 1
        assert later.result(timeout=TIMEOUT) == 2  # ... and this one dispatches its own batch


def test_DataLoader_then_chain_dispatches_each_loader_as_the_chain_reaches_it():
    order: list[str] = []

    def recording(name: str) -> Any:
        def batch(keys: list[int]) -> list[int]:
            order.append(f"{name}{keys}")
            return [k + 1 for k in keys]
        return DataLoader(batch)

    a, b, c = recording("a"), recording("b"), recording("c")
    chained = a.load(1).then(b.load).then(lambda v: c.load(v).then(lambda w: w * 10))
    assert c.load(100) is not None  # queued on c before the chain gets there: batched with it
    assert chained.result(timeout=TIMEOUT) == 40
    assert order == ["a[1]", "b[2]", "c[100, 3]"]


def test_DataLoader_then_chain_completed_on_another_thread_wakes_the_waiter_to_dispatch_the_next_loader():
    dispatched_on: list[str] = []

    def first(keys: list[int]) -> list[int]:
        wait_until_blocked_on(chained)  # the chain moves on while the waiter sleeps
        return list(keys)

    def second(keys: list[int]) -> list[int]:
        dispatched_on.append(threading.current_thread().name)
        return [k * 2 for k in keys]

    got: queue.Queue[Any] = queue.Queue()
    with cf.ThreadPoolExecutor(1, thread_name_prefix="test-chain-pool") as pool:
        a = DataLoader(first, executor=pool)
        b = DataLoader(second)  # no executor: dispatched on the thread that blocks
        chained = a.load(21).then(b.load)
        waiter = threading.Thread(target=lambda: got.put(chained.result()), name="test-chain-waiter")
        waiter.start()
        try:
            assert got.get(timeout=TIMEOUT) == 42  # no timeout in result(): only a wake-up gets it there
        finally:
            b.dispatch()  # if the waiter was never woken, let it finish
            waiter.join(TIMEOUT)
    assert dispatched_on == ["test-chain-waiter"]


def test_DataLoader_result_from_a_worker_thread_on_a_load_queued_by_another_thread():
    loader, calls = id_loader()
    futures = [loader.load(k) for k in range(3)]  # queued by this (the "request") thread
    got: queue.Queue[Any] = queue.Queue()
    t = threading.Thread(target=lambda: got.put((futures[1].result(TIMEOUT), threading.current_thread().name)),
                         name="test-worker-blocks")
    t.start()
    assert got.get(timeout=TIMEOUT) == (1, "test-worker-blocks")
    t.join(TIMEOUT)
    assert calls == [[0, 1, 2]]


def test_DataLoader_many_threads_blocking_on_one_loader_dispatch_it_once_per_queue():
    loader, calls = id_loader()
    futures = [loader.load(k) for k in range(64)]
    start = threading.Barrier(8)
    results: list[list[Any]] = [[] for _ in range(8)]

    def block(i: int) -> None:
        start.wait(TIMEOUT)
        results[i] = [f.result(TIMEOUT) for f in futures[i::8]]

    threads = [threading.Thread(target=block, args=(i,), name=f"test-blocker-{i}") for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert [sorted(r) for r in results] == [list(range(64))[i::8] for i in range(8)]
    assert sorted(k for call in calls for k in call) == list(range(64))  # no key loaded twice


def test_DataLoader_batch_function_may_block_on_loads_of_its_own_and_other_loaders():
    names = DataLoader(lambda keys: [f"name-{k}" for k in keys])
    loader: DataLoader[int, Any]

    def batch(keys: list[int]) -> list[Any]:
        out = []
        for k in keys:
            parent = loader.load(k - 1).result(TIMEOUT) if k > 0 else None  # same loader, a new key
            out.append((names.load(k).result(TIMEOUT), parent))
        return out

    loader = DataLoader(batch)
    assert loader.load(2).result(TIMEOUT) == ("name-2", ("name-1", ("name-0", None)))


def test_DataLoader_load_many_and_gather_block_by_dispatching_each_loader():
    a, a_calls = id_loader()
    b, b_calls = id_loader()
    assert a.load_many([1, 2]).result(TIMEOUT) == [1, 2]
    assert gather([a.load(3), b.load(4).then(a.load)]).result(TIMEOUT) == [3, 4]
    assert a_calls == [[1, 2], [3], [4]] and b_calls == [[4]]


def test_DataLoader_concurrent_futures_wait_and_as_completed_dispatch_the_loaders():
    a, a_calls = id_loader()
    b, b_calls = id_loader()
    done, not_done = cf.wait([a.load(1), b.load(2)], timeout=TIMEOUT)
    assert len(done) == 2 and not not_done
    chained = a.load(3).then(b.load)
    assert [f.result(0) for f in cf.as_completed([chained, b.load(5)], timeout=TIMEOUT)] in ([3, 5], [5, 3])
    assert cf.wait([a.load(6)], timeout=TIMEOUT, return_when=cf.FIRST_COMPLETED).done
    assert a_calls == [[1], [3], [6]]
    assert b_calls[0] == [2] and sorted(k for call in b_calls[1:] for k in call) == [3, 5]  # order: set order


def test_DataLoader_prime_with_a_pending_load_of_another_loader_dispatches_it_on_demand():
    source, calls = id_loader()
    target, _ = id_loader()
    target.prime("k", source.load("from source"))
    assert target.load("k").result(TIMEOUT) == "from source"
    assert calls == [["from source"]]


def wait_until_blocked_on(fut: Future) -> None:
    """Return once a thread sleeps in fut.result()/exception() (on its Blocker; CPython internals)."""
    from dataloader_sync._core._sync_on_demand import Blocker

    deadline = time.monotonic() + TIMEOUT
    pause = threading.Event()
    while time.monotonic() < deadline:
        if any(type(w) is Blocker and w._cond._waiters for w in list(fut._waiter_list or ())):
            return
        pause.wait(0.001)
    raise AssertionError("no thread started waiting")


def test_DataLoader_a_cancelled_load_wakes_a_thread_blocked_on_it():
    release, started = threading.Event(), threading.Event()

    def batch(keys: list[int]) -> list[int]:
        started.set()
        assert release.wait(TIMEOUT)
        return list(keys)

    with cf.ThreadPoolExecutor(1, thread_name_prefix="test-cancel-wake") as pool:
        loader = DataLoader(batch, executor=pool)
        chained = loader.load(1).then(lambda v: v)
        outcome: queue.Queue[Any] = queue.Queue()

        def wait() -> None:
            try:
                chained.exception(6 * TIMEOUT)
            except BaseException as exc:
                outcome.put(exc)

        t = threading.Thread(target=wait, name="test-cancel-waiter")
        t.start()
        assert started.wait(TIMEOUT)  # the waiter dispatched; the batch blocks on the pool
        wait_until_blocked_on(chained)
        assert chained.cancel()
        assert isinstance(outcome.get(timeout=TIMEOUT), cf.CancelledError)  # woken, not after TIMEOUT
        release.set()
        t.join(TIMEOUT)


def test_DataLoader_result_timeout_leaves_no_waiter_behind():
    release = threading.Event()
    with cf.ThreadPoolExecutor(1, thread_name_prefix="test-timeout") as pool:
        loader = DataLoader(lambda keys: release.wait(TIMEOUT) and list(keys), executor=pool)
        chained = loader.load(1).then(lambda v: v)
        with pytest.raises(cf.TimeoutError):
            chained.result(timeout=0.01)
        assert not chained._waiter_list and not chained._drivers
        release.set()
        assert chained.result(TIMEOUT) == 1


def test_DataLoader_futures_hold_no_reference_to_their_loader():
    import weakref

    loader, _ = id_loader()
    fut = loader.load(1)
    ref = weakref.ref(loader)
    del loader
    gc.collect()
    assert ref() is None  # no cycle loader -> cache -> future -> loader keeps it
    with pytest.raises(RuntimeError, match="garbage-collected before it dispatched"):
        fut.result(timeout=0)  # its loader is gone: nothing can dispatch it, and it says so


@pytest.mark.parametrize("how", ["result", "exception", "then", "gather", "wait", "as_completed"])
def test_DataLoader_a_load_whose_loader_was_collected_fails_clearly_instead_of_hanging(how):
    # DataLoader(fn).load(1).result(): the loader is garbage when result() blocks.
    fut = DataLoader(lambda keys: keys).load(1)
    gc.collect()
    if how == "result":
        with pytest.raises(RuntimeError, match="garbage-collected"):
            fut.result()  # no timeout: before the fix this waited forever
        return
    if how == "exception":
        assert "garbage-collected" in str(fut.exception())
        return
    if how == "then":
        with pytest.raises(RuntimeError, match="garbage-collected"):
            fut.then(lambda v: v).result()
        return
    if how == "gather":
        from dataloader_sync import gather

        with pytest.raises(RuntimeError, match="garbage-collected"):
            gather([fut]).result()
        return
    if how == "wait":
        done, _ = cf.wait([fut])
        assert done == {fut}
    else:
        assert list(cf.as_completed([fut])) == [fut]
    assert isinstance(fut.exception(0), RuntimeError)


def test_DataLoader_a_dispatch_on_demand_is_instrumented_as_a_dispatch():
    from dataloader_sync import DataLoaderInstrumentation

    seen: list[Any] = []

    class Recording(DataLoaderInstrumentation):
        def begin_dispatch(self, loader: Any) -> Any:
            seen.append("dispatch")
            return None

        def begin_batch(self, loader: Any, keys: list[Any], environment: Any) -> Any:
            seen.append(list(keys))
            return None

    loader = DataLoader(lambda keys: list(keys), instrumentation=Recording())
    first, second = loader.load(1), loader.load(2)
    assert second.result(TIMEOUT) == 2 and first.done()
    assert seen == ["dispatch", [1, 2]]


def test_DataLoader_threads_blocking_on_chains_while_others_dispatch_lose_no_key_and_load_none_twice():
    loaders = [id_loader(name=f"l{i}") for i in range(3)]
    stop = threading.Event()
    errors: list[BaseException] = []

    def user(seed: int) -> None:
        rnd = random.Random(seed)
        try:
            for _ in range(300):
                (a, _), (b, _) = rnd.sample(loaders, 2)
                key = rnd.randrange(200)
                if rnd.random() < 0.5:
                    assert a.load(key).result(TIMEOUT) == key
                else:
                    assert a.load(key).then(b.load).result(TIMEOUT) == key
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def dispatcher() -> None:
        rnd = random.Random(99)
        while not stop.is_set():
            rnd.choice(loaders)[0].dispatch()

    threads = [threading.Thread(target=user, args=(i,), name=f"test-chain-user-{i}") for i in range(6)]
    background = threading.Thread(target=dispatcher, name="test-chain-dispatcher")
    background.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(6 * TIMEOUT)
    stop.set()
    background.join(TIMEOUT)
    assert not errors
    for _, calls in loaders:
        loaded = [k for call in calls for k in call]
        assert len(loaded) == len(set(loaded))  # cached: no key loaded twice


def test_DataLoader_concurrent_futures_wait_follows_a_chain_that_moves_while_it_sleeps():
    from dataloader_sync._core._sync_on_demand import _DrivingEvent

    def waiting_in_cf_wait() -> bool:
        return any(isinstance(getattr(w, "event", None), _DrivingEvent) and w.event._cond._waiters
                   for w in list(chained._waiter_list or ()))

    def first(keys: list[int]) -> list[int]:
        pause = threading.Event()
        deadline = time.monotonic() + TIMEOUT
        while not waiting_in_cf_wait() and time.monotonic() < deadline:
            pause.wait(0.001)
        return list(keys)

    got: queue.Queue[Any] = queue.Queue()
    with cf.ThreadPoolExecutor(1, thread_name_prefix="test-wait-chain-pool") as pool:
        a = DataLoader(first, executor=pool)
        b, b_calls = id_loader()
        chained = a.load(7).then(b.load)
        waiter = threading.Thread(target=lambda: got.put(cf.wait([chained])), name="test-wait-chain")
        waiter.start()
        try:
            done, _ = got.get(timeout=TIMEOUT)
        finally:
            b.dispatch()  # if the waiter was never woken, let it finish
            waiter.join(TIMEOUT)
    assert done == {chained} and chained.result(0) == 7 and b_calls == [[7]]


def test_DataLoader_clear_raises_the_cache_maps_error_to_its_caller():
    cache = FailingCacheMap({"bad"}, reads=False, deletes=True)
    loader, _ = id_loader(cache_map=cache)
    loader.prime("bad", 1).prime("good", 2)
    with pytest.raises(ConnectionError):
        loader.clear("bad")  # the caller asked for it: it learns that it did not happen
    loader.clear("good")
    assert list(cache.stash) == ["bad"]
    assert loader.load("bad").result(0) == 1


# -- state made on first use; load_many's one pass -------------------------------------------------


def test_DataLoader_makes_its_queue_ticket_and_batch_call_on_first_use_and_drops_the_queue_at_dispatch():
    loader, calls = id_loader()
    assert (loader._queue, loader._ticket, loader._call) == (None, None, None)
    assert loader.dispatch_depth == 0 and loader.statistics().batch_invoke_count == 0
    assert loader.dispatch_with_counts().keys_count == 0 and loader._call is None  # nothing to send
    fut = loader.load(1)
    assert loader._queue is not None and fut._ticket is loader._ticket and loader.dispatch_depth == 1
    loader.dispatch()
    assert (loader._queue, loader._ticket) == (None, None) and loader._call is not None
    assert fut.result(TIMEOUT) == 1 and calls == [[1]]
    assert loader.load(2) is not fut and loader.dispatch_depth == 1  # a new queue
    assert loader.dispatch().result(TIMEOUT) == [2]
    stats = loader.statistics()
    assert (stats.load_count, stats.batch_invoke_count, stats.cache_hit_count) == (2, 2, 0)


NEVER_USED_CENSUS = textwrap.dedent("""
    import gc
    from dataloader_sync import DataLoader

    def batch(keys):
        return keys

    def make():
        return DataLoader(batch, name="never used")

    make()
    gc.collect()
    gc.disable()
    try:
        before = len(gc.get_objects())
        kept = [make() for _ in range(200)]
        after = len(gc.get_objects())
    finally:
        gc.enable()
    print((after - before - 1) / len(kept))
""")


def test_DataLoader_never_used_keeps_three_objects_for_the_cyclic_gc():
    # In a fresh interpreter: what an instance keeps depends on its class's
    # history in the process (CPython's shared instance layouts).
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", NEVER_USED_CENSUS], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", "")))
    assert out.returncode == 0, out.stderr
    # the loader, its lock and its weak reference: no queue, ticket or batch call yet; a lock
    # is a tracked object from CPython 3.10 on, and before 3.11 an instance has a __dict__ too
    expected = 2 + gc.is_tracked(threading.RLock()) + (sys.version_info < (3, 11))
    assert float(out.stdout) <= expected + 0.1


def test_DataLoader_with_default_options_still_refuses_bad_arguments_naming_them():
    with pytest.raises(TypeError, match="batch_load_fn must be callable"):
        DataLoader(5)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="name must be a str or None"):
        DataLoader(lambda keys: keys, name=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="clock must be callable"):
        DataLoader(lambda keys: keys, clock=5)  # type: ignore[arg-type]

    class Name(str):
        pass

    assert DataLoader(lambda keys: keys, name=Name("sub")).name == "sub"  # a str subclass takes the full check


def test_DataLoader_load_many_of_cached_keys_is_done_at_once():
    loader, calls = id_loader()
    loader.load_many([1, 2, 3])
    loader.dispatch()
    again = loader.load_many([3, 1, 3])
    assert again.done() and again.result(0) == [3, 1, 3]
    assert loader.dispatch_depth == 0 and calls == [[1, 2, 3]]
    assert loader.statistics().cache_hit_count == 3 and loader.statistics().load_count == 6


def test_DataLoader_load_many_waits_with_one_done_callback_not_one_per_key():
    loader, _ = id_loader()
    fut = loader.load_many(range(100))
    queued = loader._queue
    assert queued is not None
    assert sum(f._done_callbacks is not None for f in queued.futures) == 1
    loader.dispatch()
    assert fut.result(TIMEOUT) == list(range(100))


def test_DataLoader_load_many_mixes_hits_and_misses_and_queues_a_missed_key_once():
    loader, calls = id_loader()
    loader.load_many([1, 2])
    loader.dispatch()
    fut = loader.load_many([5, 1, 6, 5, 2, 6])
    assert loader.dispatch_depth == 2
    loader.dispatch()
    assert fut.result(TIMEOUT) == [5, 1, 6, 5, 2, 6] and calls == [[1, 2], [5, 6]]
    stats = loader.statistics()
    assert (stats.load_count, stats.cache_hit_count) == (8, 4)


def test_DataLoader_load_many_settled_by_slices_in_any_order_keeps_the_order_of_keys():
    with cf.ThreadPoolExecutor(4) as pool:
        gates = [threading.Event() for _ in range(3)]

        def batch(keys: list[int]) -> list[int]:
            assert gates[keys[0] // 2].wait(TIMEOUT)
            return [k * 10 for k in keys]

        loader = DataLoader(batch, max_batch_size=2, executor=pool)
        fut = loader.load_many([0, 1, 2, 3, 4, 5])
        loader.dispatch()
        for gate in reversed(gates):  # the last slice settles first
            gate.set()
        assert fut.result(TIMEOUT) == [0, 10, 20, 30, 40, 50]


def test_DataLoader_load_many_fails_with_the_first_failed_key_or_lists_every_error():
    def batch(keys: list[int]) -> list[Any]:
        return [ValueError(f"bad {k}") if k % 2 else k for k in keys]

    loader = DataLoader(batch, max_batch_size=1)  # each key settles on its own
    failing = loader.load_many([0, 1, 2, 3])
    listing = loader.load_many([0, 1, 2, 3], return_exceptions=True)
    loader.dispatch()
    with pytest.raises(ValueError, match="bad 1"):
        failing.result(TIMEOUT)
    values = listing.result(TIMEOUT)
    assert values[0::2] == [0, 2] and [str(e) for e in values[1::2]] == ["bad 1", "bad 3"]


def test_DataLoader_load_many_with_a_cancelled_key_fails_or_lists_a_CancelledError():
    loader, calls = id_loader()
    failing = loader.load_many([1, 2])
    listing = loader.load_many([1, 2], return_exceptions=True)
    assert loader.load(2).cancel()
    loader.dispatch()
    with pytest.raises(cf.CancelledError):
        failing.result(TIMEOUT)
    values = listing.result(TIMEOUT)
    assert values[0] == 1 and isinstance(values[1], cf.CancelledError) and calls == [[1]]


def test_DataLoader_load_many_refuses_an_unhashable_key_or_a_bad_flag_registering_nothing():
    loader, calls = id_loader()
    with pytest.raises(TypeError, match="key must be hashable"):
        loader.load_many([1, [2], 3])
    with pytest.raises(TypeError, match="return_exceptions must be a bool"):
        loader.load_many([1, 2], return_exceptions="no")  # type: ignore[call-overload]
    assert loader.dispatch_depth == 0 and loader.statistics().load_count == 0
    assert loader.load_many([1, 3]).result(TIMEOUT) == [1, 3] and calls == [[1, 3]]

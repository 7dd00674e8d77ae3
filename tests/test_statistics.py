"""Tests for dataloader_sync._core._statistics (Statistics), after java-dataloader's DataLoaderStatsTest."""
from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from dataloader_sync import DataLoader, Statistics, failed_future

TIMEOUT = 10.0

COUNTS = (
    "load_count",
    "load_error_count",
    "batch_invoke_count",
    "batch_load_count",
    "batch_load_exception_count",
    "cache_hit_count",
    "value_cache_hit_count",
    "value_cache_miss_count",
)
RATIOS = ("load_error_ratio", "batch_load_ratio", "batch_load_exception_ratio", "cache_hit_ratio",
          "value_cache_hit_ratio")


def blowing_batch(keys: list[str]) -> Any:
    """java's batchLoaderThatBlows: "exception*" fails the batch as a future,
    "bang*" raises, "error*" fails that key, anything else is its own value."""
    values: list[Any] = []
    for key in keys:
        if key.startswith("exception"):
            return failed_future(RuntimeError(key))
        if key.startswith("bang"):
            raise RuntimeError(key)
        values.append(RuntimeError(key) if key.startswith("error") else key)
    return values


def test_Statistics_are_collected_by_default():
    loader = DataLoader(lambda ks: ks)
    loader.load("A")
    loader.load("B")
    loader.load_many(["C", "D"])
    stats = loader.statistics()
    assert (stats.load_count, stats.batch_invoke_count, stats.batch_load_count, stats.cache_hit_count) == (4, 0, 0, 0)

    loader.dispatch()
    stats = loader.statistics()
    assert (stats.load_count, stats.batch_invoke_count, stats.batch_load_count, stats.cache_hit_count) == (4, 1, 4, 0)

    loader.load("A")
    loader.load("B")
    loader.dispatch()
    stats = loader.statistics()
    assert (stats.load_count, stats.batch_invoke_count, stats.batch_load_count, stats.cache_hit_count) == (6, 1, 4, 2)
    assert stats.cache_miss_count == 4


def test_Statistics_with_caching_disabled():
    loader = DataLoader(lambda ks: ks, cache=False)
    loader.load("A")
    loader.load("B")
    loader.load_many(["C", "D"])
    loader.load_many(["E", "F"], {"E": "E", "F": "F"})
    stats = loader.statistics()
    assert (stats.load_count, stats.batch_invoke_count, stats.batch_load_count, stats.cache_hit_count) == (6, 0, 0, 0)

    loader.dispatch()
    stats = loader.statistics()
    assert (stats.load_count, stats.batch_invoke_count, stats.batch_load_count, stats.cache_hit_count) == (6, 1, 6, 0)

    loader.load("A")
    loader.load("B")
    loader.dispatch()
    stats = loader.statistics()
    assert (stats.load_count, stats.batch_invoke_count, stats.batch_load_count, stats.cache_hit_count) == (8, 2, 8, 0)


def test_Statistics_count_batch_failures_and_key_errors():
    loader = DataLoader(blowing_batch)
    loader.load("A")
    loader.load("exception")
    stats = loader.statistics()
    assert (stats.load_count, stats.batch_load_exception_count, stats.load_error_count) == (2, 0, 0)

    loader.dispatch()  # the batch fails as a whole (a failed future): both keys fail
    stats = loader.statistics()
    assert (stats.load_count, stats.batch_invoke_count, stats.batch_load_count) == (2, 1, 2)
    assert stats.batch_load_exception_count == 1
    assert stats.load_error_count == 2  # documented: a failed batch fails its loads

    for k in ("error1", "error2", "error3"):
        loader.load(k)
    loader.dispatch()
    stats = loader.statistics()
    assert (stats.load_count, stats.batch_load_count) == (5, 5)
    assert stats.batch_load_exception_count == 1
    assert stats.load_error_count == 5

    loader.load("bang")  # the batch function raises
    loader.dispatch()
    stats = loader.statistics()
    assert (stats.load_count, stats.batch_load_count, stats.batch_invoke_count) == (6, 6, 3)
    assert stats.batch_load_exception_count == 2
    assert stats.load_error_count == 6


def test_Statistics_count_a_wrong_result_as_a_batch_failure():
    loader = DataLoader(lambda ks: ks[:-1])
    loader.load(1)
    loader.load(2)
    loader.dispatch()
    stats = loader.statistics()
    assert stats.batch_load_exception_count == 1 and stats.load_error_count == 2


def test_Statistics_count_a_batch_false_loader():
    loader = DataLoader(lambda ks: ks, batch=False)
    loader.load(1)
    loader.load(1)
    loader.load_many([2, 3])
    stats = loader.statistics()
    assert (stats.load_count, stats.batch_invoke_count, stats.batch_load_count, stats.cache_hit_count) == (4, 3, 3, 1)


def test_Statistics_is_a_snapshot():
    loader = DataLoader(lambda ks: ks)
    before = loader.statistics()
    loader.load(1)
    assert before.load_count == 0
    assert loader.statistics().load_count == 1


def test_Statistics_ratios():
    stats = Statistics(load_count=8, load_error_count=2, batch_invoke_count=1,
                       batch_load_count=4, batch_load_exception_count=1, cache_hit_count=4)
    assert stats.load_error_ratio == 0.25
    assert stats.batch_load_ratio == 0.5
    assert stats.batch_load_exception_ratio == 0.125
    assert stats.cache_hit_ratio == 0.5
    assert stats.cache_miss_count == 4


def test_Statistics_ratios_are_zero_when_nothing_was_loaded():
    stats = Statistics()
    for name in COUNTS:
        assert getattr(stats, name) == 0
    for name in RATIOS:
        value = getattr(stats, name)
        assert value == 0.0 and isinstance(value, float)
    only_batches = Statistics(batch_invoke_count=3, batch_load_exception_count=2)
    assert only_batches.batch_load_exception_ratio == 0.0


def test_Statistics_add_up():
    a = Statistics(1, 2, 3, 4, 5, 6, 7, 8)
    b = Statistics(10, 20, 30, 40, 50, 60, 70, 80)
    total = a + b
    assert total == Statistics(11, 22, 33, 44, 55, 66, 77, 88)
    assert a == Statistics(1, 2, 3, 4, 5, 6, 7, 8)  # operands unchanged
    assert a + Statistics() == a


def test_Statistics_positional_construction_of_the_first_six_fields_still_works():
    old = Statistics(1, 2, 3, 4, 5, 6)
    assert (old.load_count, old.cache_hit_count) == (1, 6)
    assert (old.value_cache_hit_count, old.value_cache_miss_count) == (0, 0)
    assert old + Statistics(value_cache_hit_count=2) == Statistics(1, 2, 3, 4, 5, 6, 2, 0)


def test_Statistics_value_cache_hit_ratio_is_over_lookups():
    stats = Statistics(load_count=10, value_cache_hit_count=3, value_cache_miss_count=1)
    assert stats.value_cache_hit_ratio == 0.75
    assert stats.to_dict()["value_cache_hit_ratio"] == 0.75


def test_Statistics_add_rejects_other_types():
    with pytest.raises(TypeError):
        Statistics() + 1  # type: ignore[operator]
    with pytest.raises(TypeError):
        Statistics() + {"load_count": 1}  # type: ignore[operator]


def test_Statistics_to_dict_has_counts_and_ratios():
    stats = Statistics(load_count=4, cache_hit_count=1, batch_load_count=3, batch_invoke_count=1)
    d = stats.to_dict()
    assert set(d) == set(COUNTS) | set(RATIOS) | {"cache_miss_count"}
    for name in COUNTS + RATIOS + ("cache_miss_count",):
        assert d[name] == getattr(stats, name)
    assert d["cache_hit_ratio"] == 0.25


def test_Statistics_is_frozen():
    stats = Statistics()
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.load_count = 5  # type: ignore[misc]
    assert hash(stats) == hash(Statistics())


def test_Statistics_fields_are_the_documented_ones_in_order():
    assert tuple(f.name for f in dataclasses.fields(Statistics)) == COUNTS


def test_Statistics_sum_of_many():
    parts = [Statistics(load_count=i, cache_hit_count=1) for i in range(1, 4)]
    assert sum(parts) == Statistics(load_count=6, cache_hit_count=3)
    assert sum([], Statistics()) == Statistics()

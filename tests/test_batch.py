"""The batch's data shapes: queued loads as columns, and the dispatch sink."""
from __future__ import annotations

import pytest

from dataloader_sync import Future
from dataloader_sync._core._batch_shapes import DispatchSink, KeyQueue


def _futures(n):
    return [Future() for _ in range(n)]


def test_Queue_keeps_columns_in_load_order_and_adds_contexts_lazily():
    q = KeyQueue(with_cache_keys=False)
    f = _futures(3)
    q.add("a", "a", None, f[0])
    assert q.contexts is None and q.cache_keys is None
    q.add("b", "b", {"ctx": 1}, f[1])
    q.add("c", "c", None, f[2])
    assert len(q) == 3
    assert q.keys == ["a", "b", "c"] and q.futures == f
    assert q.context_list() == [None, {"ctx": 1}, None]
    assert q.cached_under() is q.keys  # without cache_key_fn a key is its own cache key


def test_Queue_with_cache_keys_slices_and_extends_every_column():
    q = KeyQueue(with_cache_keys=True)
    f = _futures(4)
    for i in range(4):
        q.add({"id": i}, ("id", i), "kc" if i == 2 else None, f[i])
    part = q.slice(1, 3)
    assert part.keys == [{"id": 1}, {"id": 2}]
    assert part.cached_under() == [("id", 1), ("id", 2)]
    assert part.context_list() == [None, "kc"]
    assert part.futures == f[1:3]
    other = KeyQueue(with_cache_keys=True)
    other.add({"id": 9}, ("id", 9), None, Future())
    other.extend(part)
    assert other.cached_under() == [("id", 9), ("id", 1), ("id", 2)]
    assert other.context_list() == [None, None, "kc"]


def test_DispatchSink_joins_slices_in_key_order_whatever_the_completion_order():
    sink = DispatchSink(n_keys=5, n_slices=3)
    sink.report(4, [40], None)
    sink.report(0, [0, 10], None)
    assert not sink.future.done()
    sink.report(2, [20, 30], None)
    assert sink.future.result(timeout=1) == [0, 10, 20, 30, 40]


def test_DispatchSink_first_error_decides_and_later_reports_are_ignored():
    sink = DispatchSink(n_keys=4, n_slices=2)
    sink.report(2, [], ValueError("second slice failed"))
    sink.report(0, [0, 1], None)
    with pytest.raises(ValueError, match="second slice failed"):
        sink.future.result(timeout=1)

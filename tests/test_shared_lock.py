"""A loader's futures share its lock; one detaches when it needs a Condition of its own.

Every ``load()`` used to allocate a lock for its future: one more object for
the cyclic GC per loaded field.  Now the futures of a loader are guarded by the
loader's lock (a batch settles under one acquisition), and a future takes a
lock of its own only when something waits on it through a Condition:
``concurrent.futures.wait``/``as_completed`` (which acquire the
``_condition`` of every future they are given, one after another) and
``result()`` on a future that cannot be driven.  These tests hold that
nothing deadlocks or loses a wake-up around that switch.
"""
from __future__ import annotations

import concurrent.futures as cf
import gc
import os
import subprocess
import sys
import textwrap
import threading
from typing import Any, Callable

import pytest

from dataloader_sync import DataLoader, Future

TIMEOUT = 10.0
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def echo(keys: list[Any]) -> list[Any]:
    return list(keys)


def run_in_thread(fn: Callable[[], Any]) -> Any:
    """Run *fn* on a new thread; its result, or fail if it does not return in time (a deadlock)."""
    out: cf.Future[Any] = cf.Future()

    def body() -> None:
        try:
            out.set_result(fn())
        except BaseException as exc:
            out.set_exception(exc)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    value = out.result(TIMEOUT)
    thread.join(TIMEOUT)
    return value


def test_a_loaders_futures_share_its_lock():
    loader = DataLoader(echo)
    a, b = loader.load(1), loader.load(2)
    many = loader.load_many([3, 4])
    assert a._lock is b._lock is loader._lock
    loader.dispatch()
    assert a.result(TIMEOUT) == 1 and b.result(TIMEOUT) == 2 and many.result(TIMEOUT) == [3, 4]
    assert Future()._lock is not Future()._lock  # any other future has its own


CENSUS = textwrap.dedent("""
    import gc, sys
    from dataloader_sync import DataLoader, Future

    def tracked_per_call(make, n=2000):
        # objects the cyclic GC tracks, per call of make, that stay alive (GC off meanwhile)
        gc.collect()
        gc.disable()
        try:
            before = len(gc.get_objects())
            kept = [make() for _ in range(n)]
            after = len(gc.get_objects())
        finally:
            gc.enable()
        assert len(kept) == n
        return (after - before - 1) / n  # the list itself

    loader = DataLoader(list)
    loader.load(-1)  # the cache and queue exist
    keys = iter(range(10**6))
    per_load = tracked_per_call(lambda: loader.load(next(keys)))
    per_future = tracked_per_call(Future)  # a future with a lock of its own
    print(per_load, per_future)
""")


@pytest.mark.skipif(not gc.is_tracked(threading.Lock()), reason="a lock is a tracked object from CPython 3.10 on")
def test_a_queued_load_allocates_no_lock_for_the_cyclic_gc_to_track():
    # In a fresh interpreter: how many objects an instance keeps depends on the
    # history of its class in the process (CPython's shared instance layouts),
    # which other tests change by setting attributes of their own on futures.
    out = subprocess.run([sys.executable, "-c", CENSUS], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")))
    assert out.returncode == 0, out.stderr
    per_load, per_future = map(float, out.stdout.split())
    # One object fewer than a future with its lock (on 3.10 both also have a __dict__)
    assert per_load < per_future - 1 + 0.1
    loader = DataLoader(echo)
    assert loader.load(5) is loader.load(5)
    loader.dispatch()
    assert loader.load(5).result(TIMEOUT) == 5


def test_a_queued_load_makes_the_same_future_as_loader_future_and_as_Future_init():
    # load() has loader_future's stores inline, and loader_future has Future.__init__'s:
    # each copy sets the same attributes, in the same order (their instances share a layout).
    from dataloader_sync._core._new_futures import LoaderFuture, loader_future

    loader = DataLoader(echo)
    fut = loader.load(1)
    made = loader_future(loader._lock)
    assert type(fut) is type(made) is LoaderFuture and isinstance(fut, Future) and isinstance(fut, cf.Future)
    assert list(vars(fut)) == list(vars(made)) + ["_ticket"]
    assert list(vars(made)) == list(vars(Future())) + ["_shared"]
    assert fut._lock is fut._shared is loader._lock and not fut.done()
    assert repr(fut).startswith("<LoaderFuture at ") and "state=pending" in repr(fut)
    loader.dispatch()
    assert fut.result(TIMEOUT) == 1 and loader.load(1) is fut


def test_wait_on_several_futures_of_one_loader_does_not_take_its_lock_twice():
    loader = DataLoader(echo)
    futures = [loader.load(k) for k in range(5)]
    # Undispatched: wait() dispatches them (sync on demand) after taking every _condition.
    done, not_done = run_in_thread(lambda: cf.wait(futures, timeout=TIMEOUT))
    assert len(done) == 5 and not not_done
    assert [f.result(0) for f in futures] == [0, 1, 2, 3, 4]
    assert all(f._lock is not loader._lock for f in futures)  # each detached
    # the loader (and its lock) is unaffected
    later = loader.load(9)
    loader.dispatch()
    assert later.result(TIMEOUT) == 9 and later._lock is loader._lock


def test_as_completed_on_futures_of_one_loader_dispatched_by_another_thread():
    loader = DataLoader(echo)
    futures = [loader.load(k) for k in range(5)]
    loader_dispatched = threading.Event()
    waiting = threading.Event()

    def consume() -> list[int]:
        seen = []
        # Installed on every future before the dispatch on the other thread.
        it = cf.as_completed(futures, timeout=TIMEOUT)
        waiting.set()
        for fut in it:
            seen.append(fut.result(0))
        return seen

    def dispatch() -> None:
        assert waiting.wait(TIMEOUT)
        loader.dispatch()
        loader_dispatched.set()

    worker = threading.Thread(target=dispatch)
    worker.start()
    try:
        assert sorted(run_in_thread(consume)) == [0, 1, 2, 3, 4]
    finally:
        worker.join(TIMEOUT)
    assert loader_dispatched.is_set()


def test_two_threads_waiting_on_two_loaders_in_either_order_never_deadlock():
    # concurrent.futures.wait acquires the futures' _conditions in id order; on
    # locks shared per loader, two waits over the same two loaders could take
    # them in opposite orders.  Detached futures each have their own.
    for _ in range(100):
        _wait_on_two_loaders_in_either_order()


def _wait_on_two_loaders_in_either_order() -> None:
    first, second = DataLoader(echo), DataLoader(echo)
    pairs = [(first.load(1), second.load(1)), (second.load(2), first.load(2))]
    start = threading.Barrier(3, timeout=TIMEOUT)
    results: list[Any] = []

    def waiter(fs: tuple[Any, Any]) -> None:
        start.wait()
        results.append(cf.wait(fs, timeout=TIMEOUT))

    threads = [threading.Thread(target=waiter, args=(fs,), daemon=True) for fs in pairs]
    for thread in threads:
        thread.start()
    start.wait()
    first.dispatch()
    second.dispatch()
    for thread in threads:
        thread.join(TIMEOUT)
        assert not thread.is_alive(), "deadlocked"
    assert len(results) == 2 and all(len(r.done) == 2 for r in results)


def test_detaching_while_a_batch_settles_loses_no_callback_and_no_wakeup():
    for _ in range(200):
        _detach_while_a_batch_settles()


def _detach_while_a_batch_settles() -> None:
    loader = DataLoader(echo)
    futures = [loader.load(k) for k in range(20)]
    calls: list[int] = []
    calls_lock = threading.Lock()

    def record(f: cf.Future[Any]) -> None:
        with calls_lock:
            calls.append(f.result(0))

    go = threading.Barrier(3, timeout=TIMEOUT)
    waited: cf.Future[Any] = cf.Future()

    def waiter() -> None:
        go.wait()
        waited.set_result(cf.wait(futures, timeout=TIMEOUT))

    def add_callbacks() -> None:
        go.wait()
        for fut in futures:
            fut.add_done_callback(record)

    threads = [threading.Thread(target=waiter, daemon=True), threading.Thread(target=add_callbacks, daemon=True)]
    for thread in threads:
        thread.start()
    go.wait()
    loader.dispatch()
    for thread in threads:
        thread.join(TIMEOUT)
        assert not thread.is_alive()
    done, not_done = waited.result(TIMEOUT)
    assert len(done) == 20 and not not_done
    assert sorted(calls) == list(range(20))  # each callback exactly once


def test_result_on_an_undrivable_loader_future_waits_on_its_own_condition():
    # batch=False with an executor's future: the load is called at once, and
    # its future cannot be driven; result() waits on a Condition of its own.
    release = threading.Event()
    with cf.ThreadPoolExecutor(1) as pool:
        loader = DataLoader(lambda keys: pool.submit(lambda: (release.wait(TIMEOUT), list(keys))[1]),
                            batch=False)
        fut = loader.load(7)
        other = loader.load(8)

        def wait_then_check() -> Any:
            return fut.result(TIMEOUT)

        waiter = cf.ThreadPoolExecutor(1)
        try:
            pending = waiter.submit(wait_then_check)
            release.set()
            assert pending.result(TIMEOUT) == 7
        finally:
            waiter.shutdown(wait=True)
        assert other.result(TIMEOUT) == 8


def test_a_then_future_shares_its_sources_lock_only_when_that_is_a_loaders():
    loader = DataLoader(echo)
    source = loader.load(1)
    plain: Future[int] = Future()
    assert source.then(lambda v: v)._lock is loader._lock
    assert plain.then(lambda v: v)._lock is not plain._lock  # plain's may be held by its Condition


def test_waiting_on_futures_and_their_then_futures_together_never_deadlocks():
    # concurrent.futures.wait acquires the futures' _conditions in id order:
    # each pair comes in either order over the rounds.
    for _ in range(50):
        _wait_on_futures_and_their_chains()


def _wait_on_futures_and_their_chains() -> None:
    loader = DataLoader(echo)
    source = loader.load(1)
    chained = source.then(lambda v: v + 1)
    plain: Future[int] = Future()
    plain_chained = plain.then(lambda v: v * 2)
    waited: cf.Future[Any] = cf.Future()
    thread = threading.Thread(
        target=lambda: waited.set_result(cf.wait([source, chained, plain, plain_chained], timeout=TIMEOUT)),
        daemon=True)
    thread.start()
    plain.set_result(5)
    thread.join(TIMEOUT)
    assert not thread.is_alive(), "deadlocked"
    done, not_done = waited.result(0)  # the wait dispatched the loader itself
    assert len(done) == 4 and not not_done
    assert (source.result(0), chained.result(0), plain_chained.result(0)) == (1, 2, 10)


def test_a_cache_map_may_touch_the_futures_it_holds():
    # A cache_map's methods run under the loader's lock (the documented
    # exception), and the loader's futures share that lock: it is re-entrant,
    # so a map that adds a done-callback to what it stores does not deadlock.
    class Evicting(dict):  # type: ignore[type-arg]
        def __setitem__(self, key: Any, fut: Any) -> None:
            super().__setitem__(key, fut)
            fut.add_done_callback(lambda f: f.exception() is not None and self.pop(key, None))

    def batch(keys: list[Any]) -> list[Any]:
        return [KeyError(k) if k < 0 else k for k in keys]

    def body() -> Any:
        loader = DataLoader(batch, cache_map=Evicting())
        good, bad = loader.load(1), loader.load(-1)
        loader.dispatch()
        return good.result(0), type(bad.exception(0)), loader.load(1) is good, loader.load(-1) is bad

    assert run_in_thread(body) == (1, KeyError, True, False)

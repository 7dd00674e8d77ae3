"""ScheduledDataLoaderRegistry: the ticker report's four tests, java's scenarios, and what java does not cover."""
from __future__ import annotations

import gc
import logging
import threading

import pytest

from dataloader_sync import (
    DISPATCH_ALWAYS,
    DISPATCH_NEVER,
    DataLoader,
    ScheduledDataLoaderRegistry,
    ScheduledExecutor,
    get_default_scheduled_executor,
)

WAIT = 10.0
FAR = 3600.0  # a schedule so long that no tick fires during a test


@pytest.fixture
def executor():
    ex = ScheduledExecutor(name="test-registry")
    yield ex
    ex.shutdown(wait=True, cancel_futures=True)


def settled(fut, timeout=WAIT):
    """The value of *fut* once something else dispatched it: ``result()`` would dispatch its loader itself."""
    done = threading.Event()
    fut.add_done_callback(lambda _: done.set())
    assert done.wait(timeout), "nothing dispatched the load"
    return fut.result(0)


def id_loader(calls=None, **kwargs):
    def batch(keys):
        if calls is not None:
            calls.append(list(keys))
        return list(keys)

    return DataLoader(batch, **kwargs)


def delayed_id_loader(executor, delay):
    """A loader whose batch completes *delay* seconds later, off the calling thread."""
    return DataLoader(lambda keys: executor.schedule(lambda: list(keys), delay))


class CountingPredicate:
    """Says *answer* (or raises), counts calls, and signals once it has been called *signal_at* times."""

    def __init__(self, answer=False, after=None, signal_at=1):
        self.calls = 0
        self.lock = threading.Lock()
        self.answer = answer
        self.after = after  # answer True once calls > after
        self.signal_at = signal_at
        self.reached = threading.Event()

    def __call__(self, name, loader):
        with self.lock:
            self.calls += 1
            calls = self.calls
        if calls >= self.signal_at:
            self.reached.set()
        if self.after is not None:
            return calls > self.after
        return self.answer


# -- the ticker report's four tests ----------------------------------------------------------------


def test_ScheduledDataLoaderRegistry_one_pending_task_after_many_dispatch_all_and_reschedule_now(executor):
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, ticker_mode=True, schedule=FAR)
    for i in range(200):
        registry.register(f"loader-{i}", id_loader())
    for _ in range(50):
        registry.dispatch_all()
    assert executor.pending_count == 1
    for _ in range(50):
        registry.reschedule_now()
    assert executor.pending_count == 1
    assert executor.task_count == 1
    registry.close()
    assert executor.pending_count == 0


def test_ScheduledDataLoaderRegistry_load_after_dispatch_all_completes_on_the_next_tick(executor):
    threads = []
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, ticker_mode=True, schedule=0.01)
    registry.register("a", DataLoader(lambda keys: threads.append(threading.current_thread().name) or keys))
    registry.dispatch_all()  # nothing queued yet: this only starts the ticker
    assert threads == []
    fut = registry["a"].load("late")
    assert settled(fut) == "late"
    assert threads == ["test-registry-worker_0"] or (
        len(threads) == 1 and threads[0].startswith("test-registry-worker")
    )  # dispatched by a tick on the executor, not by this thread
    registry.close()


def test_ScheduledDataLoaderRegistry_ticker_survives_a_predicate_that_raises(executor, caplog):
    raised = threading.Event()

    def flaky(name, loader):
        if not raised.is_set():
            raised.set()
            raise RuntimeError("predicate failed")
        return True

    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, ticker_mode=True, schedule=0.005,
                                           dispatch_predicate=flaky)
    registry.register("a", id_loader())
    queued = registry["a"].load("k")  # a tick asks the predicate only of loaders with queued keys
    with caplog.at_level(logging.ERROR, logger="dataloader_sync"):
        registry.reschedule_now()
        assert raised.wait(WAIT)
        assert settled(queued) == "k"  # the next tick asked again
    assert any("predicate failed" in (r.exc_text or "") or "raised" in r.getMessage() for r in caplog.records)
    registry.close()


def test_ScheduledDataLoaderRegistry_ticker_survives_a_batch_function_that_raises(executor):
    failures = []

    def batch(keys):
        if not failures:
            failures.append(keys)
            raise ValueError("batch failed")
        return keys

    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, ticker_mode=True, schedule=0.005)
    registry.register("a", DataLoader(batch))
    first = registry["a"].load(1)
    registry.dispatch_all()
    with pytest.raises(ValueError, match="batch failed"):
        first.result(timeout=WAIT)
    assert settled(registry["a"].load(2)) == 2  # the next tick still came
    registry.close()


def test_ScheduledDataLoaderRegistry_close_stops_the_ticker_but_dispatch_all_still_dispatches(executor):
    calls = []
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, ticker_mode=True, schedule=0.005)
    registry.register("a", id_loader(calls))
    registry.dispatch_all()
    assert settled(registry["a"].load("ticked")) == "ticked"
    registry.close()
    assert registry.closed
    assert executor.pending_count == 0  # the pending tick was cancelled at once
    tasks = executor.task_count
    fut = registry["a"].load("after close")
    registry.reschedule_now()
    assert executor.pending_count == 0 and executor.task_count == tasks  # nothing can tick any more
    assert not fut.done()
    registry.dispatch_all()  # an explicit dispatch still dispatches ...
    assert fut.result(timeout=WAIT) == "after close"
    assert executor.pending_count == 0 and executor.task_count == tasks  # ... and schedules nothing
    registry.close()  # idempotent


# -- java-dataloader's ScheduledDataLoaderRegistryTest ------------------------------------------------


def test_ScheduledDataLoaderRegistry_basic_setup_works_like_a_normal_registry(executor):
    a_calls, b_calls = [], []
    a, b = id_loader(a_calls), id_loader(b_calls)
    a.load("AK1"), a.load("AK2"), b.load("BK1"), b.load("BK2")
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, schedule=0.1)
    registry.register("a", a).register("b", b)
    assert registry.schedule == 0.1
    assert registry.dispatch_all_with_count() == 4
    assert a_calls == [["AK1", "AK2"]] and b_calls == [["BK1", "BK2"]]


def test_ScheduledDataLoaderRegistry_predicate_always_false(executor):
    calls = []
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, schedule=0.01,
                                           dispatch_predicate=DISPATCH_NEVER)
    loader = id_loader(calls)
    loader.load("K1"), loader.load("K2")
    registry.register("a", loader)
    assert registry.dispatch_all_with_count() == 0
    assert registry.dispatch_all_with_count() == 0
    assert calls == []
    assert executor.pending_count == 1  # one recheck for the loader, however often called
    registry.close()


def test_ScheduledDataLoaderRegistry_predicate_that_eventually_returns_true(executor):
    predicate = CountingPredicate(after=5)
    loader = id_loader()
    p1, p2 = loader.load("K1"), loader.load("K2")
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, schedule=0.005,
                                           dispatch_predicate=predicate)
    registry.register("a", loader)
    assert registry.dispatch_all_with_count() == 0
    assert not p1.done() and not p2.done()
    assert settled(p1) == "K1" and settled(p2) == "K2"  # a recheck dispatched
    assert predicate.calls >= 6
    registry.close()


def test_ScheduledDataLoaderRegistry_dispatch_all_immediately_ignores_predicates(executor):
    calls = []
    loader = id_loader(calls)
    loader.load("K1"), loader.load("K2")
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, dispatch_predicate=DISPATCH_NEVER)
    registry.register("a", loader)
    assert registry.dispatch_all_with_count_immediately() == 2
    loader.load("K3")
    registry.dispatch_all_immediately()
    assert calls == [["K1", "K2"], ["K3"]]
    assert executor.pending_count == 0


def test_ScheduledDataLoaderRegistry_reschedule_now_starts_checking_without_a_dispatch(executor):
    predicate = CountingPredicate(after=5)
    calls = []
    loader = id_loader(calls)
    fut = loader.load("K1")
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, schedule=0.005,
                                           dispatch_predicate=predicate)
    registry.register("a", loader)
    registry.reschedule_now()
    assert calls == []
    assert settled(fut) == "K1"
    assert calls == [["K1"]]
    registry.close()


def test_ScheduledDataLoaderRegistry_takes_out_the_schedule_once_it_dispatches(executor):
    predicate = CountingPredicate(after=3)
    calls = []
    loader = id_loader(calls)
    first = loader.load("K1")
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, schedule=0.005,
                                           dispatch_predicate=predicate)
    registry.register("a", loader)
    registry.dispatch_all()
    assert settled(first) == "K1"
    assert executor.pending_count == 0  # dispatched: no more rechecks
    loader.load("K2")
    assert executor.pending_count == 0  # nobody called dispatch_all: nothing scheduled
    assert calls == [["K1"]]


def test_ScheduledDataLoaderRegistry_close_is_a_one_way_door(executor):
    predicate = CountingPredicate(answer=False, signal_at=3)
    loader = id_loader()
    loader.load("K1")
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, schedule=0.002,
                                           dispatch_predicate=predicate)
    registry.register("a", loader)
    registry.reschedule_now()
    assert predicate.reached.wait(WAIT)  # rechecks are running
    registry.close()
    assert executor.pending_count == 0
    count_then = predicate.calls
    registry.reschedule_now()
    registry.reschedule_now()
    assert executor.pending_count == 0
    registry.dispatch_all()  # an explicit dispatch re-enters the predicate once ...
    assert predicate.calls in (count_then + 1, count_then + 2)  # (+1 if a check was mid-run at close)
    assert executor.pending_count == 0  # ... and schedules nothing


def test_ScheduledDataLoaderRegistry_can_tick_after_first_dispatch_for_chain_data_loaders(executor):
    a = delayed_id_loader(executor, 0.02)
    b = delayed_id_loader(executor, 0.04)
    chained = a.load("AK1").then(b.load)
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, schedule=0.005, ticker_mode=True)
    registry.register("a", a).register("b", b)
    assert registry.ticker_mode
    assert registry.dispatch_all_with_count() == 1
    assert settled(chained) == "AK1"  # the ticker dispatched b
    registry.close()


def test_ScheduledDataLoaderRegistry_chain_data_loaders_will_hang_if_not_in_ticker_mode(executor):
    a = delayed_id_loader(executor, 0.02)
    b = delayed_id_loader(executor, 0.04)
    first = a.load("AK1")
    chained = first.then(b.load)
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, schedule=0.005, ticker_mode=False)
    registry.register("a", a).register("b", b)
    assert not registry.ticker_mode
    assert registry.dispatch_all_with_count() == 1
    assert first.result(timeout=WAIT) == "AK1"
    # The chained load is queued on b, but nothing will ever dispatch it:
    # no recheck is pending (the predicate passed) and there is no ticker.
    assert b.dispatch_depth == 1
    assert executor.pending_count == 0
    assert not chained.done()
    registry.dispatch_all()  # an explicit dispatch rescues it (so would blocking on it: result() dispatches b)
    assert settled(chained) == "AK1"
    registry.close()


def test_ScheduledDataLoaderRegistry_never_shuts_down_its_executor(executor):
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, ticker_mode=True, schedule=FAR)
    registry.dispatch_all()
    registry.close()
    assert executor.schedule(lambda: "alive", 0).result(timeout=WAIT) == "alive"
    default = ScheduledDataLoaderRegistry()
    assert default.scheduled_executor is get_default_scheduled_executor()
    default.close()
    assert get_default_scheduled_executor().submit(lambda: "alive").result(timeout=WAIT) == "alive"


# -- ScheduledDataLoaderRegistryPredicateTest --------------------------------------------------------


def test_ScheduledDataLoaderRegistry_per_loader_predicate_is_final(executor):
    a_calls, b_calls = [], []
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, schedule=FAR,
                                           dispatch_predicate=DISPATCH_NEVER)
    registry.register("a", id_loader(a_calls), DISPATCH_ALWAYS)
    registry.register("b", id_loader(b_calls))
    registry["a"].load("A")
    registry["b"].load("B")
    assert registry.dispatch_all_with_count() == 1
    assert a_calls == [["A"]] and b_calls == []
    registry.close()


def test_ScheduledDataLoaderRegistry_per_loader_predicate_can_refuse_what_the_registry_allows(executor):
    calls = []
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, schedule=FAR,
                                           dispatch_predicate=DISPATCH_ALWAYS)
    registry.register("a", id_loader(calls), lambda name, loader: loader.dispatch_depth > 1)
    registry["a"].load(1)
    assert registry.dispatch_all_with_count() == 0
    registry["a"].load(2)
    assert registry.dispatch_all_with_count() == 2
    assert calls == [[1, 2]]
    registry.close()


def test_ScheduledDataLoaderRegistry_raising_predicate_counts_as_not_now_for_that_loader_only(executor, caplog):
    def boom(name, loader):
        raise RuntimeError("bad predicate")

    calls = []
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, schedule=FAR)
    registry.register("bad", id_loader(), boom).register("good", id_loader(calls))
    registry["bad"].load(1)
    registry["good"].load(2)
    with caplog.at_level(logging.ERROR, logger="dataloader_sync"):
        assert registry.dispatch_all_with_count() == 1
    assert calls == [[2]]
    assert any(r.exc_info and "bad predicate" in str(r.exc_info[1]) for r in caplog.records)
    assert executor.pending_count == 1  # a recheck for "bad" only
    registry.close()


# -- what java does not cover -----------------------------------------------------------------------


def test_ScheduledDataLoaderRegistry_non_ticker_pending_is_bounded_per_loader(executor):
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, schedule=FAR,
                                           dispatch_predicate=DISPATCH_NEVER)
    for i in range(20):
        registry.register(f"loader-{i}", id_loader())
    for _ in range(50):
        registry.dispatch_all()
        registry.reschedule_now()
    assert executor.pending_count == 20
    registry.close()
    assert executor.pending_count == 0


def test_ScheduledDataLoaderRegistry_fifty_registries_ten_calls_at_most_fifty_pending(executor):
    registries = []
    for _ in range(50):
        registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, ticker_mode=True, schedule=FAR)
        for i in range(20):
            registry.register(f"loader-{i}", id_loader())
        registries.append(registry)
    for _ in range(10):
        for registry in registries:
            registry.dispatch_all()
    assert executor.pending_count == 50
    for registry in registries:
        registry.close()
    assert executor.pending_count == 0


def test_ScheduledDataLoaderRegistry_a_hundred_registries_create_no_thread():
    get_default_scheduled_executor().submit(lambda: None).result(timeout=WAIT)  # warm the shared pool
    before = {t.ident for t in threading.enumerate()}
    registries = [ScheduledDataLoaderRegistry(ticker_mode=True, schedule=0.005) for _ in range(100)]
    for registry in registries:
        registry.register("a", id_loader())
        registry.dispatch_all()
    futures = [r["a"].load("k") for r in registries]
    assert [f.result(timeout=WAIT) for f in futures] == ["k"] * 100
    new = [t for t in threading.enumerate() if t.ident not in before]
    assert all(t.name.startswith("dataloader-sync-default") for t in new)
    # Bounded by the shared pool (which may grow past tasks stuck for 0.1 s on a busy machine), a timer
    # and a monitor: not one thread per registry.
    pool = get_default_scheduled_executor().statistics().pool
    assert pool is not None
    default_threads = [t for t in threading.enumerate() if t.name.startswith("dataloader-sync-default")]
    assert len(default_threads) <= pool.max_threads + 2
    for registry in registries:
        registry.close()


def test_ScheduledDataLoaderRegistry_dropped_without_close_stops_ticking(executor):
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, ticker_mode=True, schedule=FAR)
    registry.register("a", id_loader())
    registry.dispatch_all()
    assert executor.pending_count == 1
    del registry
    gc.collect()
    assert executor.pending_count == 0  # the tick held only a weak reference; a finalizer cancelled it


def test_ScheduledDataLoaderRegistry_dropped_with_a_tick_due_does_nothing(executor):
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, ticker_mode=True, schedule=0.001)
    registry.register("a", id_loader())
    registry.dispatch_all()
    del registry
    gc.collect()
    executor.schedule(lambda: None, 0.01).result(timeout=WAIT)
    assert executor.pending_count == 0


def test_ScheduledDataLoaderRegistry_unregister_cancels_its_recheck(executor):
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, schedule=FAR,
                                           dispatch_predicate=DISPATCH_NEVER)
    registry.register("a", id_loader()).register("b", id_loader())
    registry["a"].load(1)
    registry["b"].load(2)  # only loaders with queued keys are asked (and rechecked)
    registry.dispatch_all()
    assert executor.pending_count == 2
    registry.unregister("a")
    assert executor.pending_count == 1
    assert "a" not in registry and "b" in registry
    registry.close()


def test_ScheduledDataLoaderRegistry_context_manager_closes(executor):
    with ScheduledDataLoaderRegistry(scheduled_executor=executor, ticker_mode=True, schedule=FAR) as registry:
        registry.dispatch_all()
        assert executor.pending_count == 1
    assert registry.closed and executor.pending_count == 0
    assert "CLOSED" in repr(registry)


@pytest.mark.parametrize(
    "kwargs, exc, message",
    [
        ({"schedule": 0}, ValueError, "schedule must be > 0"),
        ({"schedule": -1}, ValueError, "schedule must be > 0"),
        ({"schedule": float("nan")}, ValueError, "schedule must be finite"),
        ({"schedule": "10ms"}, TypeError, "schedule must be a number"),
        ({"dispatch_predicate": 3}, TypeError, "dispatch_predicate must be callable"),
        ({"scheduled_executor": object()}, TypeError, "scheduled_executor must be"),
    ],
)
def test_ScheduledDataLoaderRegistry_bad_arguments(kwargs, exc, message):
    with pytest.raises(exc, match=message):
        ScheduledDataLoaderRegistry(**kwargs)


def test_ScheduledDataLoaderRegistry_register_refuses_a_bad_predicate(executor):
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor)
    with pytest.raises(TypeError, match="predicate must be callable"):
        registry.register("a", id_loader(), predicate="yes")
    assert "a" not in registry


@pytest.mark.slow
def test_ScheduledDataLoaderRegistry_concurrent_dispatch_all_keeps_one_tick(executor):
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, ticker_mode=True, schedule=FAR)
    for i in range(50):
        registry.register(f"loader-{i}", id_loader())
    barrier = threading.Barrier(8)

    def hammer():
        barrier.wait(WAIT)
        for _ in range(200):
            registry.dispatch_all()
            registry.reschedule_now()

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT * 3)
    assert executor.pending_count == 1
    assert executor.task_count == 1
    registry.close()


# -- work proportional to work -------------------------------------------------------------------


def test_ScheduledDataLoaderRegistry_asks_predicates_only_of_loaders_with_queued_keys(executor):
    predicate = CountingPredicate(answer=False)
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, schedule=FAR, ticker_mode=True,
                                           dispatch_predicate=predicate)
    for i in range(200):
        registry.register(f"l{i}", id_loader())
    registry.dispatch_all()
    assert predicate.calls == 0  # 200 idle loaders: nobody asked
    fut = registry["l7"].load("k")
    registry.dispatch_all()
    assert predicate.calls == 1
    registry._tick()  # refused: still queued, so the next tick asks again
    assert predicate.calls == 2 and not fut.done()
    predicate.answer = True
    registry._tick()
    assert predicate.calls == 3 and fut.result(timeout=WAIT) == "k"
    registry._tick()
    assert predicate.calls == 3
    registry.close()


def test_ScheduledDataLoaderRegistry_dispatch_all_immediately_dispatches_a_loader_a_predicate_refused(executor):
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, schedule=FAR,
                                           dispatch_predicate=DISPATCH_NEVER)
    registry.register("a", id_loader())
    fut = registry["a"].load(1)
    assert registry.dispatch_all_with_count() == 0
    assert registry.dispatch_depth == 1
    assert registry.dispatch_all_with_count_immediately() == 1
    assert fut.result(timeout=WAIT) == 1
    registry.close()


def test_ScheduledDataLoaderRegistry_a_blocking_wait_dispatches_its_own_loader_whatever_the_predicate(executor):
    calls = []
    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, ticker_mode=True, schedule=FAR,
                                           dispatch_predicate=DISPATCH_NEVER)
    registry.register("a", id_loader(calls)).register("b", id_loader())
    registry.dispatch_all()  # starts the ticker; the predicate never passes
    other = registry["b"].load("other")
    assert registry["a"].load("mine").result(timeout=WAIT) == "mine"
    assert calls == [["mine"]]
    assert not other.done() and registry["b"].dispatch_depth == 1  # other loaders are left to the registry
    assert executor.pending_count == 1  # the ticker goes on as scheduled
    registry.close()


def test_ScheduledDataLoaderRegistry_tick_leaves_a_loader_to_a_scope_that_dispatches_itself(executor):
    from dataloader_sync._core._dispatch_scope import using_scope

    class Execution:
        """A dispatch scope at work on a level (as DataLoaderExecutionContext's)."""

        dispatches_itself = True

        def loader_queued(self, loader):
            pass

    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, schedule=FAR, ticker_mode=True)
    registry.register("mine", id_loader()).register("other", id_loader())
    scope = Execution()
    with using_scope(scope):
        mine = registry["mine"].load(1)
    other = registry["other"].load(2)  # queued outside any scope
    registry._tick()
    assert other.result(timeout=WAIT) == 2 and not mine.done()  # left to the execution
    scope.dispatches_itself = False  # the execution waits (or ended): the tick takes over
    registry._tick()
    assert mine.result(timeout=WAIT) == 1
    with using_scope(Execution()):
        again = registry["mine"].load(3)
    assert registry.dispatch_all_with_count() == 1 and again.result(timeout=WAIT) == 3  # explicit: never left
    registry.close()


def test_ScheduledDataLoaderRegistry_ticker_sleeps_while_every_queued_key_is_an_executions(executor):
    from dataloader_sync._core._dispatch_scope import using_scope

    class Execution:
        dispatches_itself = True

        def loader_queued(self, loader):
            pass

    def fire():  # what the timer does when the pending tick is due
        registry._pending.tick.cancel()
        registry._tick()

    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, schedule=FAR, ticker_mode=True)
    registry.register("mine", id_loader()).register("other", id_loader())
    registry.dispatch_all()
    assert executor.pending_count == 1  # ticking
    fire()
    assert executor.pending_count == 1  # an idle registry keeps ticking
    scope = Execution()
    with using_scope(scope):
        mine = registry["mine"].load(1)
    fire()
    assert executor.pending_count == 0 and not mine.done()  # asleep: the execution dispatches it
    with using_scope(scope):
        registry["mine"].load(2)
    assert executor.pending_count == 0  # a load in the execution leaves it asleep
    other = registry["other"].load(3)  # outside any execution: wakes it
    assert executor.pending_count == 1
    fire()
    assert other.result(timeout=WAIT) == 3 and not mine.done()
    assert executor.pending_count == 1  # it dispatched: it re-armed
    fire()
    assert executor.pending_count == 0  # only the execution's keys are left: asleep again
    scope.dispatches_itself = False  # the execution ended ...
    registry._wake()  # ... and woke the ticker (DataLoaderExecutionContext does both)
    fire()
    assert mine.result(timeout=WAIT) == 1
    registry.close()
    assert executor.pending_count == 0


def test_ScheduledDataLoaderRegistry_a_load_that_cannot_wake_the_ticker_still_loads(caplog):
    from dataloader_sync._core._dispatch_scope import using_scope

    class Execution:
        dispatches_itself = True

        def loader_queued(self, loader):
            pass

    own = ScheduledExecutor(name="test-shut-down")
    registry = ScheduledDataLoaderRegistry(scheduled_executor=own, schedule=FAR, ticker_mode=True)
    registry.register("mine", id_loader()).register("other", id_loader()).register("third", id_loader())
    registry.dispatch_all()
    with using_scope(Execution()):
        registry["mine"].load(1)
    registry._pending.tick.cancel()
    registry._tick()  # asleep: "mine" is the execution's
    own.shutdown(wait=True)
    with caplog.at_level(logging.ERROR, logger="dataloader_sync"):
        first = registry["other"].load(2)  # the wake fails: logged, not raised
        registry["third"].load(3)  # fails again: not logged again
    assert [r.getMessage() for r in caplog.records].count(
        f"{registry!r}: could not re-arm its tick (logged once per registry)") == 1
    assert registry.dispatch_all_with_count_immediately() == 3 and first.result(timeout=WAIT) == 2
    registry.close()


def test_ScheduledDataLoaderRegistry_loader_for_loaders_are_dispatched_by_the_ticker(executor):
    threads = []

    def load(keys, suffix):
        threads.append(threading.current_thread().name)
        return [f"{k}{suffix}" for k in keys]

    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, ticker_mode=True, schedule=0.01)
    registry.dispatch_all()  # starts the ticker
    fut = registry.loader_for(load, "!").load("late")
    assert settled(fut) == "late!"
    assert len(threads) == 1 and threads[0].startswith("test-registry-worker")
    registry.close()


def test_ScheduledDataLoaderRegistry_loader_for_loaders_follow_the_registry_predicate(executor):
    calls = []

    def load(keys, n):
        calls.append(list(keys))
        return keys

    registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, schedule=FAR,
                                           dispatch_predicate=DISPATCH_NEVER)
    fut = registry.loader_for(load, 1).load("k")
    assert registry.dispatch_all_with_count() == 0
    assert calls == [] and not fut.done()
    assert registry.dispatch_all_with_count_immediately() == 1
    assert fut.result(0) == "k" and calls == [["k"]]
    registry.close()

"""DataLoaderInstrumentation, ChainedInstrumentation, registry instrumentation, and the
contextvars context batch functions run in."""
from __future__ import annotations

import concurrent.futures as cf
import contextvars
import logging
import threading
from typing import Any, Optional

import pytest
from conftest import FakeClock

from dataloader_sync import (
    MISSING,
    BatchLoaderEnvironment,
    BatchLoadError,
    ChainedInstrumentation,
    DataLoader,
    DataLoaderInstrumentation,
    DataLoaderRegistry,
    DispatchResult,
    Future,
    ScheduledDataLoaderRegistry,
    ScheduledExecutor,
    ValueCache,
)

REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("REQUEST_ID", default="none")


class Told:
    """An instrumentation context that records what it is told."""

    def __init__(self, log: list[Any], tag: str) -> None:
        self.log = log
        self.tag = tag

    def on_completed(self, result: Any, error: Optional[BaseException]) -> None:
        self.log.append((self.tag, result, error))


class Recording(DataLoaderInstrumentation):
    """Records every hook call; its contexts record on_completed."""

    def __init__(self, name: str = "rec") -> None:
        self.name = name
        self.log: list[Any] = []
        self.lock = threading.Lock()

    def begin_dispatch(self, loader):
        with self.lock:
            self.log.append((f"{self.name}.begin_dispatch", loader))
        return Told(self.log, f"{self.name}.dispatch_completed")

    def begin_batch(self, loader, keys, environment):
        with self.lock:
            self.log.append((f"{self.name}.begin_batch", list(keys), environment))
        return Told(self.log, f"{self.name}.batch_completed")

    def events(self) -> list[str]:
        return [entry[0] for entry in self.log]

    def completions(self, tag: str) -> list[tuple[Any, Any]]:
        return [(entry[1], entry[2]) for entry in self.log if entry[0] == tag]


def echo(keys):
    return list(keys)


# -- the base class and its hooks ------------------------------------------------------------------
def test_DataLoaderInstrumentation_hooks_return_None_by_default():
    base = DataLoaderInstrumentation()
    loader = DataLoader(echo, instrumentation=base)
    assert base.begin_dispatch(loader) is None
    assert base.begin_batch(loader, [1], None) is None
    future = loader.load(1)
    loader.dispatch()
    assert future.result(timeout=5) == 1


def test_DataLoader_instrumentation_is_told_of_a_dispatch_once_with_its_DispatchResult():
    rec = Recording()
    loader = DataLoader(echo, instrumentation=rec)
    loader.load(1)
    loader.load(2)
    result = loader.dispatch_with_counts()
    assert rec.events() == ["rec.begin_dispatch", "rec.begin_batch", "rec.batch_completed", "rec.dispatch_completed"]
    [(told, error)] = rec.completions("rec.dispatch_completed")
    assert told is result and isinstance(told, DispatchResult) and told.keys_count == 2 and error is None


@pytest.mark.parametrize("how", ["dispatch", "dispatch_count", "dispatch_with_counts", "dispatch_and_join"])
def test_DataLoader_instrumentation_begin_dispatch_for_every_way_to_dispatch(how):
    rec = Recording()
    loader = DataLoader(echo, instrumentation=rec)
    loader.load("a")
    getattr(loader, how)()
    [(told, error)] = rec.completions("rec.dispatch_completed")
    assert error is None and told.keys_count == 1


def test_DataLoader_instrumentation_is_told_of_an_empty_dispatch_too_as_java_dataloader():
    rec = Recording()
    loader = DataLoader(echo, instrumentation=rec)
    assert loader.dispatch_count() == 0
    assert rec.events() == ["rec.begin_dispatch", "rec.dispatch_completed"]
    [(told, _)] = rec.completions("rec.dispatch_completed")
    assert told.keys_count == 0 and told.future.result(timeout=5) == []


def test_DataLoader_instrumentation_begin_batch_gets_the_loader_the_keys_and_no_environment():
    rec = Recording()
    loader = DataLoader(echo, instrumentation=rec, name="users")
    loader.load_many([3, 1, 2])
    loader.dispatch()
    [_, (event, keys, env), _, _] = rec.log
    assert event == "rec.begin_batch" and keys == [3, 1, 2] and env is None
    assert rec.log[0][1] is loader


def test_DataLoader_instrumentation_begin_batch_gets_the_batch_environment_with_pass_env():
    seen = []

    def batch(keys, env):
        seen.append(env)
        return list(keys)

    rec = Recording()
    loader = DataLoader(batch, pass_env=True, context="ctx", instrumentation=rec)
    loader.load(1, key_context="k1")
    loader.dispatch()
    env = rec.log[1][2]
    assert isinstance(env, BatchLoaderEnvironment) and env is seen[0]
    assert env.context == "ctx" and env.key_contexts == {1: "k1"}


def test_DataLoader_instrumentation_one_begin_batch_per_max_batch_size_slice():
    rec = Recording()
    loader = DataLoader(echo, instrumentation=rec, max_batch_size=2)
    loader.load_many(range(5))
    loader.dispatch()
    batches = [entry[1] for entry in rec.log if entry[0] == "rec.begin_batch"]
    assert batches == [[0, 1], [2, 3], [4]]
    assert [r for r, _ in rec.completions("rec.batch_completed")] == [[0, 1], [2, 3], [4]]


def test_DataLoader_instrumentation_batch_is_told_before_the_futures_complete():
    futures: list[Future] = []
    done_when_told: list[bool] = []

    class Probe(DataLoaderInstrumentation):
        def begin_batch(self, loader, keys, environment):
            class Ctx:
                def on_completed(self, result, error):
                    done_when_told.append(any(f.done() for f in futures))
            return Ctx()

    loader = DataLoader(echo, instrumentation=Probe())
    futures.extend([loader.load(1), loader.load(2)])
    loader.dispatch()
    assert done_when_told == [False]
    assert [f.result(timeout=5) for f in futures] == [1, 2]


def test_DataLoader_instrumentation_per_key_errors_are_values_not_a_batch_error():
    boom = ValueError("no 2")
    rec = Recording()
    loader = DataLoader(lambda keys: [boom if k == 2 else k for k in keys], instrumentation=rec)
    loader.load_many([1, 2], return_exceptions=True)
    loader.dispatch()
    assert rec.completions("rec.batch_completed") == [([1, boom], None)]


def test_DataLoader_instrumentation_a_batch_future_is_told_when_it_completes():
    pending: Future = Future()
    rec = Recording()
    loader = DataLoader(lambda keys: pending, instrumentation=rec)
    value = loader.load("k")
    loader.dispatch()
    assert rec.completions("rec.batch_completed") == []
    assert rec.events()[-1] == "rec.dispatch_completed"  # the dispatch call has returned
    pending.set_result(["v"])
    assert rec.completions("rec.batch_completed") == [(["v"], None)]
    assert value.result(timeout=5) == "v"


def _raises(keys):
    raise RuntimeError("db down")


def _failed_future(keys):
    f: Future = Future()
    f.set_exception(RuntimeError("db down"))
    return f


def _cancelled_future(keys):
    f: Future = Future()
    f.cancel()
    return f


@pytest.mark.parametrize("batch, error_type", [
    (_raises, RuntimeError),
    (_failed_future, RuntimeError),
    (_cancelled_future, cf.CancelledError),
    (lambda keys: [1, 2, 3], BatchLoadError),  # the wrong number of values
    (lambda keys: 42, BatchLoadError),  # not a sequence
])
def test_DataLoader_instrumentation_a_failed_batch_is_told_its_error_once(batch, error_type):
    rec = Recording()
    loader = DataLoader(batch, instrumentation=rec)
    future = loader.load("k")
    loader.dispatch()
    [(result, error)] = rec.completions("rec.batch_completed")
    assert result is None and isinstance(error, error_type)
    assert future.exception(timeout=5) is error


def test_DataLoader_instrumentation_batch_on_an_executor_is_told_when_it_completes():
    release = threading.Event()
    rec = Recording()

    def batch(keys):
        assert release.wait(timeout=10)
        return [k * 2 for k in keys]

    with cf.ThreadPoolExecutor(max_workers=1) as pool:
        loader = DataLoader(batch, executor=pool, instrumentation=rec)
        future = loader.load(21)
        loader.dispatch()
        assert rec.completions("rec.batch_completed") == []
        release.set()
        assert future.result(timeout=10) == 42
    assert rec.completions("rec.batch_completed") == [([42], None)]


def test_DataLoader_instrumentation_a_BaseException_from_the_batch_is_told_to_both_and_propagates():
    class Stop(BaseException):
        pass

    def batch(keys):
        raise Stop()

    rec = Recording()
    loader = DataLoader(batch, instrumentation=rec)
    future = loader.load(1)
    with pytest.raises(Stop):
        loader.dispatch()
    [(_, batch_error)] = rec.completions("rec.batch_completed")
    [(_, dispatch_error)] = rec.completions("rec.dispatch_completed")
    assert isinstance(batch_error, Stop) and dispatch_error is batch_error
    assert isinstance(future.exception(timeout=5), Stop)


def test_DataLoader_instrumentation_without_batching_is_told_of_each_batch_call():
    rec = Recording()
    loader = DataLoader(echo, batch=False, instrumentation=rec)
    assert loader.load(1).result(timeout=5) == 1
    assert loader.load(2).result(timeout=5) == 2
    assert rec.events() == ["rec.begin_batch", "rec.batch_completed"] * 2


class DictValueCache(ValueCache):
    def __init__(self, values):
        self.values = dict(values)

    def get_values(self, keys):
        return [self.values.get(k, MISSING) for k in keys]

    def set_values(self, keys, values):
        self.values.update(zip(keys, values))

    def delete(self, key):
        self.values.pop(key, None)

    def clear(self):
        self.values.clear()


def test_DataLoader_instrumentation_begin_batch_sees_only_the_value_cache_misses():
    rec = Recording()
    shared = DictValueCache({1: "one"})
    loader = DataLoader(echo, value_cache=shared, instrumentation=rec)
    values = loader.load_many([1, 2, 3])
    loader.dispatch()
    assert values.result(timeout=5) == ["one", 2, 3]
    assert [e[1] for e in rec.log if e[0] == "rec.begin_batch"] == [[2, 3]]
    rec.log.clear()
    next_request = DataLoader(echo, value_cache=shared, instrumentation=rec)
    hit = next_request.load(2)  # in the shared cache now: no batch call
    next_request.dispatch()
    assert hit.result(timeout=5) == 2
    assert rec.events() == ["rec.begin_dispatch", "rec.dispatch_completed"]


class Lookups(DataLoaderInstrumentation):
    """Records value-cache lookups (and the batch calls, to see the order)."""

    def __init__(self, raising: bool = False) -> None:
        self.log: list[Any] = []
        self.raising = raising

    def begin_batch(self, loader, keys, environment):
        self.log.append(("batch", list(keys)))
        return None

    def value_cache_lookup(self, loader, hits, misses):
        self.log.append(("lookup", loader.name, hits, misses))
        if self.raising:
            raise RuntimeError("broken value_cache_lookup")


def test_DataLoader_instrumentation_is_told_of_each_value_cache_lookup_before_the_batch():
    rec = Lookups()
    shared = DictValueCache({1: "one"})
    loader = DataLoader(echo, name="users", value_cache=shared, instrumentation=rec)
    values = loader.load_many([1, 2, 3])
    loader.dispatch()
    assert values.result(timeout=5) == ["one", 2, 3]
    all_hits = DataLoader(echo, name="users", value_cache=shared, instrumentation=rec)
    hit = all_hits.load(2)
    all_hits.dispatch()
    assert hit.result(timeout=5) == 2
    assert rec.log == [("lookup", "users", 1, 2), ("batch", [2, 3]), ("lookup", "users", 1, 0)]
    plain = DataLoader(echo, instrumentation=rec)  # no value cache: no lookup
    plain.load(1)
    plain.dispatch()
    assert rec.log[-1] == ("batch", [1])


def test_ChainedInstrumentation_tells_each_of_a_value_cache_lookup_and_survives_a_raising_one(caplog):
    broken, rec = Lookups(raising=True), Lookups()
    loader = DataLoader(echo, name="users", value_cache=DictValueCache({}),
                        instrumentation=ChainedInstrumentation([broken, rec]))
    with caplog.at_level(logging.ERROR, logger="dataloader_sync"):
        values = loader.load_many([1, 2])
        loader.dispatch()
        assert values.result(timeout=5) == [1, 2]
    assert broken.log[0] == rec.log[0] == ("lookup", "users", 0, 2)
    assert rec.log[1] == ("batch", [1, 2])
    assert ["value_cache_lookup" in r.getMessage() for r in caplog.records] == [True]
    assert loader.statistics().load_error_count == 0


def test_DataLoader_instrumentation_without_a_value_cache_lookup_hook_is_not_told():
    class Old:  # duck typed, written before the hook existed
        def __init__(self) -> None:
            self.batches: list[Any] = []

        def begin_dispatch(self, loader):
            return None

        def begin_batch(self, loader, keys, environment):
            self.batches.append(list(keys))
            return None

    old = Old()
    loader = DataLoader(echo, value_cache=DictValueCache({1: "one"}), instrumentation=old)
    values = loader.load_many([1, 2])
    loader.dispatch()
    assert values.result(timeout=5) == ["one", 2]
    assert old.batches == [[2]]


# -- an instrumentation that raises -------------------------------------------------------------------
class Raising(DataLoaderInstrumentation):
    def __init__(self, where: str) -> None:
        self.where = where

    def begin_dispatch(self, loader):
        if self.where == "begin_dispatch":
            raise RuntimeError("broken begin_dispatch")
        return self._ctx("dispatch")

    def begin_batch(self, loader, keys, environment):
        if self.where == "begin_batch":
            raise RuntimeError("broken begin_batch")
        return self._ctx("batch")

    def _ctx(self, what):
        where = self.where

        class Ctx:
            def on_completed(self, result, error):
                if where == f"{what}_completed":
                    raise RuntimeError(f"broken {what} on_completed")
        return Ctx()


@pytest.mark.parametrize("where", ["begin_dispatch", "begin_batch", "dispatch_completed", "batch_completed"])
def test_DataLoader_instrumentation_that_raises_is_logged_and_never_fails_a_load(where, caplog):
    loader = DataLoader(echo, instrumentation=Raising(where))
    with caplog.at_level(logging.ERROR, logger="dataloader_sync"):
        futures = [loader.load(1), loader.load(2)]
        assert loader.dispatch().result(timeout=5) == [1, 2]
    assert [f.result(timeout=5) for f in futures] == [1, 2]
    messages = [r.getMessage() for r in caplog.records if r.name == "dataloader_sync"]
    assert len(messages) == 1 and "ignored" in messages[0]
    assert caplog.records[0].exc_info[1].args[0].startswith("broken")
    assert loader.statistics().load_error_count == 0


def test_DataLoader_instrumentation_must_have_both_hooks():
    class OnlyBatch:
        def begin_batch(self, loader, keys, environment):
            return None

    with pytest.raises(TypeError, match="instrumentation"):
        DataLoader(echo, instrumentation=OnlyBatch())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="instrumentation"):
        DataLoaderRegistry(instrumentation=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="instrumentation"):
        ScheduledDataLoaderRegistry(instrumentation="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"instrumentations\[1\]"):
        ChainedInstrumentation([Recording(), None])  # type: ignore[list-item]


def test_DataLoader_instrumentation_may_be_duck_typed():
    class Duck:
        def __init__(self):
            self.calls = 0

        def begin_dispatch(self, loader):
            self.calls += 1

        def begin_batch(self, loader, keys, environment):
            self.calls += 1

    duck = Duck()
    loader = DataLoader(echo, instrumentation=duck)  # type: ignore[arg-type]
    loader.load(1)
    loader.dispatch()
    assert duck.calls == 2 and loader.instrumentation is duck


# -- ChainedInstrumentation -----------------------------------------------------------------------------
def test_ChainedInstrumentation_calls_each_in_order_and_tells_each_context():
    log: list[Any] = []
    a, b = Recording("a"), Recording("b")
    a.log = b.log = log
    loader = DataLoader(echo, instrumentation=ChainedInstrumentation([a, b]))
    loader.load(1)
    loader.dispatch()
    assert [entry[0] for entry in log] == [
        "a.begin_dispatch", "b.begin_dispatch",
        "a.begin_batch", "b.begin_batch",
        "a.batch_completed", "b.batch_completed",
        "a.dispatch_completed", "b.dispatch_completed",
    ]


def test_ChainedInstrumentation_skips_None_contexts_and_survives_a_raising_part(caplog):
    rec = Recording()
    chained = ChainedInstrumentation([DataLoaderInstrumentation(), Raising("batch_completed"), rec])
    loader = DataLoader(echo, instrumentation=chained)
    assert chained.begin_dispatch(loader) is not None
    assert ChainedInstrumentation([DataLoaderInstrumentation()]).begin_batch(loader, [1], None) is None
    rec.log.clear()
    with caplog.at_level(logging.ERROR, logger="dataloader_sync"):
        loader.load(1)
        assert loader.dispatch().result(timeout=5) == [1]
    assert rec.completions("rec.batch_completed") == [([1], None)]
    assert len(caplog.records) == 1
    assert repr(chained).startswith("ChainedInstrumentation([DataLoaderInstrumentation(), ")


def test_ChainedInstrumentation_of_one_returns_that_ones_context_unwrapped():
    told = Told([], "x")

    class One(DataLoaderInstrumentation):
        def begin_batch(self, loader, keys, environment):
            return told

    assert ChainedInstrumentation([One()]).begin_batch(DataLoader(echo), [1], None) is told


# -- registries ------------------------------------------------------------------------------------------
def test_DataLoaderRegistry_instrumentation_applies_to_loaders_registered_without_their_own():
    shared, own = Recording("shared"), Recording("own")
    registry = DataLoaderRegistry(instrumentation=shared)
    plain = DataLoader(echo)
    mine = DataLoader(echo, instrumentation=own)
    registry.register("plain", plain).register("mine", mine)
    made = registry.compute_if_absent("made", lambda name: DataLoader(echo))
    assert plain.instrumentation is shared and made.instrumentation is shared and mine.instrumentation is own
    for loader in (plain, mine, made):
        loader.load(1)
    registry.dispatch_all()
    assert [entry[1] for entry in shared.log if entry[0] == "shared.begin_dispatch"] == [plain, made]
    assert [entry[1] for entry in own.log if entry[0] == "own.begin_dispatch"] == [mine]
    assert registry.instrumentation is shared and DataLoaderRegistry().instrumentation is None


def test_DataLoaderRegistry_without_instrumentation_leaves_a_loaders_alone():
    rec = Recording()
    loader = DataLoader(echo)
    DataLoaderRegistry(instrumentation=rec).register("a", loader)
    DataLoaderRegistry().register("b", loader)
    assert loader.instrumentation is rec


def test_DataLoaderRegistry_names_a_loader_made_without_a_name():
    named, unnamed = DataLoader(echo, name="own name"), DataLoader(echo)
    DataLoaderRegistry().register("users", unnamed).register("other", named)
    assert unnamed.name == "users" and named.name == "own name"


def test_ScheduledDataLoaderRegistry_instrumentation_applies_on_its_ticks():
    rec = Recording()
    ticked = threading.Event()

    def batch(keys):
        ticked.set()
        return list(keys)

    with ScheduledExecutor(name="test-instrumentation") as executor:
        with ScheduledDataLoaderRegistry(scheduled_executor=executor, ticker_mode=True, schedule=0.001,
                                         instrumentation=rec) as registry:
            loader = DataLoader(batch)
            registry.register("late", loader)
            registry.dispatch_all()  # arms the ticker; nothing queued yet
            future = loader.load("k")  # dispatched by a tick
            assert ticked.wait(timeout=10)  # (result() alone could dispatch it here)
            assert future.result(timeout=10) == "k"
    assert ("rec.begin_batch", ["k"], None) in rec.log


def test_DataLoaderRegistry_statistics_by_loader_in_registration_order():
    registry = DataLoaderRegistry()
    a, b = DataLoader(echo), DataLoader(echo)
    registry.register("b", b).register("a", a)
    a.load_many([1, 2])
    a.load(1)
    b.load(3)
    registry.dispatch_all()
    by_loader = registry.statistics_by_loader()
    assert list(by_loader) == ["b", "a"]
    assert by_loader["a"] == a.statistics() and by_loader["a"].load_count == 3
    assert by_loader["a"].cache_hit_count == 1 and by_loader["b"].batch_load_count == 1
    assert sum(by_loader.values()) == registry.statistics()
    assert DataLoaderRegistry().statistics_by_loader() == {}


# -- the contextvars context of batch functions --------------------------------------------------------
def _request_id_batch(seen: list[tuple[str, str]]):
    def batch(keys):
        seen.append((threading.current_thread().name, REQUEST_ID.get()))
        return list(keys)
    return batch


class SetsRequestId(DataLoaderInstrumentation):
    """Sets REQUEST_ID to "batch of <the dispatching request's id>" in ``begin_batch``."""

    def begin_batch(self, loader, keys, environment):
        REQUEST_ID.set(f"batch of {REQUEST_ID.get()}")
        return None


def test_DataLoader_batch_on_an_executor_runs_in_a_copy_of_the_dispatching_context():
    seen: list[tuple[str, str]] = []
    with cf.ThreadPoolExecutor(max_workers=1, thread_name_prefix="pool") as pool:
        pool.submit(REQUEST_ID.get).result(timeout=5)  # the worker thread exists before the request
        loader = DataLoader(_request_id_batch(seen), executor=pool)

        def request(request_id):
            REQUEST_ID.set(request_id)
            future = loader.load(request_id)
            loader.dispatch()
            return future.result(timeout=10)

        for request_id in ("r1", "r2"):
            assert contextvars.copy_context().run(request, request_id) == request_id
    assert [rid for _, rid in seen] == ["r1", "r2"]
    assert all(name.startswith("pool") for name, _ in seen)


def test_DataLoader_batch_on_an_executor_cannot_change_the_dispatching_context():
    def batch(keys):
        REQUEST_ID.set("changed by the batch")
        return list(keys)

    with cf.ThreadPoolExecutor(max_workers=1) as pool:
        loader = DataLoader(batch, executor=pool)

        def request():
            REQUEST_ID.set("r1")
            future = loader.load(1)
            loader.dispatch()
            future.result(timeout=10)
            return REQUEST_ID.get()

        assert contextvars.copy_context().run(request) == "r1"


@pytest.mark.parametrize("on_executor", [False, True])
def test_DataLoader_instrumentation_begin_batch_sets_context_the_batch_function_sees(on_executor):
    seen: list[tuple[str, str]] = []

    def request(loader):
        REQUEST_ID.set("r1")
        future = loader.load(1)
        loader.dispatch()
        future.result(timeout=10)
        return REQUEST_ID.get()

    with cf.ThreadPoolExecutor(max_workers=1) as pool:
        loader = DataLoader(_request_id_batch(seen), executor=pool if on_executor else None,
                            instrumentation=SetsRequestId())
        assert contextvars.copy_context().run(request, loader) == "r1"  # nothing leaked back
    assert [rid for _, rid in seen] == ["batch of r1"]


def test_ScheduledDataLoaderRegistry_tick_runs_batches_in_the_context_of_the_request_that_armed_it():
    seen: list[tuple[str, str]] = []
    ticked = threading.Event()

    def batch(keys):
        seen.append((threading.current_thread().name, REQUEST_ID.get()))
        ticked.set()
        return list(keys)

    with ScheduledExecutor(name="test-tick-context") as executor:
        def request():
            REQUEST_ID.set("r1")
            with ScheduledDataLoaderRegistry(scheduled_executor=executor, ticker_mode=True,
                                             schedule=0.001) as registry:
                loader = DataLoader(batch)
                registry.register("late", loader)
                registry.dispatch_all()  # nothing queued: arms the tick, in this context
                future = loader.load("k")  # only a tick dispatches this one
                assert ticked.wait(timeout=10)  # (result() alone could dispatch it here)
                return future.result(timeout=10)

        assert contextvars.copy_context().run(request) == "k"
    [(thread, request_id)] = seen
    assert thread != threading.current_thread().name and request_id == "r1"


@pytest.mark.parametrize("instrumented", [False, True])
def test_DataLoader_batch_on_a_ScheduledExecutor_is_the_task_its_slow_task_log_names(instrumented, caplog):
    clock = FakeClock(1000.0)
    seen: list[str] = []

    def load_users(keys):
        seen.append(REQUEST_ID.get())
        clock.advance(2.5)  # this batch "takes" 2.5 s
        return list(keys)

    executor = ScheduledExecutor(name="test-slow-batch", clock=clock, slow_task_threshold=1.0)
    loader = DataLoader(load_users, executor=executor, instrumentation=SetsRequestId() if instrumented else None)

    def request():
        REQUEST_ID.set("r1")
        future = loader.load(1)
        loader.dispatch()
        return future.result(timeout=10)

    try:
        with caplog.at_level(logging.WARNING, logger="dataloader_sync"):
            assert contextvars.copy_context().run(request) == 1
    finally:
        executor.shutdown()
    assert seen == ["batch of r1" if instrumented else "r1"]
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "load_users took 2.500 s" in warning


# -- the context instrumentation (a debugging tool's: added to registries created in a context) --------------
def test_context_instrumentation_is_added_to_registries_created_in_that_context_only():
    from dataloader_sync._instrumentation import reset_context_instrumentation, set_context_instrumentation

    own, extra = Recording("own"), Recording("extra")
    made: list[Any] = []
    extra.registry_created = made.append  # type: ignore[attr-defined]
    before = DataLoaderRegistry(instrumentation=own)
    token = set_context_instrumentation(extra)
    try:
        during = DataLoaderRegistry(instrumentation=own)
        bare = ScheduledDataLoaderRegistry()
        elsewhere: list[Any] = []
        thread = threading.Thread(target=lambda: elsewhere.append(DataLoaderRegistry()))  # another context
        thread.start()
        thread.join(timeout=10)
    finally:
        reset_context_instrumentation(token)
    after = DataLoaderRegistry()
    assert made == [during, bare]
    assert before.instrumentation is own and after.instrumentation is None
    assert elsewhere[0].instrumentation is None
    assert bare.instrumentation is extra
    assert isinstance(during.instrumentation, ChainedInstrumentation)
    assert during.instrumentation.instrumentations == (own, extra)  # the registry's own first
    during.register("users", DataLoader(echo))
    during.register("mine", DataLoader(echo, instrumentation=Recording("mine")))  # its own wins
    during["users"].load(1)
    during["mine"].load(2)
    during.dispatch_all()
    assert [e[1] for e in extra.log if e[0] == "extra.begin_batch"] == [[1]]
    assert [e[1] for e in own.log if e[0] == "own.begin_batch"] == [[1]]
    bare.close()


def test_context_instrumentation_whose_registry_created_raises_is_logged(caplog):
    from dataloader_sync._instrumentation import reset_context_instrumentation, set_context_instrumentation

    class Broken(Recording):
        def registry_created(self, registry):
            raise RuntimeError("broken registry_created")

    extra = Broken()
    token = set_context_instrumentation(extra)
    try:
        with caplog.at_level(logging.ERROR, logger="dataloader_sync"):
            registry = DataLoaderRegistry()
    finally:
        reset_context_instrumentation(token)
    assert registry.instrumentation is extra
    assert ["registry_created" in r.getMessage() for r in caplog.records] == [True]
    with pytest.raises(TypeError, match="instrumentation"):
        set_context_instrumentation(object())  # type: ignore[arg-type]

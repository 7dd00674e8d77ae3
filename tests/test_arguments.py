"""Bad arguments fail at once, naming the parameter, across the public API.

One contract over every public constructor and function: a bool where an
int is expected, NaN or an infinity where a delay is expected, a non-callable
where a callable is expected, or a value of the wrong type is a ``TypeError``
or ``ValueError`` raised by the call itself -- never later, inside a thread.
The module-specific cases live beside their modules; these are the ones
issue-wide checks found missing.
"""
from __future__ import annotations

import concurrent.futures as cf
import datetime
import math
import time

import pytest

from dataloader_sync import (
    ChainedInstrumentation,
    DataLoader,
    DataLoaderInstrumentation,
    DispatchPredicate,
    PeriodicRefresher,
    RestartableWorker,
    ScheduledDataLoaderRegistry,
    ScheduledExecutor,
    daily_at,
    dispatch_if_longer_than,
    failed_future,
    gather,
    refreshed_every,
    tune_gc,
)
from dataloader_sync._core._time import seconds
from dataloader_sync._pool import ElasticPool


def _noop() -> None:
    return None


BAD_CALLS = [
    # RestartableWorker: the clock is called on a crash, on the worker's thread; its first reading here.
    ("worker clock=None", lambda: RestartableWorker(_noop, clock=None), TypeError, "clock must be callable"),
    ("worker clock=5", lambda: RestartableWorker(_noop, clock=5), TypeError, "clock must be callable"),
    ("worker clock=nan", lambda: RestartableWorker(_noop, clock=lambda: math.nan), ValueError,
     "clock must return a finite number of seconds, got nan"),
    ("worker clock=str", lambda: RestartableWorker(_noop, clock=lambda: "now"), TypeError,
     "clock must return a number of seconds, got str"),
    ("worker max_restarts=True", lambda: RestartableWorker(_noop, max_restarts=True), TypeError, "max_restarts"),
    ("worker restart_window=inf", lambda: RestartableWorker(_noop, restart_window=math.inf), ValueError,
     "restart_window must be finite"),
    # PeriodicRefresher: clock at the first get(), wall_clock after each load.
    ("refresher clock=None", lambda: PeriodicRefresher(_noop, 1.0, clock=None), TypeError, "clock must be callable"),
    ("refresher clock=5", lambda: PeriodicRefresher(_noop, 1.0, clock=5), TypeError, "clock must be callable"),
    ("refresher wall_clock=None", lambda: PeriodicRefresher(_noop, 1.0, wall_clock=None), TypeError,
     "wall_clock must be callable"),
    ("refresher wall_clock=datetime", lambda: PeriodicRefresher(_noop, 1.0, wall_clock=datetime.datetime(2024, 1, 1)),
     TypeError, "wall_clock must be callable"),
    ("refresher wall_clock=time.time", lambda: PeriodicRefresher(_noop, 1.0, next_reload=daily_at(5),
                                                                 wall_clock=time.time),
     TypeError, "wall_clock must return a datetime.datetime, got float"),
    ("refresher failures_before_backoff=True", lambda: PeriodicRefresher(_noop, 1.0, failures_before_backoff=True),
     TypeError, "failures_before_backoff"),
    ("refresher interval=True", lambda: PeriodicRefresher(_noop, True), TypeError, "interval"),
    ("refresher clock=nan", lambda: PeriodicRefresher(_noop, 1.0, clock=lambda: math.nan), ValueError,
     "clock must return a finite number of seconds"),
    ("refresher clock=str", lambda: PeriodicRefresher(_noop, 1.0, clock=lambda: "now"), TypeError,
     "clock must return a number of seconds, got str"),
    ("refreshed_every(0)", lambda: refreshed_every(0), ValueError, "interval must be > 0"),
    ("refreshed_every(nan)", lambda: refreshed_every(math.nan), ValueError, "interval must be finite"),
    ("refreshed_every('1m')", lambda: refreshed_every("1m"), TypeError, "interval"),
    # daily_at: checked when made, not inside the first reload.
    ("daily_at(5.5)", lambda: daily_at(5.5), TypeError, "hour must be an int"),
    ("daily_at(True)", lambda: daily_at(True), TypeError, "hour must be an int"),
    ("daily_at(5, 30.5)", lambda: daily_at(5, 30.5), TypeError, "minute must be an int"),
    ("daily_at(5, '30')", lambda: daily_at(5, "30"), TypeError, "minute must be an int"),
    ("daily_at(tz=str)", lambda: daily_at(5, tz="Europe/Paris"), TypeError,
     r"tz must be a datetime.tzinfo or None \(e.g. zoneinfo.ZoneInfo\('Europe/Paris'\)\)"),
    ("daily_at(tz=5)", lambda: daily_at(5, tz=5), TypeError, "tz must be a datetime.tzinfo"),
    # ScheduledExecutor
    ("max_workers=True", lambda: ScheduledExecutor(max_workers=True), TypeError, "max_workers must be an int"),
    ("max_workers='2'", lambda: ScheduledExecutor(max_workers="2"), TypeError, "max_workers must be an int"),
    ("max_workers=2.0", lambda: ScheduledExecutor(max_workers=2.0), TypeError, "max_workers must be an int"),
    ("max_workers=-1", lambda: ScheduledExecutor(max_workers=-1), ValueError, "max_workers must be > 0"),
    ("name=5", lambda: ScheduledExecutor(name=5), TypeError, "name must be a str"),
    # ... its clock's first reading: NaN would make every task silently never due
    ("executor clock=nan", lambda: ScheduledExecutor(clock=lambda: math.nan), ValueError,
     "clock must return a finite number of seconds, got nan"),
    ("executor clock=inf", lambda: ScheduledExecutor(clock=lambda: math.inf), ValueError, "clock must return a finite"),
    ("executor clock=str", lambda: ScheduledExecutor(clock=lambda: "now"), TypeError,
     "clock must return a number of seconds, got str"),
    ("executor clock=None()", lambda: ScheduledExecutor(clock=lambda: None), TypeError,
     "clock must return a number of seconds, got NoneType"),
    ("executor clock=True", lambda: ScheduledExecutor(clock=lambda: True), TypeError, "clock must return a number"),
    ("executor clock=5", lambda: ScheduledExecutor(clock=5), TypeError, "clock must be callable"),
    # ElasticPool, the pool a ScheduledExecutor owns
    ("pool workers=0", lambda: ElasticPool(0, name="p"), ValueError, "workers must be > 0"),
    ("pool workers=True", lambda: ElasticPool(True, name="p"), TypeError, "workers must be an int"),
    ("pool workers=nan", lambda: ElasticPool(math.nan, name="p"), TypeError, "workers must be an int"),
    ("pool max_threads=True", lambda: ElasticPool(1, name="p", max_threads=True), TypeError,
     "max_threads must be an int"),
    ("pool stuck_after=nan", lambda: ElasticPool(1, name="p", stuck_after=math.nan), ValueError,
     "stuck_after must be finite"),
    ("pool stuck_after=-1", lambda: ElasticPool(1, name="p", stuck_after=-1), ValueError, "stuck_after must be >= 0"),
    ("pool idle_timeout=inf", lambda: ElasticPool(1, name="p", idle_timeout=math.inf), ValueError,
     "idle_timeout must be finite"),
    ("pool idle_timeout=0", lambda: ElasticPool(1, name="p", idle_timeout=0), ValueError, "idle_timeout must be > 0"),
    ("pool name=5", lambda: ElasticPool(1, name=5), TypeError, "name must be a str"),
    # futures
    ("gather([1])", lambda: gather([1]), TypeError, "futures must be concurrent.futures.Future objects, got int"),
    ("gather([future, None])", lambda: gather([cf.Future(), None]), TypeError, "got NoneType"),
    ("failed_future(5)", lambda: failed_future(5), TypeError, "exc must be an exception instance, got int"),
    ("failed_future(class)", lambda: failed_future(ValueError), TypeError, "exc must be an exception instance"),
    # predicates: the same delay rule as everywhere else
    ("dispatch_if_longer_than(inf)", lambda: dispatch_if_longer_than(math.inf), ValueError, "seconds must be finite"),
    ("dispatch_if_longer_than(-inf)", lambda: dispatch_if_longer_than(-math.inf), ValueError,
     "seconds must be finite"),
    ("dispatch_if_longer_than(True)", lambda: dispatch_if_longer_than(True), TypeError, "seconds must be a number"),
    ("dispatch_if_longer_than(10**400)", lambda: dispatch_if_longer_than(10**400), ValueError,
     "seconds must be finite"),
    ("DispatchPredicate(description=5)", lambda: DispatchPredicate(lambda name, loader: True, 5), TypeError,
     "description must be a str"),
    # instrumentation
    ("ChainedInstrumentation(5)", lambda: ChainedInstrumentation(5), TypeError,
     "instrumentations must be an iterable of DataLoaderInstrumentation, got int"),
    ("ChainedInstrumentation(one)", lambda: ChainedInstrumentation(DataLoaderInstrumentation()), TypeError,
     "instrumentations must be an iterable of DataLoaderInstrumentation, got DataLoaderInstrumentation"),
    # registries and loaders
    ("registry schedule=inf", lambda: ScheduledDataLoaderRegistry(schedule=math.inf), ValueError,
     "schedule must be finite"),
    ("registry schedule=True", lambda: ScheduledDataLoaderRegistry(schedule=True), TypeError, "schedule"),
    ("DataLoader batch='no'", lambda: DataLoader(lambda keys: keys, batch="no"), TypeError, "batch must be a bool"),
    ("DataLoader cache=0", lambda: DataLoader(lambda keys: keys, cache=0), TypeError, "cache must be a bool"),
    ("DataLoader cache_exceptions=None", lambda: DataLoader(lambda keys: keys, cache_exceptions=None), TypeError,
     "cache_exceptions must be a bool"),
    ("DataLoader pass_env=1", lambda: DataLoader(lambda keys, env: keys, pass_env=1), TypeError,
     "pass_env must be a bool"),
    ("DataLoader clock=nan", lambda: DataLoader(lambda keys: keys, clock=lambda: math.nan), ValueError,
     "clock must return a finite number of seconds"),
    ("DataLoader clock=str", lambda: DataLoader(lambda keys: keys, clock=lambda: "now"), TypeError,
     "clock must return a number of seconds, got str"),
    ("gather(return_exceptions='no')", lambda: gather([], return_exceptions="no"), TypeError,
     "return_exceptions must be a bool"),
    ("load_many(return_exceptions='no')", lambda: DataLoader(lambda keys: keys).load_many([1], return_exceptions="no"),
     TypeError, "return_exceptions must be a bool"),
    ("tune_gc(freeze='false')", lambda: tune_gc(freeze="false"), TypeError, "freeze must be a bool"),
    ("tune_gc(freeze=0)", lambda: tune_gc(freeze=0, threshold=None), TypeError, "freeze must be a bool"),
    ("registry ticker_mode='yes'", lambda: ScheduledDataLoaderRegistry(ticker_mode="yes"), TypeError,
     "ticker_mode must be a bool"),
    ("load_many('abc')", lambda: DataLoader(lambda keys: keys).load_many("abc"), TypeError,
     "keys must be an iterable of keys, not a str"),
    ("load_many(b'abc')", lambda: DataLoader(lambda keys: keys).load_many(b"abc"), TypeError,
     "keys must be an iterable of keys, not a bytes"),
    ("load_many(5)", lambda: DataLoader(lambda keys: keys).load_many(5), TypeError,
     "keys must be an iterable of keys, not a int"),
    ("load_many(key_contexts=5)", lambda: DataLoader(lambda keys: keys).load_many(["a"], 5), TypeError,
     "key_contexts must be a sequence parallel to keys, a mapping or None, not a int"),
    ("load_many(key_contexts='ab')", lambda: DataLoader(lambda keys: keys).load_many(["a", "b"], "ab"), TypeError,
     "key_contexts must be a sequence parallel to keys"),
]


@pytest.mark.parametrize("call, error, message", [case[1:] for case in BAD_CALLS],
                         ids=[case[0] for case in BAD_CALLS])
def test_public_calls_refuse_bad_arguments_at_once_naming_the_parameter(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("delay", [10**400, -(10**400)], ids=["10**400", "-10**400"])
def test_ScheduledExecutor_schedule_with_a_huge_int_says_what_is_wrong(delay):
    executor = ScheduledExecutor(name="test-huge-delay")
    try:
        with pytest.raises(ValueError, match="delay must be finite"):
            executor.schedule(_noop, delay)
        with pytest.raises(ValueError, match="period must be finite"):
            executor.schedule_at_fixed_rate(_noop, 0, delay)
        assert executor.pending_count == 0
    finally:
        executor.shutdown()


@pytest.mark.parametrize(
    "value, expected",
    [(0, 0.0), (1, 1.0), (-2.5, -2.5), (datetime.timedelta(milliseconds=1500), 1.5), (1e300, 1e300)],
)
def test_seconds_accepts_finite_numbers_and_timedeltas(value, expected):
    assert seconds("delay", value) == expected


@pytest.mark.parametrize(
    "value, error, message",
    [
        (math.nan, ValueError, "delay must be finite"),
        (math.inf, ValueError, "delay must be finite"),
        (10**400, ValueError, "delay must be finite"),
        (False, TypeError, "delay must be a number"),
        ("1", TypeError, "delay must be a number"),
        (None, TypeError, "delay must be a number"),
        (0, ValueError, "delay must be > 0"),
    ],
    ids=["nan", "inf", "10**400", "False", "str", "None", "zero"],
)
def test_seconds_is_the_one_rule_for_delays(value, error, message):
    with pytest.raises(error, match=message):
        seconds("delay", value, positive=True)


def test_arguments_that_are_right_still_work():
    # The checks refuse what is wrong and nothing else.
    assert daily_at(5, 30, tz=datetime.timezone.utc)(
        datetime.datetime(2024, 5, 1, 5, 0, tzinfo=datetime.timezone.utc)) == 1800.0
    assert repr(dispatch_if_longer_than(1)) == "dispatch_if_longer_than(1)"
    assert repr(dispatch_if_longer_than(datetime.timedelta(seconds=2))) == "dispatch_if_longer_than(2.0)"
    assert repr(DispatchPredicate(lambda name, loader: True, "mine")) == "mine"
    assert failed_future(KeyboardInterrupt()).exception().__class__ is KeyboardInterrupt
    done = failed_future(ValueError("x"))
    assert gather([done], return_exceptions=True).result(timeout=5)[0] is done.exception()
    loader = DataLoader(lambda keys: keys)
    many = loader.load_many(("a", "b"))
    loader.dispatch()
    assert many.result(timeout=5) == ["a", "b"]
    with ScheduledExecutor(name="test-args-ok", max_workers=1) as executor:
        assert executor.submit(lambda: 7).result(timeout=5) == 7


# -- finite but very long delays: accepted, and no thread dies of them -------------------

LONGER_THAN_TIMEOUT_MAX = 1e12  # seconds; threading.TIMEOUT_MAX is about 9.2e9 on Linux


def test_ScheduledExecutor_timer_survives_a_delay_longer_than_TIMEOUT_MAX():
    executor = ScheduledExecutor(name="test-long-delay")
    try:
        far = executor.schedule(_noop, LONGER_THAN_TIMEOUT_MAX)
        # Each round the timer thread goes back to waiting for ``far``: with a
        # wait timeout beyond TIMEOUT_MAX it used to die there with OverflowError.
        for i in range(3):
            assert executor.schedule(lambda i=i: i, 0).result(timeout=5) == i
        assert executor.pending_count == 1 and not far.done()
    finally:
        executor.shutdown()


def test_ScheduledDataLoaderRegistry_schedule_longer_than_TIMEOUT_MAX_keeps_the_executor_working():
    executor = ScheduledExecutor(name="test-long-schedule")
    try:
        registry = ScheduledDataLoaderRegistry(scheduled_executor=executor, ticker_mode=True,
                                               schedule=LONGER_THAN_TIMEOUT_MAX)
        registry.register("a", DataLoader(lambda keys: keys))
        registry.dispatch_all()  # arms a tick due in 1e12 s
        for i in range(3):
            assert executor.schedule(lambda i=i: i, 0).result(timeout=5) == i
        registry.close()
        assert executor.pending_count == 0
    finally:
        executor.shutdown()


def test_RestartableWorker_wait_and_stop_accept_a_delay_longer_than_TIMEOUT_MAX():
    import queue

    woken: queue.Queue[bool] = queue.Queue()
    started = queue.Queue()  # type: ignore[var-annotated]

    def target() -> None:
        started.put(True)
        woken.put(worker.wait(LONGER_THAN_TIMEOUT_MAX))

    worker = RestartableWorker(target, name="long-wait")
    worker.start()
    try:
        started.get(timeout=5)
    finally:
        assert worker.stop(timeout=LONGER_THAN_TIMEOUT_MAX) is True
    assert woken.get(timeout=5) is True  # woken by stop(), not an OverflowError


class _Crash(BaseException):
    """Ends a worker thread (not an Exception): the worker restarts it, reading its clock."""


def test_RestartableWorker_with_a_raising_clock_does_not_stay_running_without_a_thread(caplog):
    import threading

    def target() -> None:
        raise _Crash()

    readings = iter([0.0])  # the construction's reading, then none

    def broken_clock() -> float:
        for now in readings:
            return now
        raise RuntimeError("clock is broken")

    worker = RestartableWorker(target, name="broken-clock", clock=broken_clock)
    with caplog.at_level("ERROR", logger="dataloader_sync"):
        worker.start()
        for thread in [t for t in threading.enumerate() if t.name.startswith("dataloader-sync-worker-broken-clock")]:
            thread.join(timeout=5)
    assert not worker.running
    assert worker.state.name == "GAVE_UP"
    assert isinstance(worker.last_error, _Crash)
    assert "clock raised" in caplog.text
    assert worker.stop(timeout=5) is True


# -- the Flask helpers ---------------------------------------------------------------------


def _flask_calls():
    graphene = pytest.importorskip("graphene")
    pytest.importorskip("flask")
    from dataloader_sync import DataLoaderRegistry
    from dataloader_sync.flask import DataLoaders, graphql_view

    class Query(graphene.ObjectType):
        hello = graphene.String()

    schema = graphene.Schema(query=Query)
    return DataLoaders, graphql_view, schema, DataLoaderRegistry


def test_Flask_helpers_refuse_bad_arguments_at_once_naming_the_parameter():
    DataLoaders, graphql_view, schema, DataLoaderRegistry = _flask_calls()
    with pytest.raises(TypeError, match="app must be a flask.Flask"):
        DataLoaders(5, factory=DataLoaderRegistry)
    with pytest.raises(TypeError, match="schema must be a graphene Schema or a graphql-core GraphQLSchema"):
        graphql_view(object(), registry_factory=DataLoaderRegistry)
    with pytest.raises(TypeError, match="loaders must be a DataLoaders"):
        graphql_view(schema, loaders=DataLoaderRegistry)
    with pytest.raises(TypeError, match="name must be a str"):
        graphql_view(schema, registry_factory=DataLoaderRegistry, name=5)
    assert callable(graphql_view(schema.graphql_schema, registry_factory=DataLoaderRegistry))


# -- value caches: a ttl follows the delay rule ------------------------------------------------


@pytest.mark.parametrize("ttl, error, message", [
    (10**400, ValueError, "ttl must be finite"),
    (math.inf, ValueError, "ttl must be finite"),
    (0, ValueError, "ttl must be > 0"),
    (True, TypeError, "ttl must be a number of seconds"),
], ids=["10**400", "inf", "zero", "True"])
def test_RedisValueCache_refuses_a_bad_ttl_at_once(ttl, error, message):
    redis = pytest.importorskip("redis")
    from dataloader_sync.redis import RedisValueCache

    client = redis.Redis(host="127.0.0.1", port=1)  # never connected: construction only
    with pytest.raises(error, match=message):
        RedisValueCache(client, prefix="p", ttl=ttl)


# -- GraphQL: stall_timeout, a class attribute, is checked when the subclass is made -------------


@pytest.mark.parametrize("value, error, message", [
    (math.inf, ValueError, "stall_timeout must be finite"),
    (math.nan, ValueError, "stall_timeout must be finite"),
    (0, ValueError, "stall_timeout must be > 0"),
    ("30", TypeError, "stall_timeout must be a number of seconds"),
], ids=["inf", "nan", "zero", "str"])
def test_DataLoaderExecutionContext_subclass_with_a_bad_stall_timeout_is_refused(value, error, message):
    pytest.importorskip("graphql")
    from dataloader_sync.graphql import DataLoaderExecutionContext

    with pytest.raises(error, match=message):
        type("Bad", (DataLoaderExecutionContext,), {"stall_timeout": value})


@pytest.mark.parametrize("value", ["no", 1, None], ids=["str", "int", "None"])
def test_DataLoaderExecutionContext_subclass_with_a_non_bool_clear_loaders_after_mutation_fields_is_refused(value):
    # "no" (from a settings file) would have turned clearing on.
    pytest.importorskip("graphql")
    from dataloader_sync.graphql import DataLoaderExecutionContext

    with pytest.raises(TypeError, match="clear_loaders_after_mutation_fields must be a bool"):
        type("Bad", (DataLoaderExecutionContext,), {"clear_loaders_after_mutation_fields": value})
    for right in (True, False):
        assert type("Good", (DataLoaderExecutionContext,),
                    {"clear_loaders_after_mutation_fields": right}).clear_loaders_after_mutation_fields is right


def test_DataLoaderExecutionContext_subclass_stall_timeouts_that_are_right_still_work():
    pytest.importorskip("graphql")
    import threading

    from dataloader_sync.graphql import DataLoaderExecutionContext

    assert type("Never", (DataLoaderExecutionContext,), {"stall_timeout": None}).stall_timeout is None
    assert type("Short", (DataLoaderExecutionContext,), {"stall_timeout": 5}).stall_timeout == 5.0
    long_ = type("Long", (DataLoaderExecutionContext,), {"stall_timeout": LONGER_THAN_TIMEOUT_MAX})
    assert long_.stall_timeout == threading.TIMEOUT_MAX  # waited as "for ever", not an OverflowError


# -- Django and Flask helpers ------------------------------------------------------------------


def test_DataLoaderGraphQLViewMixin_refuses_a_registry_factory_of_the_wrong_kind_at_once():
    pytest.importorskip("django")
    from dataloader_sync.django import DataLoaderGraphQLViewMixin

    with pytest.raises(TypeError, match="Bad.registry_factory must be a callable, a dotted path or None, got int"):
        type("Bad", (DataLoaderGraphQLViewMixin,), {"registry_factory": 5})

    class Base:
        @classmethod
        def as_view(cls, **initkwargs):
            return initkwargs

    class View(DataLoaderGraphQLViewMixin, Base):
        registry_factory = "books.loaders.make_registry"  # a dotted path: imported on the first request

    with pytest.raises(TypeError, match="registry_factory must be a callable, a dotted path or None, got bool"):
        View.as_view(registry_factory=True)
    assert View.as_view(registry_factory=print) == {"registry_factory": print}


def test_GraphQLContext_refuses_loaders_that_are_not_a_registry():
    pytest.importorskip("flask")
    pytest.importorskip("graphql")
    from dataloader_sync import DataLoaderRegistry
    from dataloader_sync.flask import GraphQLContext

    with pytest.raises(TypeError, match="loaders must be a DataLoaderRegistry, got dict"):
        GraphQLContext(None, {})
    assert GraphQLContext(None, DataLoaderRegistry()).loaders is not None

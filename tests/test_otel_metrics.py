"""dataloader_sync.otel metrics: batch and value-cache instruments, executor instruments, the breaker
gauge; with the real OpenTelemetry SDK and its InMemoryMetricReader, also through Flask and Django."""
from __future__ import annotations

import concurrent.futures as cf
import inspect
import sys
import threading
import weakref
from importlib import metadata
from typing import Any

import pytest
from conftest import FakeClock

pytest.importorskip("opentelemetry.sdk.metrics")

from opentelemetry.metrics import Meter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import Gauge, InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from dataloader_sync import (
    MISSING,
    Breaker,
    ChainedInstrumentation,
    DataLoader,
    DataLoaderRegistry,
    Future,
    ScheduledExecutor,
    ValueCache,
    get_default_scheduled_executor,
)
from dataloader_sync.otel import (
    ExecutorInstrumentation,
    OpenTelemetryInstrumentation,
    OpenTelemetryMetrics,
    instrument_executor,
)
from dataloader_sync.otel._metrics import DURATION_BUCKETS, SIZE_BUCKETS

TIMEOUT = 10.0
# opentelemetry-api 1.23+ takes explicit bucket advice (older ones: the SDK's default buckets)
ADVICE = "explicit_bucket_boundaries_advisory" in inspect.signature(Meter.create_histogram).parameters


@pytest.fixture
def reader():
    return InMemoryMetricReader()


@pytest.fixture
def provider(reader):
    provider = MeterProvider(metric_readers=[reader])
    yield provider
    provider.shutdown()


@pytest.fixture
def metrics(provider):
    return OpenTelemetryMetrics(meter_provider=provider)


_seen: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # reader -> {name: [metric, scope, points]}


def _collect(reader) -> dict[str, list[Any]]:
    """Collect now; merged into what the reader collected before, point by point.

    Cumulative data: a point the SDK leaves out of a collection because it did
    not change since the last one (SDKs before 1.16 do) keeps its last value;
    a gauge's points are those of the last collection that reported it.
    """
    seen = _seen.setdefault(reader, {})
    data = reader.get_metrics_data()
    for entry in seen.values():
        if isinstance(entry[0].data, Gauge):  # a gauge says what is now, or nothing
            entry[2] = {}
    for resource_metrics in (data.resource_metrics if data else []):
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                entry = seen.setdefault(metric.name, [metric, scope_metrics.scope, {}])
                entry[0], entry[1] = metric, scope_metrics.scope
                for point in metric.data.data_points:
                    entry[2][tuple(sorted(point.attributes.items()))] = point
    return seen


def collected(reader, *, scopes: bool = False) -> dict[str, Any]:
    """The metrics by name (with *scopes*: their instrumentation scopes)."""
    return {name: entry[1] if scopes else entry[0] for name, entry in _collect(reader).items()}


def points(reader, name: str) -> dict[tuple, Any]:
    """The data points of metric *name*, by their sorted attribute items."""
    entry = _collect(reader).get(name)
    return {} if entry is None else dict(entry[2])


def echo(keys):
    return list(keys)


USERS = (("dataloader.name", "users"),)


# -- batches ---------------------------------------------------------------------------------------
def test_OpenTelemetryMetrics_records_batch_size_and_duration_per_batch_call(reader, metrics):
    users = DataLoader(echo, name="users", instrumentation=metrics)
    values = users.load_many([1, 2, 3])
    users.load(1)  # cached: not a key of its own
    users.dispatch()
    assert values.result(timeout=TIMEOUT) == [1, 2, 3]
    by_name = collected(reader)
    size, duration = by_name["dataloader.batch.size"], by_name["dataloader.batch.duration"]
    assert (size.unit, duration.unit) == ("{key}", "s")
    scope = collected(reader, scopes=True)["dataloader.batch.size"]
    assert scope.name == "dataloader_sync" and scope.version == metadata.version("dataloader_sync")
    [size_point] = size.data.data_points
    assert dict(size_point.attributes) == {"dataloader.name": "users"}
    assert (size_point.count, size_point.sum) == (1, 3)
    if ADVICE:  # the bucket advice is applied
        assert tuple(size_point.explicit_bounds) == SIZE_BUCKETS
    [duration_point] = duration.data.data_points
    assert dict(duration_point.attributes) == {"dataloader.name": "users"}
    assert duration_point.count == 1 and duration_point.sum >= 0
    if ADVICE:
        assert tuple(duration_point.explicit_bounds) == DURATION_BUCKETS


def test_OpenTelemetryMetrics_max_batch_size_slices_are_batch_calls_of_their_own(reader, metrics):
    loader = DataLoader(echo, name="users", max_batch_size=2, instrumentation=metrics)
    loader.load_many(range(5))
    loader.dispatch()
    point = points(reader, "dataloader.batch.size")[USERS]
    assert (point.count, point.sum, point.min, point.max) == (3, 5, 1, 2)


def test_OpenTelemetryMetrics_nothing_for_a_dispatch_with_nothing_queued(reader, metrics):
    loader = DataLoader(echo, name="idle", instrumentation=metrics)
    loader.dispatch()
    assert points(reader, "dataloader.batch.size") == {}


def test_OpenTelemetryMetrics_duration_ends_when_the_batch_future_completes(reader, metrics):
    pending: Future = Future()
    loader = DataLoader(lambda keys: pending, name="users", instrumentation=metrics)
    value = loader.load(1)
    loader.dispatch()
    assert points(reader, "dataloader.batch.duration") == {}  # the batch is still running
    pending.set_result(["one"])
    assert value.result(timeout=TIMEOUT) == "one"
    assert points(reader, "dataloader.batch.duration")[USERS].count == 1


def _raises(keys):
    raise ConnectionError("db down")


def _failed_future(keys):
    f: Future = Future()
    f.set_exception(ConnectionError("db down"))
    return f


@pytest.mark.parametrize("batch, error_type", [
    (_raises, "ConnectionError"),
    (_failed_future, "ConnectionError"),
    (lambda keys: [], "dataloader_sync._core._batch_shapes.BatchLoadError"),
])
def test_OpenTelemetryMetrics_a_failed_batch_has_error_type(reader, metrics, batch, error_type):
    loader = DataLoader(batch, name="users", instrumentation=metrics)
    future = loader.load(1)
    loader.dispatch()
    assert future.exception(timeout=TIMEOUT) is not None
    assert list(points(reader, "dataloader.batch.duration")) == [(("dataloader.name", "users"),
                                                                   ("error.type", error_type))]


def test_OpenTelemetryMetrics_per_key_errors_are_a_successful_batch(reader, metrics):
    loader = DataLoader(lambda keys: [KeyError(k) for k in keys], name="users", instrumentation=metrics)
    future = loader.load(1)
    loader.dispatch()
    assert isinstance(future.exception(timeout=TIMEOUT), KeyError)
    assert list(points(reader, "dataloader.batch.duration")) == [USERS]


def test_OpenTelemetryMetrics_on_an_executor_thread(reader, metrics):
    with cf.ThreadPoolExecutor(max_workers=1) as pool:
        loader = DataLoader(echo, name="users", executor=pool, instrumentation=metrics)
        value = loader.load(1)
        loader.dispatch()
        assert value.result(timeout=TIMEOUT) == 1
    assert points(reader, "dataloader.batch.duration")[USERS].count == 1


def test_OpenTelemetryMetrics_chains_with_the_span_instrumentation(reader, metrics):
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    spans = OpenTelemetryInstrumentation(tracer_provider=tracer_provider)
    registry = DataLoaderRegistry(instrumentation=ChainedInstrumentation([spans, metrics]))
    registry.register("users", DataLoader(echo))
    registry["users"].load_many([1, 2])
    registry.dispatch_all()
    assert [s.name for s in exporter.get_finished_spans()] == ["dataloader.batch users"]
    assert points(reader, "dataloader.batch.size")[USERS].sum == 2
    tracer_provider.shutdown()


def test_OpenTelemetryMetrics_rejects_a_meter_provider_without_get_meter():
    with pytest.raises(TypeError, match="meter_provider"):
        OpenTelemetryMetrics(meter_provider=object())  # type: ignore[arg-type]


# -- value caches ----------------------------------------------------------------------------------
class DictCache(ValueCache):
    """A process-local value cache (a dict); ``broken`` makes ``get_values`` raise."""

    def __init__(self) -> None:
        self.data: dict[Any, Any] = {}
        self.broken = False

    def get_values(self, keys):
        if self.broken:
            raise ConnectionError("cache down")
        return [self.data.get(k, MISSING) for k in keys]

    def set_values(self, keys, values):
        self.data.update(zip(keys, values))

    def delete(self, key):
        self.data.pop(key, None)

    def clear(self):
        self.data.clear()


def lookups(reader) -> dict[str, int]:
    return {dict(attrs)["dataloader.value_cache.result"]: p.value
            for attrs, p in points(reader, "dataloader.value_cache.lookups").items()
            if dict(attrs)["dataloader.name"] == "users"}


def test_OpenTelemetryMetrics_counts_value_cache_hits_and_misses(reader, metrics):
    cache = DictCache()
    cache.data.update({1: "one", 2: "two"})
    loader = DataLoader(echo, name="users", value_cache=cache, instrumentation=metrics)
    values = loader.load_many([1, 2, 3])
    loader.dispatch()
    assert values.result(timeout=TIMEOUT) == ["one", "two", 3]
    assert lookups(reader) == {"hit": 2, "miss": 1}
    assert collected(reader)["dataloader.value_cache.lookups"].unit == "{lookup}"
    assert points(reader, "dataloader.batch.size")[USERS].sum == 1  # only the miss was loaded
    fresh = DataLoader(echo, name="users", value_cache=cache, instrumentation=metrics)
    again = fresh.load_many([1, 2, 3])
    fresh.dispatch()  # every key a hit now: no batch call
    assert again.result(timeout=TIMEOUT) == ["one", "two", 3]
    assert lookups(reader) == {"hit": 5, "miss": 1}
    assert points(reader, "dataloader.batch.size")[USERS].count == 1


def test_OpenTelemetryMetrics_a_failing_value_cache_counts_misses(reader, metrics, caplog):
    cache = DictCache()
    cache.broken = True
    loader = DataLoader(echo, name="users", value_cache=cache, instrumentation=metrics)
    values = loader.load_many([1, 2])
    loader.dispatch()
    assert values.result(timeout=TIMEOUT) == [1, 2]
    assert lookups(reader) == {"miss": 2}
    assert loader.statistics().value_cache_miss_count == 2


# -- the breaker gauge -----------------------------------------------------------------------------
def test_OpenTelemetryMetrics_breaker_gauge_reports_live_breakers_once_per_meter(provider, reader):
    clock = FakeClock()
    books, users = Breaker("redis:books", clock=clock), Breaker("django:users", clock=clock)
    books.failed(ConnectionError("refused"))
    OpenTelemetryMetrics(meter_provider=provider)
    OpenTelemetryMetrics(meter_provider=provider)  # a second one on the same meter: one gauge

    def found():
        return {dict(attrs)["dataloader.value_cache.name"]: p.value
                for attrs, p in points(reader, "dataloader.value_cache.breaker_open").items()
                if dict(attrs)["dataloader.value_cache.name"] in ("redis:books", "django:users")}

    assert found() == {"redis:books": 1, "django:users": 0}
    clock.advance(5.0)
    assert books.allow()  # the probe
    books.succeeded()
    assert found() == {"redis:books": 0, "django:users": 0}
    del users


def test_OpenTelemetryMetrics_breaker_gauge_opens_with_a_failing_value_cache(provider, reader, caplog):
    cache = DictCache()
    cache.breaker = Breaker("dict-cache", clock=FakeClock())  # the breaker a value cache may choose
    cache.broken = True
    loader = DataLoader(echo, name="users", value_cache=cache)
    OpenTelemetryMetrics(meter_provider=provider)
    assert loader.load_many([1, 2]).result(timeout=TIMEOUT) == [1, 2]  # the cache failed: from echo
    gauge = {dict(attrs)["dataloader.value_cache.name"]: p.value
             for attrs, p in points(reader, "dataloader.value_cache.breaker_open").items()}
    assert gauge.get("dict-cache") == 1


# -- executors -------------------------------------------------------------------------------------
@pytest.fixture
def executor():
    with ScheduledExecutor(name="otel-exec", max_workers=1) as executor:
        yield executor


@pytest.fixture
def instrumented(executor, provider):
    handle = instrument_executor(executor, meter_provider=provider)
    yield handle
    handle.uninstrument()


EXEC = (("dataloader.executor.name", "otel-exec"),)


def test_instrument_executor_records_the_queue_wait_of_each_run(executor, instrumented, reader):
    for i in range(3):
        assert executor.submit(abs, -i).result(timeout=TIMEOUT) == i
    executor.schedule(lambda: None, 0.001).result(timeout=TIMEOUT)  # a timed task: due time -> start
    assert collected(reader)["dataloader.executor.queue_wait"].unit == "s"
    point = points(reader, "dataloader.executor.queue_wait")[EXEC]
    assert point.count == 4 and point.min >= 0


def test_instrument_executor_gauges_busy_and_idle_threads_and_queued_tasks(reader, provider):
    release, started = threading.Event(), threading.Event()

    def blocking():
        started.set()
        assert release.wait(TIMEOUT)

    with cf.ThreadPoolExecutor(max_workers=1) as pool, \
            ScheduledExecutor(pool, name="given") as given, \
            ScheduledExecutor(name="owned", max_workers=1) as owned:
        handles = [instrument_executor(given, meter_provider=provider),
                   instrument_executor(owned, meter_provider=provider)]
        try:
            first = given.submit(blocking)
            assert started.wait(TIMEOUT)
            second = given.submit(lambda: "second")  # waits for the pool's only thread
            owned_started = threading.Event()
            owned_task = owned.submit(lambda: (owned_started.set(), release.wait(TIMEOUT)))
            assert owned_started.wait(TIMEOUT)
            queued = {dict(a)["dataloader.executor.name"]: p.value
                      for a, p in points(reader, "dataloader.executor.tasks.queued").items()}
            assert queued == {"given": 1, "owned": 0}
            threads = {(dict(a)["dataloader.executor.name"], dict(a)["dataloader.executor.thread.state"]): p.value
                       for a, p in points(reader, "dataloader.executor.pool.threads").items()}
            assert threads == {("owned", "busy"): 1, ("owned", "idle"): 0}  # a given pool is not counted
            release.set()
            assert second.result(timeout=TIMEOUT) == "second"
            first.result(timeout=TIMEOUT)
            owned_task.result(timeout=TIMEOUT)
            queued = {dict(a)["dataloader.executor.name"]: p.value
                      for a, p in points(reader, "dataloader.executor.tasks.queued").items()}
            assert queued == {"given": 0, "owned": 0}
        finally:
            for handle in handles:
                handle.uninstrument()


def test_instrument_executor_is_idempotent_and_uninstrument_undoes_it(executor, provider, reader):
    handle = instrument_executor(executor, meter_provider=provider)
    assert isinstance(handle, ExecutorInstrumentation)
    assert instrument_executor(executor, meter_provider=provider) is handle
    executor.submit(lambda: None).result(timeout=TIMEOUT)  # observers run before the future completes
    assert points(reader, "dataloader.executor.queue_wait")[EXEC].count == 1  # not twice per run
    handle.uninstrument()
    handle.uninstrument()  # idempotent
    assert not handle.active and handle.executor is None
    executor.submit(lambda: None).result(timeout=TIMEOUT)
    assert points(reader, "dataloader.executor.queue_wait")[EXEC].count == 1
    assert points(reader, "dataloader.executor.tasks.queued") == {}  # no longer observed
    again = instrument_executor(executor, meter_provider=provider)  # the same meter: its instruments serve again
    try:
        assert again is not handle
        assert list(points(reader, "dataloader.executor.tasks.queued")) == [EXEC]
    finally:
        again.uninstrument()


def test_instrument_executor_without_an_executor_instruments_the_default_one(provider, reader):
    handle = instrument_executor(meter_provider=provider)
    try:
        assert handle.executor is get_default_scheduled_executor()
        assert list(points(reader, "dataloader.executor.tasks.queued")) == [
            (("dataloader.executor.name", "dataloader-sync-default"),)]
    finally:
        handle.uninstrument()


def test_instrument_executor_rejects_what_is_not_a_ScheduledExecutor(provider):
    with cf.ThreadPoolExecutor(max_workers=1) as pool:
        with pytest.raises(TypeError, match="executor must be a ScheduledExecutor"):
            instrument_executor(pool, meter_provider=provider)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="meter_provider"):
        instrument_executor(meter_provider=object())  # type: ignore[arg-type]


# -- through Flask and Django ----------------------------------------------------------------------
def test_OpenTelemetryMetrics_through_a_flask_graphql_app(reader, metrics):
    graphene = pytest.importorskip("graphene")
    flask = pytest.importorskip("flask")
    from dataloader_sync import ScheduledDataLoaderRegistry
    from dataloader_sync.flask import DataLoaders, graphql_view

    books_cache = DictCache()  # shared by the requests, as a Redis cache would be

    def make_registry():
        registry = ScheduledDataLoaderRegistry(instrumentation=metrics)
        registry.register("author", DataLoader(lambda ids: [{"id": i} for i in ids]))
        registry.register("books_by_author", DataLoader(
            lambda ids: [[f"book {i}.{b}" for b in range(2)] for i in ids], value_cache=books_cache))
        return registry

    class Author(graphene.ObjectType):
        id = graphene.Int()
        books = graphene.List(graphene.String)

        @staticmethod
        def resolve_books(author, info):
            return info.context.loaders["books_by_author"].load(author["id"])

    class Query(graphene.ObjectType):
        authors = graphene.List(Author, ids=graphene.List(graphene.Int, required=True))

        @staticmethod
        def resolve_authors(root, info, ids):
            return [info.context.loaders["author"].load(i) for i in ids]

    app = flask.Flask(__name__)
    DataLoaders(app, factory=make_registry)
    app.add_url_rule("/graphql", view_func=graphql_view(graphene.Schema(query=Query)))
    client = app.test_client()
    for ids in ([1, 2, 3], [2, 3, 4]):
        response = client.post("/graphql", json={"query": f"{{ authors(ids: {ids}) {{ id books }} }}"})
        assert response.status_code == 200 and "errors" not in response.get_json()
    sizes = {dict(a)["dataloader.name"]: (p.count, p.sum) for a, p in points(reader, "dataloader.batch.size").items()}
    assert sizes == {"author": (2, 6), "books_by_author": (2, 4)}  # the second request loaded only author 4's books
    found = {dict(a)["dataloader.value_cache.result"]: p.value
             for a, p in points(reader, "dataloader.value_cache.lookups").items()}
    assert found == {"hit": 2, "miss": 4}
    durations = {dict(a)["dataloader.name"]: p.count for a, p in points(reader, "dataloader.batch.duration").items()}
    assert durations == {"author": 2, "books_by_author": 2}


def test_OpenTelemetryMetrics_through_django_and_the_example_project(django_example_project, example_books,
                                                                     reader, metrics):
    pytest.importorskip("graphene_django")
    from books import loaders
    from django.test import Client, override_settings

    from dataloader_sync import ScheduledDataLoaderRegistry

    def make_registry(request):
        registry = ScheduledDataLoaderRegistry(instrumentation=metrics)
        for name, batch_fn in (("author", loaders.load_authors), ("book", loaders.load_books),
                               ("books_by_author", loaders.load_books_by_author),
                               ("reviews_by_book", loaders.load_reviews_by_book)):
            registry.register(name, DataLoader(batch_fn, name=name, value_cache=loaders.value_cache(name)))
        return registry

    example_books(authors=3, books=2, reviews=1)
    query = "{ authors { name books { title reviews { rating } } } }"
    with override_settings(DATALOADER_SYNC_REGISTRY_FACTORY=make_registry, BOOKS_VALUE_CACHE="default"):
        from django.core.cache import cache

        cache.clear()
        client = Client()
        for _ in range(2):
            response = client.post("/graphql", {"query": query}, content_type="application/json")
            assert response.status_code == 200 and "errors" not in response.json()
        cache.clear()
    sizes = {dict(a)["dataloader.name"]: (p.count, p.sum) for a, p in points(reader, "dataloader.batch.size").items()}
    assert sizes == {"books_by_author": (1, 3), "reviews_by_book": (1, 6)}  # the second request: all hits
    found = {(dict(a)["dataloader.name"], dict(a)["dataloader.value_cache.result"]): p.value
             for a, p in points(reader, "dataloader.value_cache.lookups").items()}
    assert found == {("books_by_author", "miss"): 3, ("books_by_author", "hit"): 3,
                     ("reviews_by_book", "miss"): 6, ("reviews_by_book", "hit"): 6}


def test_OpenTelemetryMetrics_without_a_provider_uses_the_global_one_set_later():
    # The global provider can be set once per process: a subprocess of its own.
    import json
    import os
    import subprocess

    code = (
        "import json\n"
        "from opentelemetry import metrics\n"
        "from opentelemetry.sdk.metrics import MeterProvider\n"
        "from opentelemetry.sdk.metrics.export import InMemoryMetricReader\n"
        "from dataloader_sync import DataLoader\n"
        "from dataloader_sync.otel import OpenTelemetryMetrics\n"
        "loader = DataLoader(lambda keys: keys, name='users', instrumentation=OpenTelemetryMetrics())\n"
        "reader = InMemoryMetricReader()\n"
        "metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))\n"
        "loader.load_many([1, 2]); loader.dispatch()\n"
        "data = reader.get_metrics_data()\n"
        "print(json.dumps(sorted((m.name, p.sum) for r in data.resource_metrics for s in r.scope_metrics\n"
        "                        for m in s.metrics if m.name == 'dataloader.batch.size'\n"
        "                        for p in m.data.data_points)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [["dataloader.batch.size", 2]]

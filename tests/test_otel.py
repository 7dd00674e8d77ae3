"""dataloader_sync.otel: spans per batch call, with the real OpenTelemetry SDK and its in-memory exporter."""
from __future__ import annotations

import concurrent.futures as cf
import importlib.util
import json
import os
import subprocess
import sys
import threading

import pytest

pytest.importorskip("opentelemetry.sdk.trace")

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from dataloader_sync import (
    BatchLoadError,
    ChainedInstrumentation,
    DataLoader,
    DataLoaderInstrumentation,
    DataLoaderRegistry,
    Future,
    ScheduledDataLoaderRegistry,
    ScheduledExecutor,
)
from dataloader_sync.otel import OpenTelemetryInstrumentation


@pytest.fixture
def exporter():
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter):
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider
    provider.shutdown()


@pytest.fixture
def instrumentation(provider):
    return OpenTelemetryInstrumentation(tracer_provider=provider)


@pytest.fixture
def tracer(provider):
    return provider.get_tracer("tests")


def echo(keys):
    return list(keys)


def spans_named(exporter, prefix="dataloader.batch"):
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


def test_OpenTelemetryInstrumentation_one_span_per_batch_call_with_name_and_attributes(
        exporter, instrumentation, tracer):
    users = DataLoader(echo, name="users", instrumentation=instrumentation)
    with tracer.start_as_current_span("request") as request:
        values = users.load_many([1, 2, 3])
        users.load(1)  # cached: no key of its own
        users.dispatch()
    assert values.result(timeout=5) == [1, 2, 3]
    [span] = spans_named(exporter)
    assert span.name == "dataloader.batch users"
    assert span.kind is SpanKind.INTERNAL
    assert dict(span.attributes) == {"dataloader.name": "users", "dataloader.batch.size": 3}
    assert span.status.status_code is StatusCode.UNSET
    assert span.parent.span_id == request.get_span_context().span_id
    assert span.context.trace_id == request.get_span_context().trace_id
    assert span.instrumentation_scope.name == "dataloader_sync"


def test_OpenTelemetryInstrumentation_max_batch_size_slices_are_spans_of_their_own(exporter, instrumentation):
    loader = DataLoader(echo, name="items", max_batch_size=2, instrumentation=instrumentation)
    loader.load_many(range(5))
    loader.dispatch()
    sizes = [s.attributes["dataloader.batch.size"] for s in spans_named(exporter)]
    assert sizes == [2, 2, 1]


def test_OpenTelemetryInstrumentation_no_span_for_a_dispatch_with_nothing_queued(exporter, instrumentation):
    loader = DataLoader(echo, name="idle", instrumentation=instrumentation)
    for _ in range(3):
        loader.dispatch()
    assert exporter.get_finished_spans() == ()


def test_OpenTelemetryInstrumentation_span_is_current_in_the_batch_function(exporter, instrumentation, tracer):
    def batch(keys):
        with tracer.start_as_current_span("SELECT users"):
            return list(keys)

    loader = DataLoader(batch, name="users", instrumentation=instrumentation)
    with tracer.start_as_current_span("request"):
        loader.load(1)
        loader.dispatch()
        outside = trace.get_current_span()
    by_name = {s.name: s for s in exporter.get_finished_spans()}
    assert by_name["SELECT users"].parent.span_id == by_name["dataloader.batch users"].context.span_id
    assert outside.get_span_context().span_id == by_name["request"].context.span_id  # nothing leaked


def test_OpenTelemetryInstrumentation_parent_on_an_executor_thread_is_the_dispatching_span(
        exporter, instrumentation, tracer):
    threads = []

    def batch(keys):
        threads.append(threading.current_thread().name)
        with tracer.start_as_current_span("SELECT users"):
            return [k * 10 for k in keys]

    with cf.ThreadPoolExecutor(max_workers=2, thread_name_prefix="batch-pool") as pool:
        pool.submit(lambda: None).result(timeout=5)  # the pool thread exists before the request's span
        loader = DataLoader(batch, name="users", executor=pool, instrumentation=instrumentation)
        with tracer.start_as_current_span("request") as request:
            value = loader.load(4)
            loader.dispatch()
        assert value.result(timeout=10) == 40
    by_name = {s.name: s for s in exporter.get_finished_spans()}
    assert threads[0].startswith("batch-pool")
    batch_span = by_name["dataloader.batch users"]
    assert batch_span.parent.span_id == request.get_span_context().span_id
    assert by_name["SELECT users"].parent.span_id == batch_span.context.span_id


def test_OpenTelemetryInstrumentation_concurrent_requests_each_get_their_own_parent(exporter, instrumentation, tracer):
    with cf.ThreadPoolExecutor(max_workers=2) as pool:
        def request(i):
            loader = DataLoader(echo, name=f"loader-{i}", executor=pool, instrumentation=instrumentation)
            with tracer.start_as_current_span(f"request-{i}") as span:
                value = loader.load(i)
                loader.dispatch()
                assert value.result(timeout=10) == i
            return span.get_span_context().span_id

        with cf.ThreadPoolExecutor(max_workers=4) as requests:
            parents = list(requests.map(request, range(8)))
    for i, parent in enumerate(parents):
        [span] = spans_named(exporter, f"dataloader.batch loader-{i}")
        assert span.parent.span_id == parent


def test_OpenTelemetryInstrumentation_parent_from_a_registry_tick_is_the_span_that_armed_it(
        exporter, instrumentation, tracer):
    ticked = threading.Event()
    threads = []

    def batch(keys):
        threads.append(threading.current_thread())
        ticked.set()
        return list(keys)

    with ScheduledExecutor(name="test-otel") as executor:
        with tracer.start_as_current_span("request") as request:
            with ScheduledDataLoaderRegistry(scheduled_executor=executor, ticker_mode=True, schedule=0.001,
                                             instrumentation=instrumentation) as registry:
                loader = DataLoader(batch)
                registry.register("late", loader)
                registry.dispatch_all()  # nothing queued: arms the tick, in the request's context
                future = loader.load("k")  # only a tick dispatches this one
                assert ticked.wait(timeout=10)  # (result() alone could dispatch it here)
                assert future.result(timeout=10) == "k"
    assert threads and threading.current_thread() not in threads
    [span] = spans_named(exporter)
    assert span.name == "dataloader.batch late"
    assert span.parent is not None and span.parent.span_id == request.get_span_context().span_id


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
def test_OpenTelemetryInstrumentation_a_failed_batch_is_an_error_span_with_the_exception(
        exporter, instrumentation, batch, error_type):
    loader = DataLoader(batch, name="users", instrumentation=instrumentation)
    future = loader.load(1)
    loader.dispatch()
    error = future.exception(timeout=5)
    assert isinstance(error, (ConnectionError, BatchLoadError))
    [span] = spans_named(exporter)
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == f"{type(error).__name__}: {error}"
    assert span.attributes["error.type"] == error_type
    [event] = span.events
    assert event.name == "exception"
    assert event.attributes["exception.type"] in (type(error).__qualname__, error_type)
    assert event.attributes["exception.message"] == str(error)


def test_OpenTelemetryInstrumentation_a_failed_executor_batch_is_an_error_span(exporter, instrumentation):
    with cf.ThreadPoolExecutor(max_workers=1) as pool:
        loader = DataLoader(_raises, name="users", executor=pool, instrumentation=instrumentation)
        future = loader.load(1)
        loader.dispatch()
        assert isinstance(future.exception(timeout=10), ConnectionError)
    [span] = spans_named(exporter)
    assert span.status.status_code is StatusCode.ERROR and span.attributes["error.type"] == "ConnectionError"


def test_OpenTelemetryInstrumentation_per_key_errors_leave_the_status_unset(exporter, instrumentation):
    loader = DataLoader(lambda keys: [KeyError(k) for k in keys], name="users", instrumentation=instrumentation)
    future = loader.load(1)
    loader.dispatch()
    assert isinstance(future.exception(timeout=5), KeyError)
    [span] = spans_named(exporter)
    assert span.status.status_code is StatusCode.UNSET and span.events == ()


def test_OpenTelemetryInstrumentation_the_span_ends_when_the_batch_future_completes(exporter, instrumentation):
    pending: Future = Future()
    loader = DataLoader(lambda keys: pending, name="slow", instrumentation=instrumentation)
    loader.load(1)
    loader.dispatch()
    assert spans_named(exporter) == []
    pending.set_result(["one"])
    [span] = spans_named(exporter)
    assert span.end_time >= span.start_time


def test_OpenTelemetryInstrumentation_names_a_loader_by_registry_name_or_batch_function(exporter, instrumentation):
    registry = DataLoaderRegistry(instrumentation=instrumentation)
    registry.register("users", DataLoader(echo))
    registry["users"].load(1)
    registry.dispatch_all()
    alone = DataLoader(echo, instrumentation=instrumentation)
    alone.load(1)
    alone.dispatch()
    assert [s.name for s in spans_named(exporter)] == ["dataloader.batch users", "dataloader.batch echo"]


def test_OpenTelemetryInstrumentation_chains_with_other_instrumentations(exporter, instrumentation):
    sizes = []

    class Sizes(DataLoaderInstrumentation):
        def begin_batch(self, loader, keys, environment):
            sizes.append(len(keys))
            return None

    loader = DataLoader(echo, name="users", instrumentation=ChainedInstrumentation([Sizes(), instrumentation]))
    loader.load_many([1, 2])
    loader.dispatch()
    assert sizes == [2] and len(spans_named(exporter)) == 1


def test_OpenTelemetryInstrumentation_rejects_a_tracer_provider_without_get_tracer():
    with pytest.raises(TypeError, match="tracer_provider"):
        OpenTelemetryInstrumentation(tracer_provider=object())  # type: ignore[arg-type]


def test_OpenTelemetryInstrumentation_without_a_provider_uses_the_global_one_set_later():
    # The global provider can be set once per process: a subprocess of its own.
    code = (
        "import json\n"
        "from opentelemetry import trace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "from dataloader_sync import DataLoader\n"
        "from dataloader_sync.otel import OpenTelemetryInstrumentation\n"
        "loader = DataLoader(lambda keys: keys, name='users', instrumentation=OpenTelemetryInstrumentation())\n"
        "exporter = InMemorySpanExporter()\n"
        "provider = TracerProvider()\n"
        "provider.add_span_processor(SimpleSpanProcessor(exporter))\n"
        "trace.set_tracer_provider(provider)\n"
        "loader.load(1); loader.dispatch()\n"
        "print(json.dumps([s.name for s in exporter.get_finished_spans()]))\n"
    )
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == ["dataloader.batch users"]


# -- the frameworks' own OpenTelemetry instrumentation: loader spans under the request's span ----------------
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def _run_example(path: str) -> list[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.dirname(EXAMPLES), env.get("PYTHONPATH")) if p)
    out = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_OpenTelemetryInstrumentation_under_flasks_request_span_in_the_flask_example():
    pytest.importorskip("opentelemetry.instrumentation.flask")
    lines = _run_example(os.path.join(EXAMPLES, "otel_flask.py"))
    assert json.loads(lines[0].replace("'", '"'))["data"]["authors"][1]["books"][0]["stars"] == [4, 4, 5]
    assert lines[1:] == [
        "POST /graphql",
        "  dataloader.batch author  [dataloader.name=author, dataloader.batch.size=2]",
        "  dataloader.batch books_by_author  [dataloader.name=books_by_author, dataloader.batch.size=2]",
        "  dataloader.batch stars  [dataloader.name=stars, dataloader.batch.size=3]",  # on the pool's thread
        "    SELECT stars",
    ]


def test_OpenTelemetryInstrumentation_under_djangos_request_span_in_the_django_example():
    pytest.importorskip("opentelemetry.instrumentation.django")
    if importlib.util.find_spec("graphene_django") is None:  # importing it needs configured settings
        pytest.skip("graphene_django is not installed")
    lines = _run_example(os.path.join(EXAMPLES, "django_project", "otel_demo.py"))
    assert lines == [
        "3 authors, 5 books",
        "POST graphql",
        "  SELECT books_author",
        "  dataloader.batch books_by_author  [dataloader.name=books_by_author, dataloader.batch.size=3]",
        "    SELECT books_book",
        "  dataloader.batch reviews_by_book  [dataloader.name=reviews_by_book, dataloader.batch.size=5]",
        "    SELECT books_review",
    ]

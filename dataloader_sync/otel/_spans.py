"""One OpenTelemetry span per batch-function call.

Guarantees:
- Each call of a loader's batch function is one span of kind INTERNAL named
  ``"dataloader.batch <loader name>"``, with the attributes
  ``dataloader.name`` (str) and ``dataloader.batch.size`` (int: the keys of
  that call; ``max_batch_size`` slices are spans of their own).
- Its parent is the span current where the dispatch happened: the request's
  span for a GraphQL execution, also when the batch function runs on an
  ``executor=`` thread (it runs in a copy of the dispatching context) or in a
  registry's tick (a tick runs in the context of the request that armed it).
- The span is current while the batch function runs, so spans made inside
  it (a database client's) are its children.
- The span starts just before the batch function is called and ends when the
  batch's keys are decided (for a Future-returning or ``executor=`` batch
  function: when its Future completes), before the loads' callbacks run.
- A batch that fails as a whole (the function raised, its Future failed,
  its result did not match the keys) ends with status ERROR, the exception
  recorded as an event, and ``error.type`` (the exception's qualified class
  name), as the OpenTelemetry semantic conventions say for a failed
  operation.  Per-key errors are values of a successful batch: the span's
  status stays UNSET.
- Only batch-function calls make spans, dispatches do not: a dispatch whose
  keys all came from a value cache, or with nothing queued, makes none.
"""
from __future__ import annotations

from typing import Any, Optional

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from .._core import BatchLoaderEnvironment, DataLoader
from .._instrumentation import (
    DataLoaderInstrumentation,
    DataLoaderInstrumentationContext,
)

__all__ = ["OpenTelemetryInstrumentation", "error_type", "loader_name"]

_TRACER_NAME = "dataloader_sync"


def loader_name(loader: DataLoader[Any, Any]) -> str:
    """The loader's name; for an unnamed, unregistered loader its batch function's."""
    if loader.name:
        return loader.name
    # DataLoader has no public accessor for its batch function (a name is all we take of it).
    fn = getattr(loader, "_batch_load_fn", None)
    return getattr(fn, "__qualname__", None) or "DataLoader"


def error_type(error: BaseException) -> str:
    cls = type(error)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


class _BatchSpan:
    """The context of one batch call: ends its span when told."""

    __slots__ = ("span",)

    def __init__(self, span: Span) -> None:
        self.span = span

    def on_completed(self, result: Any, error: Optional[BaseException]) -> None:
        span = self.span
        if error is not None:
            span.record_exception(error)
            span.set_attribute("error.type", error_type(error))
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        span.end()


class OpenTelemetryInstrumentation(DataLoaderInstrumentation):
    """A span per batch-function call (see the module notes for what it holds).

    Thread-safe; one instance may serve every loader of a process.

    Args:
        tracer_provider: where the tracer comes from; None: the global one
            (``opentelemetry.trace.set_tracer_provider``), looked up when a
            span is made, so it may be configured after this is created.

    Raises:
        TypeError: *tracer_provider* has no ``get_tracer``.
    """

    def __init__(self, tracer_provider: Optional[trace.TracerProvider] = None) -> None:
        if tracer_provider is not None and not callable(getattr(tracer_provider, "get_tracer", None)):
            raise TypeError("tracer_provider must be an opentelemetry TracerProvider or None")
        self._tracer = trace.get_tracer(_TRACER_NAME, tracer_provider=tracer_provider)

    def begin_batch(
        self,
        loader: DataLoader[Any, Any],
        keys: list[Any],
        environment: Optional[BatchLoaderEnvironment],
    ) -> Optional[DataLoaderInstrumentationContext]:
        name = loader_name(loader)
        span = self._tracer.start_span(  # parent: the span current here, on the dispatching thread
            f"dataloader.batch {name}",
            kind=SpanKind.INTERNAL,
            attributes={"dataloader.name": name, "dataloader.batch.size": len(keys)},
        )
        # begin_batch runs in the context the batch function will run in (a
        # copy made for this call), so the span is current there and nowhere
        # else; the copy is dropped with the call, so there is nothing to detach.
        otel_context.attach(trace.set_span_in_context(span))
        return _BatchSpan(span)

    def __repr__(self) -> str:
        return "OpenTelemetryInstrumentation()"

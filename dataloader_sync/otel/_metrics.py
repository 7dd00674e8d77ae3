"""OpenTelemetry metrics of DataLoader batches and value caches.

Guarantees:
- ``OpenTelemetryMetrics`` is a ``DataLoaderInstrumentation``: a loader (or a
  registry) given it records, with the attribute ``dataloader.name``:
  ``dataloader.batch.size`` (histogram, unit ``{key}``: the keys of one
  batch-function call; ``max_batch_size`` slices are calls of their own),
  ``dataloader.batch.duration`` (histogram, unit ``s``: from just before the
  call to the moment its keys are decided, as the batch span; a batch that
  failed as a whole also has ``error.type``, the exception's qualified class
  name, as the semantic conventions say for a failed operation; per-key
  errors are values of a successful batch) and
  ``dataloader.value_cache.lookups`` (counter, unit ``{lookup}``, one per key
  looked up in a ``value_cache=``, with ``dataloader.value_cache.result``
  ``"hit"`` or ``"miss"``).
- The observable gauge ``dataloader.value_cache.breaker_open`` (0 or 1, with
  ``dataloader.value_cache.name``) reports every live value-cache breaker of
  the process when the reader collects; it is registered once per meter,
  however many ``OpenTelemetryMetrics`` share it.
- The meter is ``dataloader_sync`` at the installed version, as the
  opentelemetry-instrumentation packages name theirs; histograms carry
  explicit bucket advice where the API supports it (opentelemetry-api 1.23+),
  and the SDK's default buckets otherwise.
- Nothing is recorded under a loader's lock, and nothing is recorded by a
  loader without this instrumentation: ``load()`` is unchanged.
"""
from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from importlib import metadata
from typing import Any, Optional

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Histogram, Meter, MeterProvider, Observation

from .._core import (
    BatchLoaderEnvironment,
    DataLoader,
    live_breakers,  # the core's, also dataloader_sync.live_breakers
)
from .._instrumentation import DataLoaderInstrumentation, DataLoaderInstrumentationContext
from ._spans import error_type, loader_name

__all__ = ["OpenTelemetryMetrics", "get_meter", "histogram"]

METER_NAME = "dataloader_sync"

# Bucket advice (seconds, keys): batch calls range from a dict lookup (well
# under a millisecond) to a slow query; batches from one key to thousands.
DURATION_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
SIZE_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000)


def _version() -> str:
    try:
        return metadata.version("dataloader_sync")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree
        return ""


def get_meter(meter_provider: Optional[MeterProvider]) -> Meter:
    """The library's meter from *meter_provider* (None: the global one, looked up now).

    Raises:
        TypeError: *meter_provider* has no ``get_meter``.
    """
    if meter_provider is not None and not callable(getattr(meter_provider, "get_meter", None)):
        raise TypeError("meter_provider must be an opentelemetry MeterProvider or None")
    return metrics.get_meter(METER_NAME, _version(), meter_provider=meter_provider)


def histogram(meter: Meter, name: str, unit: str, description: str, buckets: Sequence[float]) -> Histogram:
    """A histogram with explicit bucket advice; without it on an API older than 1.23."""
    try:
        return meter.create_histogram(name, unit=unit, description=description,
                                      explicit_bucket_boundaries_advisory=list(buckets))
    except TypeError:  # pragma: no cover - opentelemetry-api < 1.23 has no advice
        return meter.create_histogram(name, unit=unit, description=description)


# -- the breaker gauge ---------------------------------------------------------------------------
# One per meter: the SDK keeps the first registration of a name (and its
# callback), older SDKs would report twice.  Keyed weakly by the meter.
_breaker_meters: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
_breaker_meters_lock = threading.Lock()  # guards _breaker_meters


def breaker_observations(options: Optional[CallbackOptions] = None) -> Iterable[Observation]:
    """The gauge callback: 1 or 0 for each live value-cache breaker (`dataloader_sync.live_breakers`)."""
    return [Observation(1 if breaker.is_open else 0, {"dataloader.value_cache.name": breaker.name})
            for breaker in live_breakers()]


def _register_breaker_gauge(meter: Meter) -> None:
    with _breaker_meters_lock:
        try:
            if meter in _breaker_meters:
                return
            _breaker_meters[meter] = True
        except TypeError:  # pragma: no cover - a meter that cannot be weakly referenced: register anyway
            pass
    meter.create_observable_gauge(
        "dataloader.value_cache.breaker_open", callbacks=[breaker_observations], unit="",
        description="1 while the value cache's outage breaker is open (its calls are skipped), else 0.")


# -- the instrumentation ------------------------------------------------------------------------
class _BatchTimer:
    """The context of one batch call: records its duration when told."""

    __slots__ = ("duration", "attributes", "start")

    def __init__(self, duration: Histogram, attributes: dict[str, Any]) -> None:
        self.duration = duration
        self.attributes = attributes
        self.start = time.perf_counter()

    def on_completed(self, result: Any, error: Optional[BaseException]) -> None:
        elapsed = time.perf_counter() - self.start
        attributes = self.attributes
        if error is not None:
            attributes = {**attributes, "error.type": error_type(error)}
        self.duration.record(elapsed, attributes)


class OpenTelemetryMetrics(DataLoaderInstrumentation):
    """Histograms of batch sizes and durations, a counter of value-cache lookups.

    Give it to a loader or a registry (``instrumentation=``); chain it with
    the span instrumentation through ``ChainedInstrumentation([
    OpenTelemetryInstrumentation(), OpenTelemetryMetrics()])``.  See the
    module notes for the instruments and their attributes.

    Thread-safe; one instance may serve every loader of a process (the
    usual way: create it once, at start-up).

    Args:
        meter_provider: where the meter comes from; None: the global one
            (``opentelemetry.metrics.set_meter_provider``).  With the API's
            proxy provider, measurements made before an SDK provider is set
            are dropped, later ones are recorded.

    Raises:
        TypeError: *meter_provider* has no ``get_meter``.
    """

    def __init__(self, meter_provider: Optional[MeterProvider] = None) -> None:
        meter = get_meter(meter_provider)
        self._size = histogram(meter, "dataloader.batch.size", "{key}",
                               "Keys per call of a DataLoader's batch function.", SIZE_BUCKETS)
        self._duration = histogram(meter, "dataloader.batch.duration", "s",
                                   "Duration of a DataLoader's batch-function call, until its keys are decided.",
                                   DURATION_BUCKETS)
        self._lookups = meter.create_counter(
            "dataloader.value_cache.lookups", unit="{lookup}",
            description="Keys looked up in a DataLoader's value cache, by result (hit or miss).")
        _register_breaker_gauge(meter)

    def begin_batch(
        self,
        loader: DataLoader[Any, Any],
        keys: list[Any],
        environment: Optional[BatchLoaderEnvironment],
    ) -> Optional[DataLoaderInstrumentationContext]:
        attributes = {"dataloader.name": loader_name(loader)}
        self._size.record(len(keys), attributes)
        return _BatchTimer(self._duration, attributes)

    def value_cache_lookup(self, loader: DataLoader[Any, Any], hits: int, misses: int) -> None:
        name = loader_name(loader)
        if hits:
            self._lookups.add(hits, {"dataloader.name": name, "dataloader.value_cache.result": "hit"})
        if misses:
            self._lookups.add(misses, {"dataloader.name": name, "dataloader.value_cache.result": "miss"})

    def __repr__(self) -> str:
        return "OpenTelemetryMetrics()"

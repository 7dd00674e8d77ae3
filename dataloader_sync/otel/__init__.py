"""OpenTelemetry spans and metrics for DataLoader batches, value caches and executors.

``OpenTelemetryInstrumentation(tracer_provider=None)`` is a
``DataLoaderInstrumentation``: give it to a loader or a registry
(``instrumentation=``) and every batch-function call becomes a span
``"dataloader.batch <loader name>"`` under the span that was current where the
dispatch happened.  ``OpenTelemetryMetrics(meter_provider=None)`` records
batch sizes and durations and value-cache lookups; ``instrument_executor()``
reports a ScheduledExecutor's queued tasks, pool threads and queue wait.
Needs opentelemetry-api (``pip install "dataloader_sync[otel]"``); exporting
spans and metrics needs an SDK, as always.
"""
from __future__ import annotations

try:
    import opentelemetry.trace as _trace  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "dataloader_sync.otel needs opentelemetry-api: pip install \"dataloader_sync[otel]\""
    ) from exc

from ._executor_metrics import ExecutorInstrumentation as ExecutorInstrumentation
from ._executor_metrics import instrument_executor as instrument_executor
from ._metrics import OpenTelemetryMetrics as OpenTelemetryMetrics
from ._spans import OpenTelemetryInstrumentation as OpenTelemetryInstrumentation

__all__ = ["ExecutorInstrumentation", "OpenTelemetryInstrumentation", "OpenTelemetryMetrics", "instrument_executor"]

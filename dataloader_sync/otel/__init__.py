"""OpenTelemetry spans for DataLoader batches.

``OpenTelemetryInstrumentation(tracer_provider=None)`` is a
``DataLoaderInstrumentation``: give it to a loader or a registry
(``instrumentation=``) and every batch-function call becomes a span
``"dataloader.batch <loader name>"`` under the span that was current where the
dispatch happened.  Needs opentelemetry-api (``pip install
dataloader_sync[otel]``); exporting spans needs an SDK, as always.
"""
from __future__ import annotations

try:
    import opentelemetry.trace as _trace  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "dataloader_sync.otel needs opentelemetry-api: pip install dataloader_sync[otel]"
    ) from exc

from ._spans import OpenTelemetryInstrumentation as OpenTelemetryInstrumentation

__all__ = ["OpenTelemetryInstrumentation"]

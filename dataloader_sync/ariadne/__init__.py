"""Ariadne integration: its WSGI app with a fresh registry per request.

``GraphQL(schema, registry_factory=make_registry)`` is ``ariadne.wsgi.GraphQL``
executing with ``DataLoaderExecutionContext``, with the request's registry in
``info.context["loaders"]``, closed after the response.  Plain
``ariadne.graphql_sync`` needs nothing of this module: pass it
``execution_context_class=DataLoaderExecutionContext``.

Needs Ariadne (``pip install "dataloader_sync[ariadne]"``).
"""
from __future__ import annotations

try:
    import ariadne as _ariadne  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "dataloader_sync.ariadne needs Ariadne: pip install \"dataloader_sync[ariadne]\""
    ) from exc

from ._wsgi import GraphQL as GraphQL

__all__ = ["GraphQL"]

"""Per-request registries: what the Flask and Django integrations share.

Each request gets a registry from a user factory (fresh caches) and closes it
when the request ends.  Both steps are checked and logged the same way in
every integration, so they live here, in the core, which imports nothing of
the integrations.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

from ._registry import DataLoaderRegistry

__all__ = ["close_quietly", "make_request_registry"]

_LOGGER = logging.getLogger("dataloader_sync")


def make_request_registry(factory: Callable[..., Any], *args: Any) -> DataLoaderRegistry:
    """Return ``factory(*args)``, checked to be a registry.

    Raises:
        TypeError: the factory returned something else than a DataLoaderRegistry.
    """
    registry = factory(*args)
    if not isinstance(registry, DataLoaderRegistry):
        raise TypeError(
            f"the registry factory must return a DataLoaderRegistry, got {type(registry).__name__}"
        )
    return registry


def close_quietly(registry: DataLoaderRegistry) -> None:
    """Close *registry* at the end of a request; log (never raise) an error of ``close()``."""
    try:
        registry.close()
    except Exception:
        _LOGGER.exception("closing the request's DataLoaderRegistry %r raised", registry)

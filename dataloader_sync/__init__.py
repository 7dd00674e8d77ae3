"""dataloader_sync: batching and caching of loads for sync Python.

The core imports only the standard library; ``dataloader_sync.graphql``,
``dataloader_sync.flask`` and ``dataloader_sync.django`` are integrations,
imported only when used.
"""
from __future__ import annotations

__all__: list[str] = []

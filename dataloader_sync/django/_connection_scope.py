"""The seam between connection fields and the related loaders their resolvers use.

A relay connection field (graphene-django's, strawberry-django's) applies its
own arguments — a filterset, an order, ``first`` — to a queryset.  When its
resolver returns ``related_loader(registry, Author.books).load(author)``
instead, those arguments must reach the batch, or every parent would load
all its rows.  The connection field therefore installs a
:class:`ConnectionRequest` while its resolver runs (:func:`requesting`), and
``related_loader`` asks it first (:func:`connection_loader`): a request that
serves the relation returns the loader of the connection's own family (its
filtered, ordered queryset and its row limit), so the user's ``load`` goes
straight to it and no unfiltered load is ever queued.

Guarantees:
- Outside a connection field's resolver (no request installed), or for a
  relation whose related model is not the connection's, ``related_loader``
  behaves exactly as without this module.
- The request lives in a ``ContextVar``: it is seen by the resolver's own
  thread (and by ``then`` callbacks chained in it, which run in a copy of
  its context), by no other thread and no other field.
- This module imports nothing of ``dataloader_sync.django``'s loaders (they
  import it), so there is no import cycle.
"""
from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable, Optional, Protocol

from .._core import DataLoader
from .._registry import DataLoaderRegistry

__all__ = ["ConnectionRequest", "connection_loader", "requesting"]


class ConnectionRequest(Protocol):
    """What a connection field asks of the related loaders its resolver calls."""

    def loader_for(self, registry: DataLoaderRegistry, batch_fn: Callable[..., Any], field: Any,
                   queryset: Any) -> Optional[DataLoader[Any, Any]]:
        """The loader that serves ``related_loader(registry, field, queryset)`` for this connection.

        Args:
            registry: the registry ``related_loader`` was given.
            batch_fn: ``load_related``, the batch function the page loader calls.
            field: the relation descriptor (``Author.books``).
            queryset: the ``queryset=`` given to ``related_loader``, or None.

        Returns:
            The loader of the connection's family, or None when this request
            does not serve *field* (``related_loader`` then goes on as usual).
        """


_REQUEST: contextvars.ContextVar[Optional[ConnectionRequest]] = contextvars.ContextVar(
    "dataloader_sync_connection_request", default=None)


def connection_loader(registry: DataLoaderRegistry, batch_fn: Callable[..., Any], field: Any,
                      queryset: Any) -> Optional[DataLoader[Any, Any]]:
    """The loader a connection field being resolved wants for *field*, or None.

    Called by ``related_loader`` when it is given no ``first=``.
    """
    request = _REQUEST.get()
    if request is None:
        return None
    return request.loader_for(registry, batch_fn, field, queryset)


@contextmanager
def requesting(request: ConnectionRequest) -> Iterator[None]:
    """Install *request* for the ``related_loader`` calls made inside the ``with`` block."""
    token = _REQUEST.set(request)
    try:
        yield
    finally:
        _REQUEST.reset(token)

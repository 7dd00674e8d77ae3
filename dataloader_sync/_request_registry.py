"""Per-request registries: what the Flask, Django and Ariadne integrations share.

Each request gets a registry from a user factory (fresh caches) and closes it
when the request ends.  Both steps are checked and logged the same way in
every integration, so they live here, in the core, which imports nothing of
the integrations.

One calling convention on every helper: a factory that takes one positional
argument is called with the request (Django's ``HttpRequest``, Flask's
request, the WSGI environ under Ariadne); one that takes none
(``DataLoaderRegistry``, ``ScheduledDataLoaderRegistry`` themselves, a
``functools.partial`` of either) is called with nothing.  The signature is
read once, when the helper is set up, not on every request; so is what a
class makes: a class given as the factory must be a registry class (a
``DataLoader`` given by mistake is refused then, not at the first request).
"""
from __future__ import annotations

import functools
import inspect
import logging
from typing import Any, Callable

from ._core import check_sync
from ._registry import DataLoaderRegistry

__all__ = ["RequestFactory", "close_quietly", "make_request_registry"]

_LOGGER = logging.getLogger("dataloader_sync")


class RequestFactory:
    """A user's registry factory, called the one way every helper calls it.

    ``RequestFactory(make_registry, "factory")(request)`` returns
    ``make_registry(request)`` if it takes one positional argument, else
    ``make_registry()``; either way checked to be a registry.

    Thread-safe: immutable after construction.

    Args:
        factory: the user's callable.
        where: the parameter or setting it came from, for error messages.

    Raises:
        TypeError: *factory* is not callable, needs more than one argument,
            or is a class (or a ``functools.partial`` of one) that is not a
            ``DataLoaderRegistry`` subclass.
    """

    __slots__ = ("factory", "takes_request")

    def __init__(self, factory: Callable[..., Any], where: str) -> None:
        if not callable(factory):
            raise TypeError(f"{where} must be callable, got {type(factory).__name__}")
        check_sync(factory, where)
        _check_makes_registries(factory, where)
        self.factory = factory
        self.takes_request = _takes_request(factory, where)

    def __call__(self, request: Any) -> DataLoaderRegistry:
        """Return a new registry for *request* (passed only if the factory takes it).

        Raises:
            TypeError: the factory returned something else than a DataLoaderRegistry.
        """
        return make_request_registry(self.factory, request) if self.takes_request else make_request_registry(
            self.factory)

    def __repr__(self) -> str:
        return f"RequestFactory({self.factory!r}, takes_request={self.takes_request})"


def make_request_registry(factory: Callable[..., Any], *args: Any) -> DataLoaderRegistry:
    """Return ``factory(*args)``, checked to be a registry (for callers that know the factory's arguments).

    Raises:
        TypeError: the factory returned something else than a DataLoaderRegistry.
    """
    registry = factory(*args)
    if not isinstance(registry, DataLoaderRegistry):
        raise TypeError(
            f"the registry factory must return a DataLoaderRegistry, got {type(registry).__name__}"
        )
    return registry


def _check_makes_registries(factory: Callable[..., Any], where: str) -> None:
    made = factory
    while isinstance(made, functools.partial):
        made = made.func
    if isinstance(made, type) and not issubclass(made, DataLoaderRegistry):
        raise TypeError(
            f"{where} must make a DataLoaderRegistry, got the class {made.__qualname__}: a registry factory is "
            "a registry class (DataLoaderRegistry, ScheduledDataLoaderRegistry) or a function that returns a new "
            "registry, e.g. def make_registry(request): "
            "return DataLoaderRegistry().register(\"users\", DataLoader(load_users))"
        )


def _takes_request(factory: Callable[..., Any], where: str) -> bool:
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):  # no signature to read (some builtins): call it with nothing
        return False
    for args in ((None,), ()):
        try:
            signature.bind(*args)
        except TypeError:
            continue
        return bool(args)
    bare = signature.replace(  # the parameters without their annotations
        parameters=[p.replace(annotation=inspect.Parameter.empty) for p in signature.parameters.values()],
        return_annotation=inspect.Signature.empty,
    )
    raise TypeError(
        f"{where} must take the request or nothing, e.g. def make_registry(request): ... "
        f"or DataLoaderRegistry itself; {getattr(factory, '__qualname__', factory)!r} takes {bare}"
    )


def close_quietly(registry: DataLoaderRegistry) -> None:
    """Close *registry* at the end of a request; log (never raise) an error of ``close()``."""
    try:
        registry.close()
    except Exception:
        _LOGGER.exception("closing the request's DataLoaderRegistry %r raised", registry)

"""GraphQL: Ariadne's WSGI app with a fresh DataLoaderRegistry per request.

Ariadne has no per-request teardown: a registry made in a ``context_value``
callable is never closed, so a ticker registry keeps its tick pending until
the garbage collector finds it.  This app makes the registry when a request
first needs a context (a GraphQL query; the explorer page and refused
methods make none), keeps it in the WSGI environ under
:data:`ENVIRON_KEY`, and closes it when ``__call__`` returns.

Guarantees:
- One registry per request, made by ``registry_factory(environ)`` and found
  by resolvers as ``info.context["loaders"]``; the rest of the context is
  Ariadne's (``{"request": environ}`` by default, or what the
  ``context_value`` option gives).
- Executions use ``DataLoaderExecutionContext`` unless
  ``execution_context_class`` is given (on graphql-core 3.3 Ariadne passes
  it as ``executor_class``).
- The registry is closed when the response is complete — Ariadne's WSGI app
  returns the whole body as a list — also when the request fails (a
  ``GraphQLError`` or ``HttpError`` answered by Ariadne, or an exception
  that escapes to the server).  An error of ``close()`` is logged, never
  raised.
"""
from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any, Callable

from ariadne.wsgi import GraphQL as _AriadneGraphQL

from .._registry import DataLoaderRegistry
from .._request_registry import RequestFactory, close_quietly

__all__ = ["ENVIRON_KEY", "GraphQL"]

#: The WSGI environ key holding the request's registry while it is served.
ENVIRON_KEY = "dataloader_sync.loaders"

#: What the app calls once per GraphQL request: ``factory(environ)`` or ``factory()``.
RegistryFactory = Callable[..., DataLoaderRegistry]


class GraphQL(_AriadneGraphQL):
    """``ariadne.wsgi.GraphQL`` with dataloaders: a registry per request, closed after it.

    ``GraphQL(schema, registry_factory=make_registry, debug=True)``; resolvers
    call ``info.context["loaders"]["users"].load(user_id)``.  Every other
    keyword is Ariadne's own (``context_value``, ``extensions``,
    ``middleware``, ``error_formatter``...).

    A ``context_value`` given as a dict is copied for each request before the
    registry is added; one given as a callable ``(environ, data)`` should
    return a fresh dict (the registry is added to it) or an object (the
    registry is set as its ``loaders`` attribute, which
    ``DataLoaderExecutionContext`` finds as well as the key).

    Thread-safe: one app serves any number of request threads; each
    request's registry lives in that request's environ.

    Args:
        schema: the executable schema (``make_executable_schema``).
        registry_factory: returns a new ``DataLoaderRegistry`` (typically a
            ``ScheduledDataLoaderRegistry``) with fresh loaders; called with
            the request (the WSGI environ) if it takes one argument, so that
            loaders may depend on it, else with nothing
            (``DataLoaderRegistry`` itself will do).
        **options: ``ariadne.wsgi.GraphQL``'s keyword arguments.

    Raises:
        TypeError: *registry_factory* is not callable or takes more than
            one argument (at construction); the
            factory returned something else than a registry, or the context
            cannot hold it (when a request is served).
    """

    def __init__(self, schema: Any, *, registry_factory: RegistryFactory, **options: Any) -> None:
        self._make = RequestFactory(registry_factory, "registry_factory")
        if options.get("execution_context_class") is None:
            from ..graphql import DataLoaderExecutionContext

            options["execution_context_class"] = DataLoaderExecutionContext
        super().__init__(schema, **options)
        self.registry_factory = registry_factory

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        """Serve one request, then close the registry it made (if it made one)."""
        try:
            response: list[bytes] = super().__call__(environ, start_response)
            return response
        finally:
            registry = environ.pop(ENVIRON_KEY, None)
            if registry is not None:
                close_quietly(registry)

    def get_context_for_request(self, environ: dict[str, Any], data: Any) -> Any:
        """Ariadne's context for the request, with the request's registry as ``loaders``.

        Raises:
            TypeError: the factory returned something else than a registry,
                or the context can hold it neither as a key nor as an attribute.
        """
        context: Any = super().get_context_for_request(environ, data)
        registry = environ.get(ENVIRON_KEY)
        if registry is None:
            registry = self._make(environ)
            environ[ENVIRON_KEY] = registry
        if not callable(self.context_value) and isinstance(context, Mapping):
            # A static dict serves every request: each gets its own copy.
            return {**context, "loaders": registry}
        if isinstance(context, MutableMapping):
            context["loaders"] = registry
            return context
        try:
            context.loaders = registry
        except AttributeError:
            raise TypeError(
                f"the context ({type(context).__name__}) can hold the registry neither as a "
                "'loaders' key nor as a 'loaders' attribute"
            ) from None
        return context

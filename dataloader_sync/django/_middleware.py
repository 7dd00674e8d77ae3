"""DataLoaderMiddleware: one registry per Django request, as ``request.loaders``.

Guarantees:
- Every request gets a new registry from ``DATALOADER_SYNC_REGISTRY_FACTORY``
  (fresh loaders, fresh caches) before the view runs.
- The registry is closed when the response is closed, that is when the server
  has sent the whole body: ``response.close()`` is the one per-response hook
  that WSGI servers (PEP 3333), Django's ASGI handler and the test client all
  call, after a streaming body has been consumed too.  The middleware appends
  the close to ``response._resource_closers``, the list ``close()`` runs; the
  ``request_finished`` signal was not used because it is process-wide and
  carries no request, so a handler could not tell which registry to close
  when requests run on several threads.  If the view raises past Django's
  exception handling, the registry is closed at once.
- The middleware is sync-only; under ASGI Django runs it on a thread, and
  batch functions without an executor run on that thread with the ORM.
- The first response of a graphene-django ``GraphQLView`` that ignores
  ``DATALOADER_SYNC_AUTO_RELATIONS = True`` (see ``_view_checks``) warns
  once (``RuntimeWarning``) naming ``dataloader_sync.django.GraphQLView``.
  The view is read off ``request.resolver_match`` after the response, not in
  a ``process_view`` hook: a hook is one more call per request, and under
  ASGI Django would adapt this sync-only one to a thread on every request.
  Where warnings are errors, the response is closed (so is the registry)
  and the warning raised.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from .._request_registry import close_quietly
from ._registry_factory import get_registry_factory
from ._view_checks import ViewsSeen

__all__ = ["DataLoaderMiddleware"]


class DataLoaderMiddleware:
    """Django middleware giving each request its own registry as ``request.loaders``.

    Add ``"dataloader_sync.django.DataLoaderMiddleware"`` to ``MIDDLEWARE`` and
    set ``DATALOADER_SYNC_REGISTRY_FACTORY = "myapp.loaders.make_registry"``,
    a function ``make_registry(request) -> DataLoaderRegistry`` (or one
    taking nothing: ``"dataloader_sync.DataLoaderRegistry"`` will do).  With
    graphene-django, whose ``GraphQLView`` passes the request as context,
    resolvers reach the registry as ``info.context.loaders``.

    Thread-safe: Django calls one instance from every request thread; the
    instance holds only the factory, each request its own registry.

    Args:
        get_response: the next handler, as Django passes it.

    Raises:
        ImproperlyConfigured: the setting is missing or names no callable
        (at startup, when Django builds the middleware chain).
    """

    sync_capable = True
    async_capable = False

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response
        self.factory = get_registry_factory()
        self.views_seen = ViewsSeen()

    def __call__(self, request: Any) -> Any:
        """Run the request with a new registry on ``request.loaders``; close it with the response.

        Raises:
            TypeError: the factory did not return a DataLoaderRegistry.
            RuntimeWarning: where warnings are errors, at the first response of a
                graphene-django view that ignores ``DATALOADER_SYNC_AUTO_RELATIONS``.
        """
        registry = self.factory(request)
        request.loaders = registry
        try:
            response = self.get_response(request)
        except BaseException:
            close_quietly(registry)
            raise
        closers = getattr(response, "_resource_closers", None)
        if closers is None:  # not an HttpResponseBase: nothing will call close() for us
            close_quietly(registry)
        else:
            closers.append(functools.partial(close_quietly, registry))
        match = getattr(request, "resolver_match", None)
        if match is not None and match.func not in self.views_seen.views:
            try:
                self.views_seen.first_response(match)
            except BaseException:
                if closers is not None:
                    response.close()  # runs the closers: the registry's too
                raise
        return response

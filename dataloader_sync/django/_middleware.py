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
- Sync and async capable (Django's middleware protocol): under WSGI it is a
  plain sync middleware; under ASGI, above an async handler, it runs on the
  event loop's thread with no thread hop (a sync-only middleware there costs
  every request a hand-off to a thread and back: docs/asgi.rst has the
  figure).  The factory then runs on the loop's thread too: one that
  queries the database (``request.user.is_staff`` before the session is
  loaded) fails at once with ``SynchronousOnlyOperation``, its message
  naming the setting and the fix.
- The first response of a graphene-django ``GraphQLView`` that ignores
  ``DATALOADER_SYNC_AUTO_RELATIONS = True`` (see ``_view_checks``) warns
  once (``RuntimeWarning``) naming ``dataloader_sync.django.GraphQLView``.
  The view is read off ``request.resolver_match`` after the response, not in
  a ``process_view`` hook, which would be one more call per request.  Where
  warnings are errors, the response is closed (so is the registry) and the
  warning raised.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.core.exceptions import SynchronousOnlyOperation

from .._request_registry import close_quietly
from ._registry_factory import SETTING, get_registry_factory
from ._view_checks import ViewsSeen

__all__ = ["FACTORY_ON_THE_LOOP", "DataLoaderMiddleware"]

FACTORY_ON_THE_LOOP = (
    f"{SETTING} queried the database on the event loop's thread: under ASGI DataLoaderMiddleware calls it"
    " there; build the registry without queries (hand request.user to the loaders unevaluated and read it in"
    " their batch functions, which run off the loop)"
)


class DataLoaderMiddleware:
    """Django middleware giving each request its own registry as ``request.loaders``.

    Add ``"dataloader_sync.django.DataLoaderMiddleware"`` to ``MIDDLEWARE`` and
    set ``DATALOADER_SYNC_REGISTRY_FACTORY = "myapp.loaders.make_registry"``,
    a function ``make_registry(request) -> DataLoaderRegistry`` (or one
    taking nothing: ``"dataloader_sync.DataLoaderRegistry"`` will do).  With
    graphene-django, whose ``GraphQLView`` passes the request as context,
    resolvers reach the registry as ``info.context.loaders``.

    Thread-safe: Django calls one instance from every request thread (or
    from the event loop's, under ASGI); the instance holds only the factory,
    each request its own registry.

    Args:
        get_response: the next handler, as Django passes it.

    Raises:
        ImproperlyConfigured: the setting is missing or names no callable
        (at startup, when Django builds the middleware chain).
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response
        self.factory = get_registry_factory()
        self.views_seen = ViewsSeen()
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:  # Django then awaits us: no thread hop (module notes)
            markcoroutinefunction(self)

    def __call__(self, request: Any) -> Any:
        """Run the request with a new registry on ``request.loaders``; close it with the response.

        Raises:
            TypeError: the factory did not return a DataLoaderRegistry.
            RuntimeWarning: where warnings are errors, at the first response of a
                graphene-django view that ignores ``DATALOADER_SYNC_AUTO_RELATIONS``.
        """
        if self.is_async:
            return self._acall(request)
        registry = self.factory(request)
        request.loaders = registry
        try:
            response = self.get_response(request)
        except BaseException:
            close_quietly(registry)
            raise
        return self._finish(request, _close_with(response, registry))

    async def _acall(self, request: Any) -> Any:
        try:
            registry = self.factory(request)
        except SynchronousOnlyOperation as exc:
            raise SynchronousOnlyOperation(FACTORY_ON_THE_LOOP) from exc
        request.loaders = registry
        try:
            response = await self.get_response(request)
        except BaseException:
            close_quietly(registry)
            raise
        return self._finish(request, _close_with(response, registry))

    def _finish(self, request: Any, response: Any) -> Any:
        """The response, once its first view of a kind was looked at (``_view_checks``)."""
        match = getattr(request, "resolver_match", None)
        if match is not None and match.func not in self.views_seen.views:
            try:
                self.views_seen.first_response(match)
            except BaseException:
                if getattr(response, "_resource_closers", None) is not None:
                    response.close()  # runs the closers: the registry's too
                raise
        return response


def _close_with(response: Any, registry: Any) -> Any:
    """Have *registry* closed when *response* is (at once if nothing will close *response*)."""
    closers = getattr(response, "_resource_closers", None)
    if closers is None:  # not an HttpResponseBase: nothing will call close() for us
        close_quietly(registry)
    else:
        closers.append(functools.partial(close_quietly, registry))
    return response

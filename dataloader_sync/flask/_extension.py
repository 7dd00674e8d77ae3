"""DataLoaders: the Flask extension that gives each request its own registry.

A registry holds the request's loaders and so the request's caches: sharing
one between requests would let one user see values loaded for another, and
would keep every value ever loaded.  The extension builds a registry with the
user's factory the first time a request asks for it, keeps it on ``flask.g``,
and closes it when the request (or, outside a request, the app context) ends.

Guarantees:
- One registry per request: ``get_registry()`` returns the same registry for
  the whole request, and a new one for the next request, even when several
  requests share one app context (a registry is dropped at
  ``teardown_request``, not only at ``teardown_appcontext``).
- Closed at teardown, whatever happened: teardown functions run after
  unhandled exceptions too (every registry has ``close()``; a
  ``ScheduledDataLoaderRegistry``'s cancels its pending tick).  An error from
  ``close()`` is logged, never raised into Flask.
- The factory runs outside any lock; if two threads of one request race the
  first ``get_registry()``, one registry wins and the other is closed at once.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import flask

from .._registry import DataLoaderRegistry
from .._request_registry import RequestFactory, close_quietly

__all__ = ["DataLoaders"]


#: The name of the ``flask.g`` attribute holding ``{extension: registry}``.
_G_KEY = "_dataloader_sync_registries"

#: The key of the extension in ``app.extensions``.
EXTENSION_KEY = "dataloader_sync"


class DataLoaders:
    """Gives each Flask request its own ``DataLoaderRegistry``, closed at teardown.

    ``DataLoaders(app, factory=make_registry)`` or, with an application
    factory, ``loaders = DataLoaders(factory=make_registry)`` then
    ``loaders.init_app(app)``.  In a view or resolver,
    ``loaders.get_registry()`` returns the current request's registry
    (``graphql_view`` puts it in ``info.context.loaders``).

    Thread-safe: one extension serves any number of request threads; its own
    state is set once, each request's registry lives on that request's
    ``flask.g``.

    Args:
        app: the Flask app to set up now (or call ``init_app`` later).
        factory: called once per request that needs loaders, with the
            request (``flask.request``; None in an app context without a
            request) if it takes one argument, else with nothing; returns a
            new ``DataLoaderRegistry`` (typically a
            ``ScheduledDataLoaderRegistry``) with fresh loaders.
            ``DataLoaderRegistry`` itself will do.

    Raises:
        TypeError: *factory* is not callable or takes more than one
            argument, or *app* is not a ``flask.Flask``.
    """

    def __init__(self, app: Optional[flask.Flask] = None, *, factory: Callable[..., DataLoaderRegistry]) -> None:
        self._make = RequestFactory(factory, "factory")
        self._factory = factory
        if app is not None:
            self.init_app(app)

    @property
    def factory(self) -> Callable[..., DataLoaderRegistry]:
        """The registry factory given to the constructor."""
        return self._factory

    def init_app(self, app: flask.Flask) -> None:
        """Register the teardown hooks on *app* and record the extension in ``app.extensions``.

        Args:
            app: the Flask application.

        Raises:
            TypeError: *app* is not a ``flask.Flask``.
            RuntimeError: another ``DataLoaders`` is already set up on *app*.
        """
        if not isinstance(app, flask.Flask):
            raise TypeError(f"app must be a flask.Flask, got {type(app).__name__}")
        other = app.extensions.get(EXTENSION_KEY)
        if other is self:
            return
        if other is not None:
            raise RuntimeError("another DataLoaders extension is already set up on this app")
        app.extensions[EXTENSION_KEY] = self
        # Both hooks: teardown_request keeps requests that share an app
        # context apart; teardown_appcontext covers registries made outside
        # a request (CLI commands, app.app_context() blocks).
        app.teardown_request(self._teardown)
        app.teardown_appcontext(self._teardown)

    def get_registry(self) -> DataLoaderRegistry:
        """Return the current request's registry, creating it on first use.

        Returns:
            the registry made by the factory for this request (or app context).

        Raises:
            RuntimeError: called outside a Flask app or request context, or
                on an app this extension was not set up on.
            TypeError: the factory did not return a DataLoaderRegistry.
        """
        if not flask.has_app_context():
            raise RuntimeError("get_registry() needs a Flask request or app context")
        if flask.current_app.extensions.get(EXTENSION_KEY) is not self:
            # Without our teardown hooks the registry would never be closed.
            raise RuntimeError("this DataLoaders extension is not set up on the current app; call init_app(app)")
        registries: dict[DataLoaders, DataLoaderRegistry] = flask.g.setdefault(_G_KEY, {})
        registry = registries.get(self)
        if registry is not None:
            return registry
        made = self._make(current_request() if self._make.takes_request else None)
        registry = registries.setdefault(self, made)  # atomic: one winner if threads race
        if registry is not made:
            close_quietly(made)
        return registry

    def _teardown(self, exc: Optional[BaseException] = None) -> None:
        registries = flask.g.get(_G_KEY)
        if not registries:
            return
        registry = registries.pop(self, None)
        if registry is not None:
            close_quietly(registry)

    def __repr__(self) -> str:
        return f"<DataLoaders factory={getattr(self._factory, '__qualname__', self._factory)!r}>"


def current_request() -> Any:
    """The request being served (the object, not the context-local proxy), or None outside one."""
    if not flask.has_request_context():
        return None
    # werkzeug's documented accessor: resolvers may run on other threads.
    return flask.request._get_current_object()  # type: ignore[attr-defined]

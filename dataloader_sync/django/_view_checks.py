"""Views that ignore ``DATALOADER_SYNC_AUTO_RELATIONS``: a system check and a first-response warning.

The setting is read by ``dataloader_sync.django.GraphQLView`` (and
``DataLoaderGraphQLViewMixin``) alone.  graphene-django's own ``GraphQLView``
given no ``execution_context_class`` executes with graphql-core's: right
data, one statement per relation per row, and nothing said.  That mistake is
named in two places:

- the system check ``dataloader_sync.W001`` (``manage.py check``, and
  ``runserver`` at start), registered by the ``dataloader_sync.django`` app
  when it is in ``INSTALLED_APPS``: it walks the URLconf;
- ``DataLoaderMiddleware``, at the first response of each such view: one
  ``RuntimeWarning``.  The middleware is what the getting-started settings
  install, so this reaches a project that does not install the app.

Guarantees:
- A view is named when the setting is True and its view class derives from
  graphene-django's ``GraphQLView``, not from ``DataLoaderGraphQLViewMixin``,
  and neither ``as_view(execution_context_class=...)`` nor the class sets an
  execution context class (one given is the user's choice, as it is for our
  view).
- graphene-django is never imported here: a view class can derive from its
  ``GraphQLView`` only if ``graphene_django.views`` is imported already.
- The middleware's cost per request: one attribute read and one set look-up
  (``ViewsSeen``); a view is looked at once per middleware (so once per
  process), and the setting read only for a graphene-django view.
"""
from __future__ import annotations

import sys
import threading
import warnings
from collections.abc import Iterator
from typing import Any, Callable, Optional

__all__ = ["CHECK_ID", "ViewsSeen", "check_views", "ignored_setting_message"]

#: The id of the system check's warning.
CHECK_ID = "dataloader_sync.W001"

_BASE = "graphene_django.views.GraphQLView"
_HINT = ("Use dataloader_sync.django.GraphQLView (or put dataloader_sync.django.DataLoaderGraphQLViewMixin "
         "first in the view's bases), or give the view "
         "execution_context_class=dataloader_sync.graphql.AutoRelationsExecutionContext.")


def _view_class(view: Callable[..., Any]) -> Optional[type]:
    """The class ``as_view()`` made *view* from, through decorators that keep ``__wrapped__``."""
    layer: Any = view
    for _ in range(100):  # a bound on __wrapped__ chains, as inspect.unwrap has
        if layer is None:
            break
        found = getattr(layer, "view_class", None)
        if isinstance(found, type):
            return found
        layer = getattr(layer, "__wrapped__", None)
    return None


def _ignoring_class(view: Callable[..., Any]) -> Optional[type]:
    """*view*'s class if it is a graphene-django ``GraphQLView`` that ignores the setting, else None."""
    views = sys.modules.get("graphene_django.views")
    view_class = _view_class(view)
    if views is None or view_class is None or not issubclass(view_class, views.GraphQLView):
        return None
    from ._view import DataLoaderGraphQLViewMixin

    if issubclass(view_class, DataLoaderGraphQLViewMixin):
        return None
    initkwargs = getattr(view, "view_initkwargs", None) or {}
    if initkwargs.get("execution_context_class") or getattr(view_class, "execution_context_class", None):
        return None
    return view_class


def _problem(view_class: type, route: str) -> str:
    name = f"{view_class.__module__}.{view_class.__qualname__}"
    if name != _BASE:
        name = f"{name} (a {_BASE} without DataLoaderGraphQLViewMixin)"
    return (f"DATALOADER_SYNC_AUTO_RELATIONS = True has no effect on the view at {route!r}: {name} "
            f"executes without dataloader_sync, so every relation costs one statement per row.")


def ignored_setting_message(view_class: type, route: str) -> str:
    """The warning's text for *view_class* served at *route*: the problem, then the fix."""
    return f"{_problem(view_class, route)} {_HINT}"


def _patterns(patterns: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(route, callback) of every URL pattern under *patterns*, ``include()`` d ones too."""
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if hasattr(pattern, "url_patterns"):  # a URLResolver (include)
            yield from _patterns(pattern.url_patterns, route)
        else:
            yield route, pattern.callback


def check_views(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """The system check ``dataloader_sync.W001``: every URL whose view ignores the setting.

    Registered (tag ``urls``) by the ``dataloader_sync.django`` app's ``ready()``.

    Raises:
        ImproperlyConfigured: the setting is not a bool.
    """
    from django.core import checks
    from django.urls import get_resolver

    from ._view import auto_relations_setting

    if not auto_relations_setting():
        return []
    found = []
    for route, callback in _patterns(get_resolver().url_patterns):
        view_class = _ignoring_class(callback)
        if view_class is not None:
            found.append(checks.Warning(_problem(view_class, route), hint=_HINT, obj=view_class, id=CHECK_ID))
    return found


class ViewsSeen:
    """The views ``DataLoaderMiddleware`` has answered for; warns at the first response of one ignoring
    the setting.

    Thread-safe: ``_lock`` guards the adding to ``views`` (so a view is looked at once); a look-up
    needs no lock (a set's ``in`` is atomic), and a view already in ``views`` was looked at.
    """

    __slots__ = ("_lock", "views")

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards the adding to views
        self.views: set[Any] = set()

    def first_response(self, match: Any) -> None:
        """Look at *match*'s view (a ``ResolverMatch`` not yet in ``views``); warn if it ignores the setting.

        Raises:
            RuntimeWarning: where warnings are errors, the warning itself.
            ImproperlyConfigured: the setting is not a bool.
        """
        view = match.func
        with self._lock:
            if view in self.views:
                return
            self.views.add(view)
        view_class = _ignoring_class(view)
        if view_class is None:
            return
        from ._view import auto_relations_setting

        if auto_relations_setting():  # read only here: other views never see a wrong setting fail
            route = match.route or match.view_name or getattr(view, "__name__", "?")
            warnings.warn(ignored_setting_message(view_class, route), RuntimeWarning, stacklevel=2)

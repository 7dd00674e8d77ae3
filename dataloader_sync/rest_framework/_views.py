"""``AutoRelationsMixin`` and ``batched_data``: a serializer's output read breadth-first.

Both install ``BatchedRepresentation`` on one serializer object, as its
``to_representation`` *instance attribute*: ``serializer.data`` calls
``self.to_representation(self.instance)``, which then finds it before the
class's method.  It walks the serializer over the instance (``_walk``:
every relation it reads loaded for a whole level in one statement), calls
the class's ``to_representation`` as REST framework would, and settles the
loader futures that ``SerializerMethodField`` methods returned
(``_futures``).  During REST framework's pass the walk's levels are current
(``_walk.Levels``): a related manager's queryset that a method or a property
evaluates in place (``author.books.count()``, ``.filter(...).first()``,
iteration) is answered for its whole level in one statement per query shape
(``dataloader_sync.django._inplace``, the seam Django's auto relations
install), and ``FETCH_LEVEL`` (Django >= 6.1) finds its peers there.  Under
``DATALOADER_SYNC_REST_FRAMEWORK_STRICT`` REST framework's
pass raises on a statement run once per row (``_strict``).  Nothing else changes: the serializer's class, its fields,
its validation and saving are REST framework's; a serializer that was not
given to them behaves exactly as before (nothing of REST framework is
patched; the in-place seam on Django's ``QuerySet`` is inert outside a pass).

- ``AutoRelationsMixin.get_serializer`` installs it on every serializer the
  view's ``get_serializer`` makes: what ``list``, ``retrieve``, ``create``,
  ``update`` and pagination serialize, and a view's own methods that call
  ``get_serializer``.  Writes are untouched: the walk runs when ``.data`` is
  read (after ``save()``, on the saved instance), never before validation.
- ``AutoRelationsMixin.paginate_queryset`` joins into the queryset a page
  is cut from the to-one hops the view's serializer reads (``_joins``):
  REST framework's paginators hand the serializer a list, too late to join.
- ``batched_data(serializer)`` installs it and returns ``serializer.data``.

The registry: the serializer context's ``request.loaders`` (set by
``dataloader_sync.django.DataLoaderMiddleware``; REST framework's
``Request`` reads it from Django's request) or its ``"loaders"`` key, left
open; without one, each ``to_representation`` call makes one and closes it.

REST framework behaviour relied on (3.14 to 3.18): ``BaseSerializer.data``
calls ``self.to_representation(self.instance)`` (an attribute lookup, so an
instance attribute is found first), and a class's ``super().to_representation``
does not (so the hook runs once per ``.data``).

Guarantees:
- The hook holds the serializer weakly (a serializer does not reference
  itself through it: freed by reference counting).
- A class listing ``AutoRelationsMixin`` after ``GenericAPIView`` (whose
  ``get_serializer`` would then run instead of ours), or a plain ``APIView``
  (which has no ``get_serializer``), is refused when the class is made,
  naming the fix.
"""
from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any, Callable, Optional, TypeVar

from rest_framework.generics import GenericAPIView
from rest_framework.pagination import CursorPagination, LimitOffsetPagination, PageNumberPagination
from rest_framework.serializers import BaseSerializer
from rest_framework.views import APIView

from .._core import reset_scope, set_scope
from .._execution_levels import reset_levels, set_levels
from .._registry import DataLoaderRegistry
from .._request_registry import close_quietly
from ..django import _inplace
from ..django._planned_querysets import total_order
from ._futures import settle
from ._joins import plannable, planned
from ._strict import rows_checked
from ._walk import Levels, prepare

__all__ = ["AutoRelationsMixin", "BatchedRepresentation", "batched_data", "batching", "registry_of"]

S = TypeVar("S")


def registry_of(context: Any) -> Optional[DataLoaderRegistry]:
    """The request's registry in a serializer context: ``context["request"].loaders``, else ``context["loaders"]``."""
    if not isinstance(context, Mapping):
        return None
    loaders = getattr(context.get("request"), "loaders", None)
    if isinstance(loaders, DataLoaderRegistry):
        return loaders
    loaders = context.get("loaders")
    return loaders if isinstance(loaders, DataLoaderRegistry) else None


class _Serializing:
    """The dispatch scope of one serialization (``_core._dispatch_scope``): it dispatches its loaders itself,
    so a ticker-mode registry's tick leaves them to it instead of splitting a level into several batches."""

    __slots__ = ("dispatches_itself",)

    def __init__(self) -> None:
        self.dispatches_itself = True

    def loader_queued(self, loader: Any) -> None:
        """Nothing to note: the walk dispatches each round's loaders itself."""

    def dispatched_by_a_wait(self, loader: Any) -> None:
        """Nothing to note: the walk never waits on a key it did not dispatch."""


class BatchedRepresentation:
    """A serializer's ``to_representation``, with its relations loaded level by level first.

    Thread-safe as the serializer it serves is (a serializer is used by one request).
    """

    __slots__ = ("_method", "_serializer")

    def __init__(self, serializer: BaseSerializer) -> None:
        self._serializer = weakref.ref(serializer)
        self._method: Callable[[Any, Any], Any] = type(serializer).to_representation

    def __call__(self, instance: Any) -> Any:
        serializer = self._serializer()
        assert serializer is not None  # its own attribute: it is being called on it
        registry = registry_of(serializer.context)
        own = registry is None
        if registry is None:
            registry = DataLoaderRegistry()
        token = set_scope(_Serializing())
        try:
            methods, levels = prepare(serializer, instance, registry)
            data = _serialized(self._method, serializer, instance, levels)
            if methods:
                settle(data, registry)
            return data
        finally:
            reset_scope(token)
            if own:
                close_quietly(registry)


def _serialized(method: Callable[[Any, Any], Any], serializer: Any, instance: Any, levels: Optional[Levels]) -> Any:
    """REST framework's own pass, with the walk's levels current: relations evaluated in place
    (``author.books.count()`` in a method) answered once per level (``_inplace``), ``FETCH_LEVEL``'s peers."""
    if levels is None:
        with rows_checked(serializer, instance):
            return method(serializer, instance)
    token = set_levels(levels)
    end = _inplace.start(levels)
    try:
        with rows_checked(serializer, instance):
            return method(serializer, instance)
    finally:
        if end is not None:
            end()
        reset_levels(token)


def batching(serializer: S) -> S:
    """*serializer*, whose ``.data`` (its ``to_representation``) serializes breadth-first from now on."""
    if not isinstance(serializer, BaseSerializer):
        raise TypeError(f"serializer must be a REST framework serializer (got {type(serializer).__name__})")
    if not isinstance(serializer.__dict__.get("to_representation"), BatchedRepresentation):
        serializer.to_representation = BatchedRepresentation(serializer)
    return serializer


def batched_data(serializer: BaseSerializer) -> Any:
    """What ``serializer.data`` returns, with the relations it reads loaded one statement per relation per level.

    For serializers made outside a view's ``get_serializer`` (an ``APIView``
    building ``AuthorSerializer(qs, many=True)``, a task, a test):
    ``return Response(batched_data(AuthorSerializer(qs, many=True, context={"request": request})))``.
    The registry is the context's ``request.loaders`` or ``"loaders"``; with
    none, one is made and closed when the data is made.

    Args:
        serializer: a REST framework serializer (``many=True`` or not).

    Returns:
        ``serializer.data``: equal to what it returns without this function.

    Raises:
        TypeError: *serializer* is not a serializer.
    """
    return batching(serializer).data


class AutoRelationsMixin:
    """A ``GenericAPIView`` or viewset mixin: the serializers ``get_serializer`` makes serialize breadth-first.

    List it first: ``class AuthorViewSet(AutoRelationsMixin, ModelViewSet)``.
    The relations the serializer reads (nested serializers, ``depth``,
    ``source=`` paths, relational fields) cost one statement per relation per
    level, for a list, a page or one object; the output is what REST framework
    makes without it.  Serializers a view builds itself are not seen: give
    them to ``batched_data``.

    Raises:
        TypeError: when a class lists it after ``GenericAPIView`` in its bases,
            or is an ``APIView`` that is not a ``GenericAPIView``.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not issubclass(cls, APIView):
            return  # a mixin of the user's, made of this one
        name = cls.__name__
        if not issubclass(cls, GenericAPIView):
            raise TypeError(f"AutoRelationsMixin works through get_serializer(), which {name} (an APIView) has "
                            "not: return Response(batched_data(serializer)) in its methods instead")
        mro = cls.__mro__
        if mro.index(GenericAPIView) < mro.index(AutoRelationsMixin):
            raise TypeError(f"AutoRelationsMixin must come before GenericAPIView in the bases of {name}: "
                            f"class {name}(AutoRelationsMixin, ...)")

    def get_serializer(self, *args: Any, **kwargs: Any) -> Any:
        """``GenericAPIView.get_serializer``'s serializer, serializing breadth-first (``batching``)."""
        serializer = super().get_serializer(*args, **kwargs)  # type: ignore[misc]
        return batching(serializer) if isinstance(serializer, BaseSerializer) else serializer

    def paginate_queryset(self, queryset: Any) -> Any:
        """``GenericAPIView.paginate_queryset``'s page, cut from *queryset* joined to the to-one hops the
        view's serializer reads (``_joins``), when the paginator is one of REST framework's and the order
        the page is cut in is total (the primary key last): the page holds the same rows."""
        return super().paginate_queryset(_page_planned(self, queryset))  # type: ignore[misc]


#: The paginators whose page is a slice of the queryset given, in its order (the cursor's: its own).
_SLICING = (PageNumberPagination, LimitOffsetPagination, CursorPagination)


def _page_planned(view: Any, queryset: Any) -> Any:
    """*queryset* joined for the page *view* is about to cut of it, or *queryset* itself (see
    ``AutoRelationsMixin.paginate_queryset``)."""
    paginator = view.paginator
    if not plannable(queryset) or not isinstance(paginator, _SLICING):
        return queryset
    ordered = queryset
    if isinstance(paginator, CursorPagination):  # the cursor orders the queryset itself
        ordered = queryset.order_by(*paginator.get_ordering(view.request, queryset, view))
    if not total_order(ordered):
        return queryset
    try:
        serializer = view.get_serializer()  # the serializer list() makes for the page, without its rows
    except Exception:  # one that needs its instance: the walk loads the page's hops instead
        return queryset
    return planned(queryset, serializer)

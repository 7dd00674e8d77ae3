"""Querysets a resolver on a strawberry-django type returns, loaded for the whole level.

A field with a resolver of its own (a ``@strawberry_django.field`` or
``@strawberry.field`` method) runs it as written, for every parent, and
strawberry-django does to its result what it does without the switch (the
field's ``get_queryset``: the type's ``get_queryset``, permissions, filters,
order, pagination).  The unevaluated queryset that comes out is then given to
``dataloader_sync.django``'s returned querysets (``level_value``): planned
for the field's selection (the to-one hops it reads joined, ``FETCH_LEVEL``,
the field hints of its child fields: ``_hints``) and, when it is a relation
queryset of a parent that is a model instance (``self.books.filter(...)``,
``Book.objects.filter(author=self)``, sliced or not), a load of its shape's
loader (``Author.recent_books``): one statement per query shape per level.

With ``DjangoOptimizerExtension`` beside the switch, the optimizer would
evaluate each parent's queryset before the switch saw it (its ``resolve``
fetches every queryset a field returns; the field's ``get_queryset``
optimizes it, per parent).  So the resolver runs with the optimizer off
(``DjangoOptimizerExtension.disabled()``, its public switch) and what it
returns is optimized once, then loaded for the level: the optimizer's
``only()``, joins and prefetches of the child selection are in the level's
one statement, whichever order the two extensions are listed in.  A to-one
field's queryset, which strawberry-django evaluates itself (``first()``),
is then read unoptimized, and the relations of its row are the switch's
batches across the level (cheaper than the optimizer's prefetches per row).

strawberry-django < 0.92 evaluates a list field's queryset itself
(``qs._fetch_all()`` in its ``get_result``), per parent, before any
extension sees it: ``_auto`` leaves such fields (a
``StrawberryDjangoField`` whose ``disable_fetch_list_results`` is False,
read for that) as they are, optimizer included.

Guarantees:
- Anything but an unevaluated queryset is returned as it is (one
  ``isinstance`` check); a queryset that is no relation of the parent is
  returned planned, as ``level_value`` says; never a wrong answer.
- Reads ``strawberry_django.optimizer.optimizer`` (the context variable that
  holds the running optimizer, strawberry-django's own way to find it) and
  ``DjangoOptimizerExtension.enabled``.
"""
from __future__ import annotations

from typing import Any, Callable

from django.db.models import Model, QuerySet
from django.db.models.manager import BaseManager

from ..django._returned_querysets import level_value
from ..graphql._auto_relations import FieldLabels

__all__ = ["returned", "root_value"]


def _running_optimizer() -> Any:
    """The ``DjangoOptimizerExtension`` of this execution when it is on, else None."""
    from strawberry_django.optimizer import DjangoOptimizerExtension, optimizer

    found = optimizer.get()
    return found if found is not None and DjangoOptimizerExtension.enabled.get() else None


_ALL_COLUMNS: tuple[frozenset[str], bool] = (frozenset(), True)  # Query.deferred_loading: nothing deferred


def _optimized(optimizer: Any, queryset: QuerySet[Any], info: Any) -> QuerySet[Any]:
    """``optimizer.optimize(queryset, info)``, with every column loaded when the resolver deferred none:
    the optimizer's ``only()`` lists the columns of the fields it can see, and a resolver or property
    reading another (it cannot see into them) would load it row by row; with the switch the rows are
    the level's, so one statement loads what they need.  Joins and prefetches are kept."""
    deferred = queryset.query.deferred_loading == _ALL_COLUMNS
    optimized = optimizer.optimize(queryset, info)
    if deferred and optimized.query.deferred_loading != _ALL_COLUMNS:
        optimized = optimized.defer(None)
    return optimized


def returned(ext: Any, next_: Callable[..., Any], root: Any, info: Any, args: tuple[Any, ...],
             kwargs: dict[str, Any], plan: Callable[[Any, Any, QuerySet[Any]], QuerySet[Any]],
             labels: FieldLabels) -> Any:
    """The value of a field with a resolver of its own on *root* (see the module notes).

    *next_* is the rest of strawberry's resolution; *plan* ``plan(ext, info, queryset)``; the loader is
    named by *labels*."""
    optimizer = _running_optimizer() if isinstance(root, Model) else None
    if optimizer is None:
        value = next_(root, info, *args, **kwargs)
    else:
        with optimizer.disabled():
            value = next_(root, info, *args, **kwargs)
        if isinstance(value, BaseManager):  # what the optimizer's resolve makes of a manager
            value = value.all()
        if isinstance(value, QuerySet) and value._result_cache is None:
            value = _optimized(optimizer, value, info)
    if not isinstance(value, QuerySet) or value._result_cache is not None:
        return value
    return level_value(ext, root, info, value, plan, labels)


def root_value(ext: Any, next_: Callable[..., Any], root: Any, info: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any], plan: Callable[[Any, Any, QuerySet[Any]], QuerySet[Any]]) -> Any:
    """The value of a field on a parent that is no model instance (a root's): a queryset that comes out
    unevaluated planned for its selection; with the optimizer on, the field runs with it off and what it
    gives is optimized once (``_optimized``: every column, where the resolver deferred none), as
    ``returned`` does."""
    optimizer = _running_optimizer()
    if optimizer is None:
        value = next_(root, info, *args, **kwargs)
    else:
        with optimizer.disabled():
            value = next_(root, info, *args, **kwargs)
        if isinstance(value, QuerySet) and value._result_cache is None:
            value = _optimized(optimizer, value, info)
    if isinstance(value, QuerySet) and value._result_cache is None:
        value = plan(ext, info, value)
    return value

"""Querysets a resolver returns, planned for the selection that reads them: its to-one hops joined, ``FETCH_LEVEL``.

With auto relations on, an unevaluated queryset a user's resolver returns
(a root's ``Author.objects.order_by("id")``, or any resolver's) is replaced
by a copy that

- joins the to-one relations its child selection reads (``select_related``),
  found as auto relations find the hops they join into their own batches
  (``_auto.joins``: a to-one field resolved by the default resolver whose
  target type has no ``get_queryset`` of its own, to ``MAX_JOIN_DEPTH``), so
  ``{ authors { name publisher { name } } }`` is one statement;
- on Django >= 6.1, carries ``FETCH_LEVEL`` (``_auto.with_level_mode``) when
  its fetch mode is Django's default, so a ``@property`` reading
  ``self.publisher`` costs one statement for the level.

The rows, their order and every value are those of the queryset as
returned: a to-one join adds columns, never rows.  What could change them is
left alone:

- no change at all: an evaluated queryset, ``values()``/``values_list()``
  and other non-model iterables, ``union()`` and the other combinators;
- no join (``FETCH_LEVEL`` still): ``select_for_update()`` (a join locks the
  joined rows too), ``distinct(*fields)``, a ``GROUP BY`` (aggregating
  annotations), ``only()``/``defer()`` (a deferred foreign key cannot be
  joined), ``select_related()`` of every relation, a slice whose order is not
  total (the primary key last: a join may pick other rows among ties);
- no join of a path the queryset already joins or prefetches (or of a path
  through a prefetched one: joining it would skip the user's ``Prefetch``),
  nor of the relation a related manager sets on its rows (``author`` of
  ``author.books``): the user's own is kept as it is.

A queryset object returned for several parents gets one planned copy for
all of them (its result cache serves them all, as the object's own would);
copies are kept only while the object lives (weak keys).

Guarantees:
- Only inside an execution with the switch (``_returned_querysets`` calls
  it); nothing else changes.
- The queryset given is not changed.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable, Optional

from django.db.models import Prefetch, QuerySet
from django.db.models.query import ModelIterable

__all__ = ["joinable", "planned", "total_order"]


def planned(ctx: Any, info: Any, queryset: QuerySet[Any], joins: Callable[[Any, Any, Any], tuple[str, ...]],
            level: Callable[[QuerySet[Any]], QuerySet[Any]]) -> QuerySet[Any]:
    """*queryset*, a queryset a resolver returned for the field *info* resolves, planned for that
    field's selection (see the module notes); *queryset* itself when there is nothing to plan.

    *joins* is ``_auto.joins`` (the paths auto relations join, ``joins(ctx, info, model)``), *level*
    ``_auto.with_level_mode``: given by ``_auto``, which imports this module, not the reverse."""
    if queryset._result_cache is not None or queryset._iterable_class is not ModelIterable \
            or queryset._fields is not None or queryset.query.combinator is not None:
        return queryset
    nodes = info.field_nodes
    key = ("planned", id(nodes[0]), len(nodes))
    memo = ctx.auto_memo
    copies: Optional[weakref.WeakKeyDictionary[QuerySet[Any], QuerySet[Any]]] = memo.get(key)
    if copies is None:
        copies = memo[key] = weakref.WeakKeyDictionary()
    found = copies.get(queryset)
    if found is not None:
        return found
    paths = joinable(queryset, joins(ctx, info, queryset.model))
    result = level(queryset.select_related(*paths) if paths else queryset)
    if result is not queryset:
        copies[queryset] = result
    return result


def joinable(queryset: QuerySet[Any], paths: tuple[str, ...]) -> tuple[str, ...]:
    """The *paths* that joining into *queryset* leaves its rows and the user's choices as they are (the
    rules of the module notes; REST framework's root querysets follow them too, ``rest_framework._joins``)."""
    if not paths:
        return paths
    query = queryset.query
    if query.select_for_update or query.distinct_fields or query.group_by is not None \
            or query.select_related is True or query.deferred_loading != (frozenset(), True):
        return ()
    if (query.low_mark or query.high_mark is not None) and not total_order(queryset):
        return ()
    joined = query.select_related if isinstance(query.select_related, dict) else {}
    prefetched = [(lookup.prefetch_through if isinstance(lookup, Prefetch) else lookup).split("__")
                  for lookup in queryset._prefetch_related_lookups]
    known = {field.name for field in queryset._known_related_objects}
    kept = []
    for path in paths:
        parts = path.split("__")
        if parts[0] in known or _in(joined, parts):
            continue
        if any(_prefix(parts, lookup) or _prefix(lookup, parts) for lookup in prefetched):
            continue
        kept.append(path)
    return tuple(kept)


def _in(joined: dict[str, Any], parts: list[str]) -> bool:
    """Whether ``select_related``'s nested dict *joined* holds the path *parts*."""
    for part in parts:
        if part not in joined:
            return False
        joined = joined[part]
    return True


def _prefix(short: list[str], long: list[str]) -> bool:
    return len(short) <= len(long) and long[:len(short)] == short


def total_order(queryset: QuerySet[Any]) -> bool:
    """Whether *queryset*'s order names its primary key (ties cannot pick other rows)."""
    query = queryset.query
    if query.order_by:
        ordering = query.order_by
    elif query.default_ordering:
        ordering = query.get_meta().ordering or ()
    else:
        ordering = ()
    pk = query.get_meta().pk.name
    return any(isinstance(o, str) and o in ("pk", "-pk", pk, "-" + pk) for o in ordering)

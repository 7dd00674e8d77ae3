"""strawberry-django's field hints, applied to a level's queryset with the switch alone.

A strawberry-django field may say what reading it needs loaded with its
parent rows: ``strawberry_django.field(only=..., select_related=...,
prefetch_related=..., annotate=...)``, and ``strawberry_django.model_property(...)``
for a field that reads such a property.  ``DjangoOptimizerExtension``
applies them to the queryset that loads the parents; without it nothing
does, and a property reading ``self.items`` costs a statement per row.  With
the switch, the queryset of every level the switch loads or sees (a relation
batch, a queryset a resolver returns, a root's too) gets the hints of the
fields its selection selects, unless the optimizer optimized that queryset
already (it applied them itself):

- ``prefetch_related``: added, but for what the queryset prefetches already
  (the queryset's own ``Prefetch`` is kept), each attribute filled once
  (hints that fill one attribute differently — two ``Prefetch`` querysets, or
  one and the plain path — are all left out: Django refuses the pair, and
  either would change what the other's field reads; a ``Prefetch``'s
  ``to_attr`` is an attribute of its own beside the plain path).  A hint of one
  relation the selection reads as a field too (``books`` hinted by a
  property, ``books { reviews { rating } }`` selected; a field with no
  arguments whose type has no ``get_queryset``) becomes a ``Prefetch``
  whose queryset is what the switch's batch of that field would run: its
  to-one hops joined, its own child fields' hints, ``FETCH_LEVEL``;
- ``select_related``: added when every hop of the path is a to-one relation
  and the queryset defers no column (a deferred key cannot be joined);
- ``only``: the to-one hops of its paths (``publisher__name``) joined as
  ``select_related``; the columns themselves are loaded anyway (no
  ``only()`` of the switch's: a column a hint forgot would cost a statement
  per row);
- ``annotate``: added under a name the queryset and the model do not use
  already; an annotation Django refuses is left out.

A hint given as a callable of ``info`` is left out (it is made for the
optimizer's own resolve info), as is a prefetch lookup whose first hop is no
relation of the model: the field then reads as without the switch.

Reads strawberry-django's ``StrawberryDjangoField.store`` and
``ModelProperty.store`` (``OptimizerStore``: ``only``, ``select_related``,
``prefetch_related``, ``annotate``), its placeholder name for a lone
``annotate=`` expression (``optimizer._annotate_placeholder``: the field's
name), ``is_optimized``, and Django's ``Query.deferred_loading``,
``select_related``, ``annotations`` and ``QuerySet._prefetch_related_lookups``.

Guarantees:
- The hints of a selection are read once per execution (``auto_memo``).
- The queryset given is not changed; one with nothing to add is returned as it is.
"""
from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Optional

from django.core.exceptions import FieldDoesNotExist, FieldError
from django.db.models import Prefetch, QuerySet
from graphql import GraphQLObjectType, get_named_type

from ..django._auto import AutoRelation, join_hop, relation_of, with_level_mode
from ..graphql._auto_relations import subfields as selected_fields
from ._fields import DEFINITION, joins, relation_field

__all__ = ["Hints", "with_hints"]

class Hints:
    """The hints of one selection's fields, checked against the level's model.  Immutable."""

    __slots__ = ("annotate", "prefetch", "select")

    def __init__(self, select: tuple[str, ...], prefetch: tuple[Any, ...], annotate: dict[str, Any]) -> None:
        self.select = select
        self.prefetch = prefetch
        self.annotate = annotate

    def apply(self, queryset: QuerySet[Any]) -> QuerySet[Any]:
        """*queryset* with the hints it lacks (see the module notes)."""
        query = queryset.query
        select = self.select
        if query.deferred_loading != (frozenset(), True) or query.select_related is True:
            select = ()
        elif isinstance(query.select_related, dict):
            select = tuple(path for path in select if not _joined(query.select_related, path))
        own = _levels_of(queryset._prefetch_related_lookups)
        prefetch = [lookup for lookup in self.prefetch if _adds_to(own, _levels(lookup))]
        if select:
            queryset = queryset.select_related(*select)
        if prefetch:
            queryset = queryset.prefetch_related(*prefetch)
        for name, expression in self.annotate.items():
            if name in queryset.query.annotations:
                continue
            try:
                queryset = queryset.annotate(**{name: expression})
            except (FieldError, ValueError, TypeError):  # Django refuses it: the field reads as without us
                continue
        return queryset


def _through(lookup: Any) -> str:
    return lookup.prefetch_through if isinstance(lookup, Prefetch) else str(lookup)


def _joined(joined: dict[str, Any], path: str) -> bool:
    for part in path.split("__"):
        if part not in joined:
            return False
        joined = joined[part]
    return True


def with_hints(ctx: Any, info: Any, queryset: QuerySet[Any]) -> QuerySet[Any]:
    """*queryset*, which loads the rows of the field *info* resolves, with the hints of that field's
    child selection (see the module notes)."""
    from strawberry_django.optimizer import is_optimized

    if queryset._result_cache is not None or queryset.query.combinator is not None or is_optimized(queryset):
        return queryset
    hints = hints_of(ctx, info, queryset.model)
    return queryset if hints is None else hints.apply(queryset)


def hints_of(ctx: Any, info: Any, model: Any) -> Optional[Hints]:
    """The hints of the child selection of the field *info* resolves, on rows of *model*; None when
    there are none.  Once per selection per execution."""
    nodes = info.field_nodes
    key: Hashable = ("hints", model, *map(id, nodes))
    memo = ctx.auto_memo
    if key in memo:
        found: Optional[Hints] = memo[key]
        return found
    gql_type = get_named_type(info.return_type)
    found = None
    if isinstance(gql_type, GraphQLObjectType):
        subfields = selected_fields(gql_type, nodes, info.fragments)
        stores = [store for name in subfields for store in _stores(gql_type.fields.get(name), model)]
        found = _checked(stores, model) if stores else None
        if found is not None and found.prefetch:
            prefetch = tuple(_served(ctx, lookup, gql_type, subfields, info.fragments, model)
                             for lookup in found.prefetch)
            found = Hints(found.select, prefetch, found.annotate)
    memo[key] = found
    return found


class _Selection:
    """What ``join_paths`` and ``hints_of`` read of a resolve info, for a child field's selection."""

    __slots__ = ("field_nodes", "fragments", "return_type")

    def __init__(self, field_nodes: list[Any], fragments: Any, return_type: Any) -> None:
        self.field_nodes = field_nodes
        self.fragments = fragments
        self.return_type = return_type


def _served(ctx: Any, lookup: Any, gql_type: Any, subfields: dict[str, list[Any]], fragments: Any,
            model: Any) -> Any:
    """A prefetch hint of one relation that the selection reads as a field too (``books`` hinted by a
    property, ``books { reviews { rating } }`` selected): a ``Prefetch`` of it whose queryset is what the
    switch's batch of that field would run (its to-one hops joined, its child fields' hints), so the rows
    prefetched serve the field's own selection as its batch would.  *lookup* itself when the field
    takes arguments, its type has a ``get_queryset`` of its own, or it is no such field."""
    if not isinstance(lookup, str) or "__" in lookup:
        return lookup
    for name, nodes in subfields.items():
        field_def = gql_type.fields.get(name)
        field = relation_field(field_def) if field_def is not None else None
        if field is None or (field.django_name or field.python_name) != lookup:
            continue
        auto = relation_of(model, lookup)
        if field.is_connection or not field.is_list or not isinstance(auto, AutoRelation) or not auto.rel.many \
                or any(node.arguments for node in nodes) \
                or callable(getattr(getattr(field, "django_type", None), "get_queryset", None)):
            return lookup
        child = _Selection(nodes, fragments, field_def.type)
        related = auto.rel.related_model
        queryset = auto.rel.manager().all()
        joined = joins(ctx, child, related)
        if joined:
            queryset = queryset.select_related(*joined)
        hints = hints_of(ctx, child, related)
        return Prefetch(lookup, queryset=with_level_mode(queryset if hints is None else hints.apply(queryset)))
    return lookup


def _stores(field_def: Any, model: Any) -> list[tuple[str, Any]]:
    """``(field name, store)`` of the hints a field gives: its own, and its model property's."""
    field = None if field_def is None else (field_def.extensions or {}).get(DEFINITION)
    if field is None:
        return []
    found = []
    store = getattr(field, "store", None)
    if store:
        found.append((field.python_name, store))
    prop = getattr(model, getattr(field, "django_name", None) or field.python_name, None)
    prop_store = getattr(prop, "store", None) if _is_model_property(prop) else None
    if prop_store:
        found.append((field.python_name, prop_store))
    return found


def _is_model_property(value: Any) -> bool:
    from strawberry_django.descriptors import ModelProperty

    return isinstance(value, ModelProperty)


def _checked(stores: list[tuple[str, Any]], model: Any) -> Optional[Hints]:
    """The hints of *stores* that apply to rows of *model* (see the module notes)."""
    from strawberry_django import optimizer

    placeholder = getattr(optimizer, "_annotate_placeholder", None)
    select: list[str] = []
    prefetch: list[Any] = []
    annotate: dict[str, Any] = {}
    for name, store in stores:
        for path in [*store.select_related, *(p.rsplit("__", 1)[0] for p in store.only if "__" in p)]:
            if _to_one_path(model, path) and path not in select:
                select.append(path)
        prefetch.extend(lookup for lookup in store.prefetch_related
                        if not callable(lookup) and relation_of(model, _through(lookup).split("__")[0]) is not None)
        for label, expression in store.annotate.items():
            label = name if label == placeholder else label
            if callable(expression) or label in annotate or _model_field(model, label):
                continue
            annotate[label] = expression
    prefetch = _one_per_path(prefetch)
    if not (select or prefetch or annotate):
        return None
    return Hints(tuple(select), tuple(prefetch), annotate)


def _one_per_path(lookups: list[Any]) -> list[Any]:
    """*lookups*, none twice, none in conflict: two lookups conflict when they fill one level (an
    attribute on one path: ``pull_requests``, or a ``Prefetch``'s ``to_attr``) differently (two
    ``Prefetch`` querysets, or one and the plain path); both are then left out: Django refuses the pair,
    and either would change what the other's field reads.  ``Prefetch("pull_requests", queryset=...,
    to_attr="merged")`` and ``"pull_requests"`` fill two levels: both are kept."""
    filled: dict[str, Any] = {}
    refused: set[str] = set()
    for lookup in lookups:
        for level, queryset in _levels(lookup).items():
            if level in filled and filled[level] is not queryset:
                refused.add(level)
            filled.setdefault(level, queryset)
    kept: list[Any] = []
    for lookup in lookups:
        if _levels(lookup).keys() & refused or any(_same(lookup, other) for other in kept):
            continue
        kept.append(lookup)
    return kept


def _levels(lookup: Any) -> dict[str, Any]:
    """The levels *lookup* fills (``a``, ``a__b``: each prefix of its path, the last one named by its
    ``to_attr``), each with the queryset that fills it (None: the relation's plain rows)."""
    parts = _through(lookup).split("__")
    levels: dict[str, Any] = {"__".join(parts[:i]): None for i in range(1, len(parts))}
    if isinstance(lookup, Prefetch):
        levels[lookup.prefetch_to] = lookup.queryset
    else:
        levels[str(lookup)] = None
    return levels


def _levels_of(lookups: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for lookup in lookups:
        for level, queryset in _levels(lookup).items():
            found.setdefault(level, queryset)
    return found


def _adds_to(own: dict[str, Any], levels: dict[str, Any]) -> bool:
    """Whether a hint filling *levels* is added to a queryset whose own lookups fill *own*: not when it
    fills nothing new, nor when it gives a level the queryset fills already a queryset of its own (Django
    refuses that; the queryset's own ``Prefetch`` is kept)."""
    if levels.keys() <= own.keys():
        return False
    return not any(queryset is not None and own.get(level, queryset) is not queryset
                   for level, queryset in levels.items())


def _same(lookup: Any, other: Any) -> bool:
    if isinstance(lookup, str) or isinstance(other, str):
        return bool(lookup == other)
    return lookup is other


def _to_one_path(model: Any, path: str) -> bool:
    for part in path.split("__"):
        model = join_hop(model, part)
        if model is None:
            return False
    return True


def _model_field(model: Any, name: str) -> bool:
    try:
        model._meta.get_field(name)
    except FieldDoesNotExist:
        return False
    return True

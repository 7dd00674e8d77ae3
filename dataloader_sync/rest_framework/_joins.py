"""The root queryset of a serialization, planned: the to-one hops its serializer reads from the root, joined.

Before the walk (``_walk``) evaluates an unevaluated root ``QuerySet``
(``batched_data(ReviewSerializer(Review.objects.all(), many=True))``, a
list view's queryset), and before a paginator of REST framework cuts a page
of one (``AutoRelationsMixin.paginate_queryset``), ``planned`` adds
``select_related`` for the chains of to-one hops the serializer's fields
read from the root (``join_paths``): what the walk would otherwise load one
statement per hop, the queryset's own statement reads.

A hop is joined when it is a forward foreign key or one-to-one (nullable or
not: Django joins a nullable one with a LEFT JOIN, and a missing row is
``None`` as without the join) or a reverse one-to-one, reached from the root
through joined hops only, by

- a dotted ``source`` (``source="book.author.name"``: ``book__author``);
- a nested serializer that is not ``many`` (``publisher = PublisherSerializer()``),
  ``depth=N``'s, ``source="*"``'s, and then its own fields' hops;
- a relational field: the relation itself (``StringRelatedField``: its
  ``__str__`` runs as written, nothing it reads is joined), and a
  ``SlugRelatedField``'s ``slug_field`` path from there; a
  ``PrimaryKeyRelatedField`` (or a pk ``HyperlinkedRelatedField``) reads the
  key column: its last hop is not joined.

A path stops at anything else: a to-many relation, a column, a property, a
method field, a field in ``Meta.no_auto_relations``, a foreign key without a
database constraint (``db_constraint=False``: an inner join would drop the
rows whose target is missing), ``_auto.MAX_JOIN_DEPTH`` hops.

Which querysets are planned, and what is kept: the rules of GraphQL's
planned root querysets (``dataloader_sync.django._planned_querysets``):
nothing for an evaluated queryset, ``values()``/``values_list()``, a
combinator; no join under ``select_for_update()``, ``distinct(*fields)``, a
``GROUP BY``, ``only()``/``defer()`` (a deferred foreign key cannot be
traversed by ``select_related``: Django raises), ``select_related()`` of
every relation, or a slice whose order is not total; the view's own
``select_related`` paths and prefetches are kept, and not joined again.

Guarantees:
- A join adds columns, never rows: the rows, their order and every value
  are those of the queryset as given.
- The queryset given is not changed: ``planned`` returns a copy.
- Reads the serializer as ``_plan`` does (REST framework's public fields); no
  instance is read.
"""
from __future__ import annotations

from typing import Any, Optional

from django.db.models import Model, QuerySet
from django.db.models.fields.related_descriptors import ForwardManyToOneDescriptor, ReverseOneToOneDescriptor
from django.db.models.query import ModelIterable
from rest_framework.serializers import ListSerializer, Serializer

from ..django._auto import MAX_JOIN_DEPTH, AutoRelation, relation_of
from ..django._planned_querysets import joinable
from ._plan import FieldPath, paths

__all__ = ["join_paths", "joined_through", "plannable", "planned"]


def plannable(queryset: Any) -> bool:
    """Whether *queryset* is a model ``QuerySet`` not yet evaluated, whose rows a join could hold."""
    return isinstance(queryset, QuerySet) and queryset._result_cache is None \
        and queryset._iterable_class is ModelIterable and queryset._fields is None \
        and queryset.query.combinator is None


def planned(queryset: QuerySet[Any], serializer: Any) -> QuerySet[Any]:
    """A copy of *queryset* joining the to-one hops *serializer* (``many`` or not) reads from its rows, or
    *queryset* itself when there is nothing to join (see the module notes)."""
    if not plannable(queryset):
        return queryset
    top = serializer.child if isinstance(serializer, ListSerializer) else serializer
    if not isinstance(top, Serializer):
        return queryset
    found = joinable(queryset, join_paths(top, queryset.model))
    return queryset.select_related(*found) if found else queryset


def join_paths(serializer: Serializer[Any], model: type[Model]) -> tuple[str, ...]:
    """The ``select_related`` paths, from *model*, of the to-one hops *serializer*'s fields read."""
    found: dict[str, None] = {}
    _collect(serializer, model, (), found)
    return tuple(found)


def _collect(serializer: Serializer[Any], model: type[Model], prefix: tuple[str, ...],
             found: dict[str, None]) -> None:
    for path in paths(serializer)[0]:
        _follow(path, model, prefix, found)


def _follow(path: FieldPath, model: type[Model], prefix: tuple[str, ...], found: dict[str, None]) -> None:
    hops = prefix
    for i, attr in enumerate(path.attrs):
        last = i == len(path.attrs) - 1
        target = _to_one(model, attr, pk_only=last and path.pk_only)
        if target is None or len(hops) >= MAX_JOIN_DEPTH:
            return
        hops = (*hops, attr)
        model = target
        found["__".join(hops)] = None
    if path.child is not None:
        _collect(path.child, model, hops, found)
    elif path.then:
        _follow(FieldPath(path.then), model, hops, found)


def _to_one(model: type[Model], name: str, pk_only: bool) -> Optional[type[Model]]:
    """The model *model*'s relation *name* reaches when ``select_related`` can join it for the walk, or None."""
    rel = relation_of(model, name)
    if not isinstance(rel, AutoRelation):
        return None
    descriptor = rel.descriptor
    if isinstance(descriptor, ForwardManyToOneDescriptor):
        if pk_only or not descriptor.field.db_constraint:
            return None  # the key column is read; or a missing target would drop its row from an inner join
    elif not isinstance(descriptor, ReverseOneToOneDescriptor):
        return None
    target = rel.rel.related_model
    return target if isinstance(target, type) and issubclass(target, Model) else None


def joined_through(path: Any, model: type[Model], joined: dict[str, Any]) -> bool:
    """Whether the field *path* (a ``FieldPath`` or a walk's cursor at its start) reads, from a row of *model*
    read with the ``select_related`` tree *joined*, only what that row holds: every hop joined up to where the
    path ends (a column, a property: anything not a relation; a primary-key field's key column), no nested
    serializer, the slug path after it joined too.  The walk has nothing to load for such a path."""
    if path.child is not None:
        return False  # its instances are a level of the walk (in-place answers, FETCH_LEVEL): walked
    return _joined(path.attrs, path.pk_only, model, joined) and \
        (not path.then or _joined(path.attrs + path.then, False, model, joined))


def _joined(attrs: tuple[str, ...], pk_only: bool, model: type[Model], joined: dict[str, Any]) -> bool:
    for i, attr in enumerate(attrs):
        rel = relation_of(model, attr)
        if rel is None:
            return True  # the path ends here, read as written
        if attr not in joined or not isinstance(rel, AutoRelation):
            last = i == len(attrs) - 1
            return last and pk_only and isinstance(rel, AutoRelation) and \
                isinstance(rel.descriptor, ForwardManyToOneDescriptor)
        joined, model = joined[attr], rel.rel.related_model
    return True

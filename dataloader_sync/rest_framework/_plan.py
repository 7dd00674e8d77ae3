"""What a serializer reads off each instance: the attribute path of each readable field, and what follows it.

``paths(serializer)`` reads a ``Serializer``'s readable fields (``_readable_fields``,
as its ``to_representation`` does) into ``FieldPath``\\ s: the attributes the
field's ``get_attribute`` follows (``source_attrs``: ``source="author.publisher"``
is two), and what reads the value it reaches:

=====================================  ==========================================================
field                                  what follows the path
=====================================  ==========================================================
nested serializer (``many`` or not,    its own fields, on the instances reached (``child``); a
``depth=N``'s, ``source="*"``)         ``ListSerializer``'s child serializer
``PrimaryKeyRelatedField``,            nothing, and the path's last hop is not loaded when it is
``HyperlinkedRelatedField`` (pk)       a forward foreign key (REST framework reads the key
                                       column: ``use_pk_only_optimization``)
``SlugRelatedField``                   its ``slug_field`` path (``"publisher__name"``, REST
                                       framework >= 3.15), read off the targets (``then``)
``many=True`` relational fields        the same, on each target (``ManyRelatedField``); a
                                       ``source`` ending in ``.all`` is read as written (REST
                                       framework calls ``.all()`` on the queryset it reaches)
``SerializerMethodField``              nothing: the method runs as written (``methods`` is set:
                                       a loader future it returns is settled after serializing)
any other field                        nothing: the path's relations are loaded, the value is
                                       read as written
=====================================  ==========================================================

A field named in the serializer's ``Meta.no_auto_relations`` is left out, and
left alone while REST framework reads it (``_alone``: no in-place answers).

Guarantees:
- Reads only what REST framework's own ``to_representation`` builds, never an
  instance: ``fields``, each field's ``source_attrs``, ``child``,
  ``child_relation``, ``slug_field``, ``use_pk_only_optimization()`` and
  ``rest_framework.VERSION`` (public attributes of REST framework's fields),
  and one private name, ``Serializer._readable_fields`` (the fields its
  ``to_representation`` iterates, write-only ones left out).
- ``Meta.no_auto_relations`` that is not a list or tuple of the serializer's
  field names raises ``TypeError``/``ValueError`` naming it.
"""
from __future__ import annotations

from typing import Any, Optional

import rest_framework as _rest_framework
from rest_framework.fields import SerializerMethodField
from rest_framework.relations import ManyRelatedField, RelatedField, SlugRelatedField
from rest_framework.serializers import BaseSerializer, ListSerializer, Serializer

from ._alone import leave_alone

__all__ = ["FieldPath", "opted_out_names", "paths"]


class FieldPath:
    """One readable field of a serializer, as the walk follows it.  Immutable once made.

    Attributes:
        attrs: the attributes from the instance to the field's value (``()`` for ``source="*"``).
        pk_only: the last hop is read as its key column when it is a forward foreign key.
        child: the serializer that serializes the value reached, or None.
        then: attributes read off each value reached (a ``SlugRelatedField``'s ``slug_field``).
    """

    __slots__ = ("attrs", "child", "pk_only", "then")

    def __init__(self, attrs: tuple[str, ...], pk_only: bool = False, child: Optional[Serializer[Any]] = None,
                 then: tuple[str, ...] = ()) -> None:
        self.attrs = attrs
        self.pk_only = pk_only
        self.child = child
        self.then = then


def paths(serializer: Serializer[Any]) -> tuple[list[FieldPath], bool]:
    """The ``FieldPath`` of each readable field of *serializer* not opted out, and whether any of its fields is
    a ``SerializerMethodField``.  A field opted out is left alone (``_alone``)."""
    skipped = opted_out_names(serializer)
    found: list[FieldPath] = []
    methods = False
    for field in serializer._readable_fields:
        if isinstance(field, SerializerMethodField):
            methods = True  # its futures are settled, opted out or not
        if field.field_name in skipped:
            leave_alone(field)
            continue
        if isinstance(field, SerializerMethodField):
            continue
        path = _path_of(field)
        if path is not None:
            found.append(path)
    return found, methods


def _path_of(field: Any) -> Optional[FieldPath]:
    attrs = tuple(field.source_attrs)
    if isinstance(field, ListSerializer):
        child = field.child
        return FieldPath(attrs, child=child if isinstance(child, Serializer) else None)
    if isinstance(field, Serializer):
        return FieldPath(attrs, child=field)
    if isinstance(field, BaseSerializer):  # a serializer of its own making: its value is read as written
        return FieldPath(attrs) if attrs else None
    if isinstance(field, ManyRelatedField):
        if len(attrs) >= 2 and attrs[-1] == "all":
            # source="books.all": REST framework calls .all() on the queryset it reaches, a new query that no
            # prefetch answers; the hops before the relation are loaded
            return FieldPath(attrs[:-2]) if len(attrs) > 2 else None
        return FieldPath(attrs, then=_slug_path(field.child_relation))
    if isinstance(field, RelatedField):
        return FieldPath(attrs, pk_only=bool(field.use_pk_only_optimization()), then=_slug_path(field))
    return FieldPath(attrs) if attrs else None


def _slug_path(field: Any) -> tuple[str, ...]:
    if not isinstance(field, SlugRelatedField):
        return ()
    if _NESTED_SLUGS:
        return tuple(field.slug_field.split("__"))
    return (field.slug_field,)  # REST framework < 3.15 reads slug_field as one attribute


#: Whether ``SlugRelatedField`` reads ``slug_field="author__name"`` as a path (REST framework 3.15 and later).
_NESTED_SLUGS = tuple(int(part) for part in _rest_framework.VERSION.split(".")[:2] if part.isdigit()) >= (3, 15)


def opted_out_names(serializer: Serializer[Any]) -> frozenset[str]:
    """The field names of *serializer*'s ``Meta.no_auto_relations`` (checked against its fields)."""
    meta = getattr(serializer, "Meta", None)
    names = getattr(meta, "no_auto_relations", None)
    if names is None:
        return frozenset()
    where = f"{type(serializer).__name__}.Meta.no_auto_relations"
    if isinstance(names, str) or not isinstance(names, (list, tuple)) or \
            not all(isinstance(name, str) for name in names):
        raise TypeError(f"{where} must be a list or tuple of field names (got {names!r})")
    unknown = [name for name in names if name not in serializer.fields]
    if unknown:
        raise ValueError(f"{where} names {', '.join(map(repr, unknown))}, not a field of "
                         f"{type(serializer).__name__} (its fields: {', '.join(serializer.fields)})")
    return frozenset(names)

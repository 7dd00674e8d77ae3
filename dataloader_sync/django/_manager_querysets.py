"""A reverse foreign key's related manager, inside an execution with auto relations: its parent filter built once.

A resolver the user wrote runs for every parent (``self.books.filter(...)``),
and most of what building its queryset costs is Django building the related
manager's own condition, ``author = <this author>``, anew for each parent
(``Query.add_q``: the lookup resolved, its joins set up, about 30 us on
CPython 3.11).  Inside an execution with the switch, that condition is built
by Django once per query structure, and for the next parents the query it
built is copied with the parent's lookup made again for the new instance
(``type(lookup)(lookup.lhs, instance)``: Django's own lookup class, so its
value is prepared as ``filter(author=instance)`` prepares it).

What is copied is exactly what Django would compute: the related manager's
``_apply_rel_filters`` runs as written (hints, database, fetch mode, known
instance, the empty queryset of a parent without a key), and leaves its
filter deferred (``QuerySet._deferred_filter``, applied by Django when
``.query`` is first read); this module applies it instead, only when it is
that manager's own filter (``{field name: its instance}``) on a query whose
structure (``_queryset_shapes``' state walk: every attribute of the
``Query``) and instance class were seen before, in which case the result is
the query Django built then, every attribute alike, with the parent's lookup
in its place.  The queryset the user gets is a plain ``QuerySet`` of the
manager's class, its ``.query`` equal in every attribute to Django's; it can
be read, evaluated, chained and passed on.

The seam: ``watch(field)`` replaces ``_apply_rel_filters`` on that reverse
relation's related manager class (Django makes one class per relation,
``ReverseManyToOneDescriptor.related_manager_cls``), once, when a level's
returned queryset of that relation is first recognised or a level's rows or
count of it are loaded in place (``_inplace``); and, when that class is
Django's over the plain ``Manager``, its ``get_queryset``, which inside an
execution gives a queryset recorded rather than built
(``_recorded_querysets``; replayed on this module's path when it must be
built).  Outside an execution with the switch (and inside one, in a
``no_auto_relations`` field, a mutation, after a write, on another thread:
``_inplace.answering``) each wrapper costs one context-variable read and
calls Django's own (``tools/bench_inplace.py``, ``manager``).  Django
internals read: ``QuerySet._deferred_filter``, ``_query``,
``Query.where.children``, ``Query.clone``, a lookup's ``lhs`` and
constructor, ``related_manager_cls``, ``core_filters``.  Tests cover Django
4.2, 5.2 and 6.1.

Guarantees:
- Never a different query: anything not exactly as described (a
  many-to-many or generic manager, a filter other than the manager's own, a
  structure not seen, a lookup not found once, a key that is None or empty)
  runs as Django runs it.
- The templates are never changed (copied with ``Query.clone``); bounded
  (cleared when full); no lock (two threads may both build one; either is
  right).
"""
from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Any, Callable, Optional

from django.db.models import Manager, QuerySet
from django.db.models.expressions import Col

from ._inplace import answering
from ._queryset_shapes import _query_state
from ._recorded_querysets import recorded_root

__all__ = ["watch"]

# (manager class, instance class, filter name, the query's structure) -> (Django's query, the lookup's index), or
# None: this structure is not templated
_TEMPLATES: dict[Hashable, Optional[tuple[Any, int]]] = {}
_TEMPLATES_MAX = 512
_watched: set[type] = set()
_seen: set[Any] = set()  # the fields watch() was given: each is looked at once
_lock = threading.Lock()


def watch(field: Any) -> None:
    """Put the wrapper on the related manager class of the reverse relation of the foreign key *field*
    (``Book.author``: ``Author.books``), once; anything else is left alone."""
    if field in _seen:
        return
    _seen.add(field)
    if not getattr(field, "many_to_one", False) or getattr(field, "remote_field", None) is None:
        return
    accessor = field.remote_field.get_accessor_name()
    descriptor = field.remote_field.model.__dict__.get(accessor) if accessor else None
    cls = getattr(descriptor, "related_manager_cls", None)
    if cls is None or cls in _watched:
        return
    with _lock:
        if cls in _watched or "_apply_rel_filters" not in cls.__dict__:
            return
        original = cls.__dict__["_apply_rel_filters"]
        wrapper = _wrap(original)
        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        wrapper.__doc__ = original.__doc__
        cls._apply_rel_filters = wrapper
        # recorded, not built, when Django's queryset is known without building it: the plain Manager's
        if cls.__mro__[1] is Manager and Manager._queryset_class is QuerySet and "get_queryset" in cls.__dict__:
            own = cls.__dict__["get_queryset"]
            recording = _wrap_get_queryset(own)
            recording.__wrapped__ = own  # type: ignore[attr-defined]
            recording.__doc__ = own.__doc__
            cls.get_queryset = recording
        _watched.add(cls)


def _wrap(original: Callable[[Any, QuerySet[Any]], QuerySet[Any]]) -> Callable[[Any, QuerySet[Any]], QuerySet[Any]]:
    def _apply_rel_filters(self: Any, queryset: QuerySet[Any]) -> QuerySet[Any]:
        result = original(self, queryset)
        if answering() is None:
            return result
        _apply_deferred(self, result)
        return result

    return _apply_rel_filters


def _wrap_get_queryset(original: Callable[[Any], QuerySet[Any]]) -> Callable[[Any], QuerySet[Any]]:
    def get_queryset(self: Any) -> QuerySet[Any]:
        if answering() is None:
            return original(self)
        found = recorded_root(self)
        return original(self) if found is None else found

    return get_queryset


def _apply_deferred(manager: Any, queryset: QuerySet[Any]) -> None:
    """Apply *queryset*'s deferred filter, the related manager's own, from a template when one fits."""
    deferred = queryset._deferred_filter
    field = manager.field
    instance = manager.instance
    if deferred is None or deferred[0] or deferred[1] or not isinstance(queryset, QuerySet):
        return
    kwargs = deferred[2]
    if len(kwargs) != 1 or kwargs.get(field.name, None) is not instance:
        return
    try:
        key = (type(manager), type(instance), field.name, _query_state(queryset._query))
    except TypeError:  # a part neither hashable nor a container
        return
    template: Any = _TEMPLATES.get(key, False)  # False: not seen
    if template is False:
        _learn(key, queryset, field)
        return
    if template is None:
        return
    query, index = template
    old = query.where.children[index]
    lookup = type(old)(old.lhs, instance)
    if lookup.rhs is None or lookup.rhs == "":  # Django makes these an isnull: its own way
        return
    built = query.clone()
    built.where.children[index] = lookup
    queryset._query = built
    queryset._deferred_filter = None


def _learn(key: Hashable, queryset: QuerySet[Any], field: Any) -> None:
    """Let Django apply *queryset*'s deferred filter (reading ``.query``) and keep what it built."""
    query = queryset.query
    found = [i for i, child in enumerate(query.where.children)
             if isinstance(getattr(child, "lhs", None), Col) and child.lhs.target is field]
    if len(_TEMPLATES) >= _TEMPLATES_MAX:
        _TEMPLATES.clear()
    _TEMPLATES[key] = (query.clone(), found[0]) if len(found) == 1 else None

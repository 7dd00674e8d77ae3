"""The shape of a queryset a resolver returns: what is the same for every parent, and the parent's key.

``self.books.filter(year__gte=2001).order_by("-year")`` is, to Django,
the queryset ``Book.objects.filter(year__gte=2001).order_by("-year")`` with
one more condition ANDed in, ``author_id = <this author's id>``, added by
the related manager (its ``core_filters``) or by the user
(``Book.objects.filter(author=self)``).  ``shape_of`` finds that condition
among the top-level conditions of the queryset's ``WHERE``, and splits the
queryset into a ``Shape``:

- ``queryset``: a copy of the queryset without that condition, without its
  slice (``low``, ``high``) and without the instance it knows
  (``known``): equal for every parent of a level whose resolver built the
  same query, so one loader, keyed by its SQL, serves them all;
- ``column``: the condition's column (``book.author_id``, a many-to-many
  through table's ``book_id`` in the join the query already has,
  ``note.object_id`` of a ``GenericRelation``); ``value``: the key it was
  compared with.

The rows of ``queryset`` whose ``column`` equals ``value`` are exactly the
rows of the original queryset, whatever else it does (joins, annotations,
aggregates, ``distinct``): a condition ANDed at the top of ``WHERE`` keeps or
drops each row of the rest of the query, and the column is read through the
very join the condition used.  A slice is the same window per parent
(``ROW_NUMBER() OVER (PARTITION BY column ORDER BY ...)``, as Django's sliced
prefetches do), ordered as the statement is (``reverse()`` included); a
connection's page is that window too, with the count of each parent's rows
read from the same statement (``COUNT(*) OVER (PARTITION BY column)``, see
``_returned_pages``).
``rows(values)`` is that: one queryset for all the parents' values, each
row annotated with its parent's value.

Everything this module reads is Django's private query structure (there is
no public reader for it): ``Query.where`` and its lookups (``Exact`` with a
``Col`` on the left), ``Query.low_mark``/``high_mark``, ``combinator``,
``select_for_update``, ``distinct_fields``, ``group_by``,
``QuerySet._result_cache``, ``_iterable_class``, ``_fields``,
``_known_related_objects``.  Tests cover Django 4.2, 5.2 and 6.1.

Guarantees:
- ``shape_of`` returns None (the queryset runs as it is, one statement per
  parent) for anything it does not recognise: an evaluated queryset,
  ``values()``/``values_list()``, ``union()`` and the other combinators,
  ``select_for_update()``, ``distinct(*fields)``, a queryset that matches
  nothing, a ``WHERE`` that is not a conjunction, no equality on a column of
  a relation to the parent's model, a slice with ``distinct()`` or on a
  backend without window functions, a step.  Never a wrong answer.
- The queryset given is not changed (reading ``.query`` applies a filter
  Django deferred, as any reader does).
- No lock: the cache of relation columns is filled without one (two threads
  may both compute an entry; either is right).
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, Optional

from django.db import connections
from django.db.models import Count, F, Model, Prefetch, QuerySet, Window
from django.db.models.expressions import Col, OrderBy
from django.db.models.functions import RowNumber
from django.db.models.lookups import Exact
from django.db.models.query import ModelIterable
from django.db.models.sql.where import AND, WhereNode

from ._connections import batch_connection
from ._querysets import key_chunks, ordering_of, queryset_key

__all__ = ["PARENT", "Shape", "relation_columns", "shape_of", "windows"]

PARENT = "_dataloader_sync_parent"  # annotation: the value of the parent's column a row belongs to
_ROW = "_dataloader_sync_row"  # annotation: the row's position within its parent's window
_TOTAL = "_dataloader_sync_total"  # annotation: the number of its parent's rows (a connection's totalCount)


class Shape:
    """A queryset split into its common part and one parent's key (see the module notes).  Immutable.

    Attributes:
        queryset: the queryset without the parent's condition, slice and known instance (made on
            first read: a level's parents whose shape has a loader already never need it).
        column: the condition's column (a Django ``Col``).
        value: the value the column was compared with: the parent's key.
        low, high: the slice (``high`` None: no end); ``0, None`` without one.
        known: ``(field, instance)``: the related manager's instance, set on every row's
            forward field as Django does (``_known_related_objects``), or None.
        db: the database alias the queryset reads.
        distinct: whether the queryset is ``distinct()``.
        key: what two shapes that load alike have equal (hashable).
    """

    __slots__ = ("_index", "_queryset", "_source", "column", "db", "distinct", "high", "key", "known", "low",
                 "value")

    def __init__(self, source: QuerySet[Any], index: int, column: Any, value: Any, low: int,
                 high: Optional[int], known: Optional[tuple[Any, Any]]) -> None:
        """*source* is the queryset as returned, *index* the position of the parent's condition
        among the top-level children of its ``WHERE``."""
        self._source = source
        self._index = index
        self._queryset: Optional[QuerySet[Any]] = None
        self.column = column
        self.value = value
        self.low = low
        self.high = high
        self.known = known
        self.db: str = source.db
        self.distinct = bool(source.query.distinct)
        # Django >= 6.1 keeps a queryset's fetch mode in ``_fetch_mode`` (no reader): a part of what loads
        self.key: Hashable = (_sql_key(self), self.db, column.alias, column.target, low, high,
                              None if known is None else known[0], getattr(source, "_fetch_mode", None))

    @property
    def queryset(self) -> QuerySet[Any]:
        queryset = self._queryset
        if queryset is None:
            queryset = self._source._chain()
            query = queryset.query
            del query.where.children[self._index]  # the chain's where is a clone: same children, same order
            query.clear_limits()
            queryset._known_related_objects = {}
            self._queryset = queryset
        return queryset

    def load(self, values: Sequence[Any], known: Sequence[Any] = (), first: Optional[int] = None,
             totals: Optional[dict[Any, int]] = None) -> dict[Any, list[Any]]:
        """``{key: its rows}`` for the parents' keys *values*: one statement (per chunk, see
        ``key_chunks``), the rows in the queryset's order (the primary key breaking ties), sliced per
        parent.  *known*: instances of the parents, set on the rows' ``known`` field as the related
        manager's queryset would.

        A connection's page (``_returned_pages``; a shape without a slice of its own): *first* keeps
        each parent's first rows, a window as a slice's; *totals*, when given, is filled with
        ``{key: the number of all its rows}``, read from the same statement (``COUNT(*) OVER
        (PARTITION BY column)``, computed before the window's rows are kept); a key without rows is
        not in it."""
        found: dict[Any, list[Any]] = {}
        with batch_connection(self.db):
            for chunk in self._chunks(values, known, first, totals is not None):
                for row in chunk:
                    key = row.__dict__.pop(PARENT)
                    row.__dict__.pop(_ROW, None)
                    if totals is not None:
                        totals[key] = row.__dict__.pop(_TOTAL)
                    found.setdefault(key, []).append(row)
        return found

    def _chunks(self, values: Sequence[Any], known: Sequence[Any], first: Optional[int],
                count: bool) -> list[QuerySet[Any]]:
        base = _BASES.get((self.key, first, count))
        if base is None:
            base = self._base(first, count)
            if len(_BASES) >= _BASES_MAX:
                _BASES.clear()
            _BASES[self.key, first, count] = base
        base = base._chain()  # the cached one is never changed, nor evaluated
        if self.known is not None and known:
            field = self.known[0]
            base._known_related_objects = {field: {getattr(i, field.target_field.attname): i for i in known}}
        return key_chunks(base, PARENT, self.column.output_field, values)

    def _base(self, first: Optional[int], count: bool) -> QuerySet[Any]:
        """The statement of ``load`` but for the parents' keys: what every load of this shape's key runs
        (on its database, with no parent's routing hints: it is kept for the next loads, ``_BASES``)."""
        queryset = self.queryset
        ordering = ordering_of(queryset)
        low, high = self.low, self.high if first is None else first
        base = queryset.using(self.db)
        base._hints = {}
        base = base.annotate(**{PARENT: self.column})
        if count:
            base = base.annotate(**{_TOTAL: Window(Count("*"), partition_by=F(PARENT))})
        if low or high is not None:
            window = ordering if queryset.query.standard_ordering else [_reversed(o) for o in ordering]
            base = base.annotate(**{_ROW: Window(RowNumber(), partition_by=F(PARENT), order_by=window)})
            if low:
                base = base.filter(**{f"{_ROW}__gt": low})
            if high is not None:
                base = base.filter(**{f"{_ROW}__lte": high})
        return base.order_by(*ordering)


# The statements of shapes' loads but for the parents' keys (``Shape._base``), by the shape's key, page and
# count: the key says the statement, so a level's load need not build it again.  Bounded (cleared when full);
# no lock (two threads may both build one; either is right).
_BASES: dict[Hashable, QuerySet[Any]] = {}
_BASES_MAX = 256


def _reversed(term: Any) -> Any:
    """An ``order_by()`` term the other way round: what ``QuerySet.reverse()`` makes of it in the
    statement's ``ORDER BY`` (a window's ``ORDER BY`` is not reversed by Django, so it is given so)."""
    if isinstance(term, str):
        return term[1:] if term.startswith("-") else "-" + term
    if isinstance(term, OrderBy):
        flipped = term.copy()
        flipped.reverse_ordering()
        return flipped
    return term.desc()


# The SQL keys of shapes already compiled, by the structure of their query (``_fingerprint``): a resolver
# builds its queryset anew for every parent, and compiling each to SQL cost more than the statement saved.
# Bounded (cleared when full); no lock (dict reads and writes are atomic; two threads may both compile).
_SQL_KEYS: dict[Hashable, Hashable] = {}
_SQL_KEYS_MAX = 1024

_ATOMS = frozenset({str, int, bool, float, bytes, type(None)})
_LIMITS = frozenset({"low_mark", "high_mark"})  # a shape's slice is a part of its key of its own


def _state(value: Any) -> Any:
    """*value*, a part of a ``Query``, as a hashable that is equal for two parts built alike: what
    ``make_hashable`` gives, without its sort (a dict's items in their order: two dicts equal but
    for their order give two keys, a compile more, never a wrong key) and a tag per container
    kind.  Raises TypeError for a part that is neither hashable nor a container."""
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is dict:
        items = tuple(value.items())
        try:
            hash(items)  # most of a Query's dicts hold hashable values: no walk
        except TypeError:
            items = tuple([(k, _state(v)) for k, v in items])
        return (dict, items)
    if kind is list or kind is tuple:
        items = tuple(value)
        try:
            hash(items)
        except TypeError:
            items = tuple([_state(v) for v in items])
        return (tuple, items)
    if kind is set or kind is frozenset:
        return (frozenset, frozenset(value))
    if isinstance(value, WhereNode):  # a snapshot: a query's WHERE grows in place (add_q), its lookups do not
        return (kind, value.connector, value.negated, tuple([_state(c) for c in value.children]))
    hash(value)  # expressions, lookups and WHERE nodes hash (and compare) by what they are made of
    return value


def _query_state(query: Any, without: int = -1, limits: bool = True) -> Hashable:
    """``_state`` of every attribute of *query*; with *without* >= 0, the ``WHERE`` without its
    top-level child at that position; without *limits*, no ``low_mark``/``high_mark``."""
    parts: list[Hashable] = []
    for name, value in query.__dict__.items():
        if name == "where" and without >= 0:
            children = value.children
            parts.append((name, value.__class__, value.connector, value.negated,
                          tuple([_state(c) for i, c in enumerate(children) if i != without])))
        elif limits or name not in _LIMITS:
            parts.append((name, _state(value)))
    return tuple(parts)


def _fingerprint(queryset: QuerySet[Any], without: int = -1, limits: bool = True) -> Optional[Hashable]:
    """What the SQL of *queryset* is made from, hashable and equal for two querysets built alike,
    or None (*without*, *limits*: see ``_query_state``).  Django's query parts compare by what
    they are made of (expressions, lookups and ``WHERE`` nodes by their ``identity``); a part that
    only compares as itself (no ``__eq__``) differs per queryset, so it costs a compile, never a
    wrong key.  Every attribute of the ``Query`` is read, so a part Django adds later is not
    missed; a ``Prefetch`` (equal to any other of its path) by its path, ``to_attr`` and queryset."""
    lookups: list[Hashable] = []
    for lookup in queryset._prefetch_related_lookups:
        if isinstance(lookup, Prefetch):  # equal to any Prefetch of its path: read what it loads
            inner = None if lookup.queryset is None else _fingerprint(lookup.queryset)
            if inner is None and lookup.queryset is not None:
                return None
            lookups.append(("Prefetch", lookup.prefetch_through, lookup.to_attr, inner))
        else:
            lookups.append(lookup)
    try:
        return (queryset.model, queryset._db, tuple(lookups), _query_state(queryset.query, without, limits))
    except TypeError:  # a part neither hashable nor a container
        return None


def _sql_key(shape: Shape) -> Hashable:
    """``queryset_key(shape.queryset)``, compiled once per query structure (see ``_fingerprint``,
    read off the queryset as returned: the shape's own is made only to compile it)."""
    fingerprint = _fingerprint(shape._source, shape._index, limits=False)
    if fingerprint is None:
        return queryset_key(shape.queryset)
    key = _SQL_KEYS.get(fingerprint)
    if key is None:
        key = queryset_key(shape.queryset)
        if len(_SQL_KEYS) >= _SQL_KEYS_MAX:
            _SQL_KEYS.clear()
        _SQL_KEYS[fingerprint] = key
    return key


_WINDOWS: dict[str, bool] = {}  # by alias: a backend's features do not change (no lock: either answer is right)


def windows(db: str) -> bool:
    """Whether the database *db* has window functions (a slice, a page, a count per parent)."""
    found = _WINDOWS.get(db)
    if found is None:
        found = _WINDOWS[db] = bool(connections[db].features.supports_over_clause)
    return found


# (parent model, row model) -> the fields whose column equals a parent's key in a relation between them
_COLUMNS: dict[tuple[type, type], frozenset[Any]] = {}


def relation_columns(parent: type[Model], model: type[Model]) -> frozenset[Any]:
    """The fields of *model* (or of a many-to-many through model) that hold a key of a *parent*
    instance in the relations from *parent* to *model*: ``Book.author`` for ``Author.books``, the
    through table's foreign key to ``Book`` for ``Book.tags``, the ``object_id`` field for a
    ``GenericRelation``."""
    parent = parent._meta.concrete_model
    model = model._meta.concrete_model
    key = (parent, model)
    found = _COLUMNS.get(key)
    if found is not None:
        return found
    fields: set[Any] = set()
    for field in parent._meta.get_fields(include_hidden=True):
        related: Any = getattr(field, "related_model", None)
        meta: Any = getattr(related, "_meta", None)
        if not isinstance(related, type) or meta is None or meta.concrete_model is not model:
            continue
        if field.auto_created and not field.concrete:  # a reverse relation: ManyToOneRel, ManyToManyRel
            if field.many_to_many:  # Tag.books: the through table's key to the tag
                through = field.through._meta
                fields.add(through.get_field(field.field.m2m_reverse_field_name()))
            elif field.one_to_many or field.one_to_one:  # Author.books: Book.author
                fields.add(field.field)
        elif field.many_to_many and getattr(field, "remote_field", None) is not None \
                and getattr(field.remote_field, "through", None) is not None:  # Book.tags
            fields.add(field.remote_field.through._meta.get_field(field.m2m_field_name()))
        elif field.one_to_many and hasattr(field, "object_id_field_name"):  # a GenericRelation
            fields.add(model._meta.get_field(field.object_id_field_name))
    found = _COLUMNS[key] = frozenset(fields)
    return found


def shape_of(queryset: Any, parent: Any) -> Optional[Shape]:
    """The ``Shape`` of *queryset*, a queryset a resolver returned for *parent*, or None (see the module notes).
    *parent* may be a model class: the parent's class is all that is read of it."""
    if not isinstance(queryset, QuerySet) or queryset._result_cache is not None \
            or queryset._iterable_class is not ModelIterable or queryset._fields is not None:
        return None
    query = queryset.query
    if query.combinator is not None or query.select_for_update or query.distinct_fields \
            or query.values_select or isinstance(query.group_by, tuple) or query.is_empty():
        return None
    where = query.where
    if where.connector != AND or where.negated:
        return None
    columns = relation_columns(parent if isinstance(parent, type) else type(parent), queryset.model)
    if not columns:
        return None
    found = None
    for i, child in enumerate(where.children):
        if isinstance(child, Exact) and isinstance(child.lhs, Col) and child.lhs.target in columns:
            value = child.rhs
            if hasattr(value, "resolve_expression") or isinstance(value, Model):
                continue
            try:
                hash(value)
            except TypeError:
                continue
            found = i
            break
    if found is None:
        return None
    low, high = query.low_mark, query.high_mark
    sliced = bool(low) or high is not None
    if sliced and (query.distinct or not windows(queryset.db)):
        return None
    lookup = where.children[found]
    return Shape(queryset, found, lookup.lhs, lookup.rhs, low, high, _known(queryset))


def _known(queryset: QuerySet[Any]) -> Optional[tuple[Any, Any]]:
    """The one instance a related manager's queryset sets on its rows, as ``(field, instance)``, or None."""
    known = queryset._known_related_objects
    if len(known) != 1:
        return None
    ((field, instances),) = known.items()
    if len(instances) != 1 or getattr(field, "target_field", None) is None:
        return None
    return field, next(iter(instances.values()))

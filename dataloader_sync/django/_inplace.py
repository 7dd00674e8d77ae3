"""Relations evaluated in place: ``self.books.count()`` in a resolver or a property, once per level.

A resolver (or a model ``@property`` or method a field reads) that
evaluates a related manager's queryset where it stands —
``self.books.count()``, ``.exists()``, ``.first()``/``.last()``,
``.aggregate(...)``, ``len()``, iteration, ``list()`` — needs its answer
at once: it cannot be a loader's future.  So the answer is learned for the
level: when the first parent of a level evaluates a query shape
(``_queryset_shapes.shape_of``: the queryset minus the parent's condition),
that shape is evaluated for every parent of the level the execution holds
(its ``Levels.peers_of``; for a row this module served, the rows of the
same load) in one statement, memoized for the execution, and
the other parents are answered from the memo:

- rows (iteration, ``len()``, ``list()``, ``bool()``, ``first()``/``last()``
  and indexing, which Django runs as a slice of one row): ``Shape.load``,
  slices as windows over the parent key in the statement's order;
- ``count()`` and ``exists()``: one grouped ``COUNT(*)`` over the parent
  column (they share it), a slice applied to each parent's count;
- ``aggregate()``: the same aggregates grouped over the parent column; a
  parent with no row gets the answer of an empty set, computed once, by the
  first such parent running its own as written.

A to-one relation read in place (``obj.publisher.name`` in a method, a
resolver or a ``@property``, the instance not holding it) is answered the
same way, on every Django: when the first instance of a level misses a
forward many-to-one or one-to-one cache, Django asks the descriptor's
``get_object(instance)`` (Django >= 6.1: through ``FETCH_ONE``; the other
fetch modes never ask it); the seam loads the targets of every instance of
its level that does not hold the relation in one statement
(``descriptor.get_queryset(instance=...)`` filtered on the target column,
as ``get_object`` filters it, what ``prefetch_related_objects`` would load)
and answers each asking instance with a fresh copy of its target, as
``get_object`` gives fresh instances; Django caches it as always.  An
instance holding the relation never asks; a ``None`` foreign key never asks
either; a dangling one, a deferred one on a peer, a composite foreign key,
a peer of another class or database are left to ``get_object`` as written.
The targets served are a level for the next hop (``obj.publisher.country``).

Two forms are looked at.  A queryset a related manager made names its
instance (the ``instance`` hint; Django shares one hints dict between
clones, so a ``Prefetch`` queryset's may name a sibling: the parent is the
related manager's known instance where there is one, and a parent is
recognised by its key).  A manager's queryset with no hints that compares a
foreign key with a key at the top of its ``WHERE``
(``Book.objects.filter(author=self)``, ``filter(author_id=self.pk)``,
``Book.objects.filter(tags=tag)``) names its parent by that key only: the
parent is an instance of the key's model with that key that the execution
holds at the level being resolved (``LevelSource.find``; its key read only
where loaded), else a row served in place; found once per shape per
level, since the other parents' keys are then in the memo.  The same
queryset with no such parent (a root resolver's
``Book.objects.filter(author_id=5)``) runs as written, and that key of that
shape is not looked for again in the execution (one search, not one per
evaluation).  Anything not
recognised runs as written: outside an execution
with the switch, on another thread than the execution's, in a mutation's
execution, in a field wrapped by ``no_auto_relations`` (its resolver and
the queryset it returns), a parent the execution does not hold at a level,
a queryset ``shape_of`` rejects, a ``count``/``exists`` of a
``distinct()`` or aggregating queryset, an ``aggregate`` of an annotated,
sliced or ``distinct()`` one, rows that carry prefetched relations once
they have been served (other rows are served as fresh copies each time, as
Django gives fresh instances), and everything after a statement that is not a
read runs on the execution's thread (a ``save()``, ``delete()``,
``update()``, ``bulk_create()``, raw SQL: the memo is dropped and the seam
steps aside for the rest of the execution; in mutations it is off).

The seam: Django offers no hook for a related manager's queryset
evaluated in place, so ``install()`` (called once, when the Django
integration of auto relations is imported) replaces five methods of
Django's ``QuerySet`` with wrappers that call the originals: ``count``,
``exists``, ``aggregate``, the private ``_fetch_all`` (what iteration,
``len()``, ``bool()``, indexing, ``first()``, ``last()`` and ``get()``
run), the private ``_iterator`` (what ``iterator()`` runs once it has
checked its arguments; the answer is looked up when the first row is
asked, as Django runs its statement then; an ``iterator()`` with
prefetches and no ``chunk_size``, which prefetches nothing on Django 4.2,
runs as written), and ``ForwardManyToOneDescriptor.get_object`` (what a
to-one read that misses its cache runs; ``ForwardOneToOneDescriptor``'s
calls it).  Writes are seen by an execution wrapper (Django's public
``connection.execute_wrappers``) put on the thread's connections for the
execution only, never by a signal: a listener of ``m2m_changed`` or
``post_delete`` would make Django's fast paths (``add()`` of a
many-to-many, ``QuerySet.delete()``) cost a select more everywhere.
For REST framework's test mode (``DATALOADER_SYNC_REST_FRAMEWORK_STRICT``,
``rest_framework/_strict``), ``watch_rows`` makes the wrappers tell what a
queryset run as written reads a row of (``InPlace.asking``: ``row_of``, or
the instance whose to-one read misses), and ``InPlace.loading`` tells a
level's load from a field's own statements (``busy`` is both, and a
``no_auto_relations`` field's too).
Outside an execution with the switch each wrapper costs one context-variable
read and one more Python call before the original (``tools/bench_inplace.py`` measures it: about
100 ns per call on CPython 3.11).  The Django internals read:
``QuerySet._hints`` (``instance``), ``_result_cache``, ``_iterator``,
``_prefetch_related_lookups``, ``Query.where`` (``Exact`` of a ``Col``), ``_prefetch_done``,
``_chain()``, ``_known_related_objects`` (through ``Shape``),
``Model._state`` (``fields_cache``, and ``peers`` on Django >= 6.1, kept
by copies as ``FETCH_PEERS`` sets them), ``Query.distinct``, ``group_by``,
``extra``, ``annotations``, a relation field's ``target_field`` and
``get_cached_value``; for the copies served, what ``copy.copy`` of a model
instance runs (``Model.__reduce__``/``__getstate__``/``__setstate__``,
``ModelState.__getstate__`` on Django >= 6.1, ``DJANGO_VERSION_PICKLE_KEY``),
made directly where a model keeps Django's own (``_copied``); the rest is
``_queryset_shapes``'.  Tests cover
Django 4.2, 5.2 and 6.1.

Guarantees:
- The answers are the ones the queryset would give as written: a memo entry
  is the answer of one shape (its SQL, database, parent column and slice)
  for one parent key, whatever predicted the siblings.  A row's related
  manager instance is the asking parent's, as Django sets it.
- Nothing outlives the execution: the state lives on the execution context
  (or strawberry-django's ``AutoRelationsExtension``, whose ``on_execute``
  starts it), the context variable holds it weakly and is reset when the
  operation returns; the memo is cleared then.
- No lock is held while Django or user code runs; ``install`` takes one
  only to replace the methods once.
"""
from __future__ import annotations

import contextvars
import copy
import copyreg
import threading
import weakref
from collections.abc import Sequence
from typing import Any, Callable, Optional

import django
from django.db import DJANGO_VERSION_PICKLE_KEY, connections
from django.db.models import Count, Model, QuerySet
from django.db.models.base import ModelState
from django.db.models.expressions import Col
from django.db.models.lookups import Exact
from django.db.models.sql.where import AND

from .._execution_levels import current_levels
from ._connections import batch_connection
from ._queryset_shapes import PARENT, Shape, shape_of
from ._querysets import key_chunks, queryset_key

__all__ = ["InPlace", "answering", "install", "is_mutation", "left_alone", "row_of", "run_alone", "start",
           "unwatch_rows", "watch_rows"]

_DJANGO_VERSION = django.__version__
_N = "_dataloader_sync_n"  # the grouped count's annotation
_MISSING: Any = object()
_UNWATCHED: Any = object()  # InPlace.asking when the REST framework test mode does not watch the execution

_Ref = Optional["weakref.ReferenceType[InPlace]"]
#: ``_manager_querysets.watch``, given by ``_auto`` (which imports both): called with the foreign key of a
#: related manager whose queryset a level loaded, so that its next parents' querysets are recorded.
_watch_known: list[Callable[[Any], None]] = []
_current: contextvars.ContextVar[_Ref] = contextvars.ContextVar("dataloader_sync_inplace", default=None)


class _Rows:
    """One shape's rows: the parent keys loaded, each one's rows and the instance the load set on them."""

    __slots__ = ("group", "instances", "loaded", "rows")

    def __init__(self) -> None:
        self.loaded: set[Any] = set()
        self.rows: dict[Any, list[Any]] = {}  # the rows as loaded: each asker gets copies
        self.instances: dict[Any, Any] = {}
        self.group: list[Any] = []  # the rows of the last load: the level of the rows served from it


class InPlace:
    """One execution's in-place answers (its thread only; see the module notes)."""

    __slots__ = ("thread", "memo", "groups", "alone", "busy", "loading", "asking", "off", "__weakref__")

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.memo: dict[Any, Any] = {}
        self.groups: dict[int, tuple[Any, list[Any]]] = {}  # id(row served) -> (the row, its level)
        self.alone: dict[int, QuerySet[Any]] = {}  # querysets of no_auto_relations fields: as written
        self.busy = False  # loading, or in a no_auto_relations field: querysets run as written
        self.loading = False  # a level's load (``load``), not a field's own statements: the test mode skips it
        #: the row of the statement run as written now (``row_of``), for the REST framework test mode
        #: (``watch_rows``); ``_UNWATCHED`` when it does not watch
        self.asking: Any = _UNWATCHED
        self.off = False  # a row was written: the seam steps aside

    def shape(self, queryset: QuerySet[Any]) -> Optional[tuple[Shape, Optional[Model]]]:
        """The shape of a related manager's *queryset* and its parent, when this state answers it; of a
        manager's queryset that names its parent by its key, and None for the parent (``level`` finds it)."""
        if self.busy or self.off or threading.get_ident() != self.thread or id(queryset) in self.alone:
            return None
        parent = queryset._hints.get("instance")
        if not isinstance(parent, Model):
            if queryset._hints:
                return None
            shape = _named_shape(queryset)
            return None if shape is None else (shape, None)
        shape = shape_of(queryset, parent)
        if shape is None:
            return None
        return shape, parent

    def level(self, shape: Shape, parent: Optional[Model], loaded: Any) -> Optional[dict[Any, Any]]:
        """``{key: instance}`` of the parents of the asking parent's level to load *shape* for (not in
        *loaded*); None when the level is unknown, does not hold the asking parent's key or holds no
        other instance with a key to load (a level of one instance runs its statement as written: the same
        one statement; instances that all hold one key are loaded once and answered from the memo).  The
        asking parent is the related manager's instance (*shape*'s ``known``, else *parent*, the ``instance``
        hint: Django shares a hints dict between clones, so a prefetch may have written a sibling there; a
        key is what a parent is recognised by).  *parent* None: a
        manager's queryset named it by its key only; it is the object held with that key (``_named_parent``)."""
        if shape.known is not None:
            parent = shape.known[1]
        levels = current_levels()  # the running execution's (DataLoaderExecutionContext's Levels)
        if parent is None:
            missed: set[Any] = self.memo.setdefault(("missed", shape.key), set())
            parent = None if shape.value in missed else self._named_parent(levels, shape)
            if parent is None:  # not looked for again: a key no level holds costs one search, not one a parent
                missed.add(shape.value)
                return None
        peers = levels.peers_of(parent) if levels is not None else None
        if peers is None:  # a row served in place: the rows of its load are its level
            known = self.groups.get(id(parent))
            peers = known[1] if known is not None and known[0] is parent else None
        value_of = _value_reader(shape, parent)
        if peers is None or value_of is None:
            return None
        cls, db = parent.__class__, parent._state.db
        found: dict[Any, Any] = {}
        instances = 0  # of the level, with a key to load: all may hold one key (the same user of every pin)
        for peer in peers:
            if peer.__class__ is cls and peer._state.db == db:
                value = value_of(peer)
                if value is not None and value not in loaded:
                    found.setdefault(value, peer)
                    instances += 1
        if shape.value not in found or instances < 2:  # a level of one instance: its statement as written
            return None
        if shape.known is not None:
            found[shape.value] = parent
        return found

    def _named_parent(self, levels: Any, shape: Shape) -> Optional[Model]:
        """The instance a manager's queryset names by its key (``Book.objects.filter(author=self)``:
        ``shape.value``): one the execution holds at the level being resolved, else a row served in place
        with that key; None when none is (the queryset runs as written)."""
        target = shape.column.target
        model, attname, value = target.related_model, target.target_field.attname, shape.value
        prep = target.get_prep_value

        def match(obj: Any) -> bool:  # a key not loaded (deferred) is not read: no statement
            if not isinstance(obj, model):
                return False
            raw = obj.__dict__.get(attname)
            return raw is not None and prep(raw) == value

        found = levels.find(match) if levels is not None else None
        if found is None:
            for row, _ in self.groups.values():
                if match(row):
                    return row
        return found

    def load(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``, a level's load: its querysets run as written (``busy``), and its statements are
        the seam's batch (``loading``: the REST framework test mode does not count them)."""
        self.busy = self.loading = True
        try:
            return fn(*args)
        finally:
            self.busy = self.loading = False

    # -- rows ---------------------------------------------------------------------
    def rows(self, queryset: QuerySet[Any]) -> Optional[list[Any]]:
        """The rows of *queryset* from the level's load, or None (run it as written)."""
        found = self.shape(queryset)
        if found is None:
            return None
        shape, parent = found
        key = ("rows", shape.key)
        entry: Optional[_Rows] = self.memo.get(key)
        if entry is None or shape.value not in entry.loaded:
            level = self.level(shape, parent, () if entry is None else entry.loaded)
            if level is None:
                return None
            if entry is None:
                entry = self.memo[key] = _Rows()
            self._load_rows(entry, shape, level)
            if shape.known is not None and _watch_known:  # its next parents recorded (_recorded_querysets)
                _watch_known[0](shape.known[0])
        return self.served(entry, shape.value, shape.known)

    def served(self, entry: _Rows, value: Any, known: Optional[tuple[Any, Any]]) -> Optional[list[Any]]:
        """The rows *entry* loaded for the key *value*, as an evaluation gives them (fresh copies, the
        related manager's instance of *known* set on them), or None (run the queryset as written)."""
        rows = entry.rows.get(value)
        if rows is None:  # served once, with the prefetches on its rows
            return None
        instance = known[1] if known is not None else None
        loaded_with = entry.instances.get(value)
        if any("_prefetched_objects_cache" in row.__dict__ for row in rows):
            del entry.rows[value]
            _own_instance(rows, known, loaded_with)
            served = rows
        else:
            served = [_fresh(row, loaded_with, instance) for row in rows]
            if served and "peers" in rows[0]._state.__dict__:  # Django >= 6.1, FETCH_PEERS: its own rows
                peers = [weakref.ref(row) for row in served]
                for row in served:
                    row._state.peers = peers
        group = entry.group
        for row in served:
            self.groups[id(row)] = (row, group)
        return served

    def _load_rows(self, entry: _Rows, shape: Shape, level: dict[Any, Any]) -> None:
        values = list(level)
        known = list(level.values()) if shape.known is not None else []
        loaded = self.load(shape.load, values, known)
        for value in values:
            entry.rows[value] = loaded.get(value, [])
        entry.loaded.update(values)
        entry.instances.update(level)
        entry.group = [row for rows in loaded.values() for row in rows]

    # -- count, exists ------------------------------------------------------------
    def count(self, queryset: QuerySet[Any]) -> Optional[int]:
        """``queryset.count()`` from the level's grouped count, or None (run it as written)."""
        found = self.shape(queryset)
        if found is None:
            return None
        shape, parent = found
        query = shape.queryset.query
        if query.distinct or query.group_by is not None or query.extra:
            return None
        qkey, db, alias, target = shape.key[:4]  # type: ignore[index]
        key = ("count", qkey, db, alias, target)
        counts: Optional[dict[Any, int]] = self.memo.get(key)
        if counts is None or shape.value not in counts:
            level = self.level(shape, parent, () if counts is None else counts)
            if level is None:
                return None
            if counts is None:
                counts = self.memo[key] = {}
            counts.update(self.load(_counts, shape, list(level)))
            if shape.known is not None and _watch_known:  # its next parents recorded (_recorded_querysets)
                _watch_known[0](shape.known[0])
        total = counts[shape.value]
        end = total if shape.high is None else min(total, shape.high)
        return max(0, end - shape.low)

    # -- aggregate ----------------------------------------------------------------
    def aggregate(self, queryset: QuerySet[Any], original: Callable[..., Any], args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> Any:
        """``queryset.aggregate(*args, **kwargs)`` from the level's grouped aggregate, or ``_MISSING``."""
        if queryset._result_cache is not None:  # Django aggregates in SQL all the same (a prefetched relation)
            queryset = queryset._chain()
        found = self.shape(queryset)
        if found is None:
            return _MISSING
        shape, parent = found
        named = _named_aggregates(args, kwargs)
        query = shape.queryset.query
        if named is None or query.distinct or query.group_by is not None or query.extra or query.annotations \
                or shape.low or shape.high is not None:
            return _MISSING
        grouped = _grouped(shape).values(PARENT).annotate(**named)
        key = ("aggregate", queryset_key(grouped), shape.queryset.db)
        entry: Optional[list[Any]] = self.memo.get(key)  # [answers by key, the empty answer]
        if entry is None or shape.value not in entry[0]:
            level = self.level(shape, parent, () if entry is None else entry[0])
            if level is None:
                return _MISSING
            if entry is None:
                entry = self.memo[key] = [{}, _MISSING]
            entry[0].update(self.load(_aggregates, shape, grouped, list(named), list(level)))
        answer = entry[0][shape.value]
        if answer is not None:
            return dict(answer)
        if entry[1] is _MISSING:  # the first parent with no row: its own statement, the answer of any empty set
            entry[1] = original(queryset, *args, **kwargs)
        return dict(entry[1])


def _named_shape(queryset: QuerySet[Any]) -> Optional[Shape]:
    """The ``Shape`` of a manager's *queryset* that compares a foreign key with a parent's key at the top
    of its ``WHERE`` (``Book.objects.filter(author=self)``, ``Book.objects.filter(tags=tag)``: the through
    table's key), the first such key's model taken as the parent's class; or None.  Reads
    ``Query.where`` and its ``Exact`` lookups, as ``_queryset_shapes``."""
    if queryset._result_cache is not None:
        return None
    where = queryset.query.where
    if where.connector != AND or where.negated:
        return None
    tried: list[Any] = []
    for child in where.children:
        if not isinstance(child, Exact) or not isinstance(child.lhs, Col):
            continue
        target = child.lhs.target
        model = getattr(target, "related_model", None)
        if not isinstance(model, type) or getattr(target, "target_field", None) is None or model in tried:
            continue
        tried.append(model)
        shape = shape_of(queryset, model)
        if shape is not None and shape.column.target is target:
            return shape
    return None


def _value_reader(shape: Shape, parent: Model) -> Optional[Callable[[Model], Any]]:
    """How a parent's key for *shape*'s column is read off an instance of *parent*'s class, or None."""
    target = shape.column.target
    if getattr(target, "related_model", None) is not None and getattr(target, "target_field", None) is not None:
        if not isinstance(parent, target.related_model):  # a foreign key (a reverse relation, a through table's)
            return None
        attname = target.target_field.attname
    else:  # a GenericRelation's object id: the parent's primary key
        attname = parent._meta.pk.attname
    prep = target.get_prep_value

    def value_of(instance: Model) -> Any:
        raw = getattr(instance, attname)
        return None if raw is None else prep(raw)

    return value_of


def _own_instance(rows: list[Any], known: Optional[tuple[Any, Any]], loaded_with: Any) -> None:
    """Give each row the asking parent's instance where the load set another one (Django sets the
    related manager's instance on rows that do not hold one of their own, e.g. by ``select_related``)."""
    if known is None or loaded_with is known[1]:
        return
    field, instance = known
    for row in rows:
        if field.get_cached_value(row, None) is loaded_with:
            setattr(row, field.name, instance)


def _fresh(row: Model, loaded_with: Any, instance: Any) -> Model:
    """A copy of *row* and of the instances it holds (``select_related``), as a new evaluation gives
    fresh ones; where it holds *loaded_with* (the related manager's instance the load set), *instance*."""
    copied = _copied(row)  # Model.__getstate__: its own _state and fields cache
    cache = copied._state.fields_cache
    for name, value in cache.items():
        if value is loaded_with and loaded_with is not None:
            cache[name] = instance
        elif isinstance(value, Model):
            cache[name] = _fresh(value, loaded_with, instance)
    return copied


# model class -> whether ``copy.copy`` of its instances is Django's own Model.__reduce__ path (``_copied``)
_PLAIN_COPY: dict[type, bool] = {}
_STATE_GETSTATE: Any = ModelState.__dict__.get("__getstate__")  # Django >= 6.1: drops the weak peers


def _plain_copy(cls: type) -> bool:
    found = _PLAIN_COPY.get(cls)
    if found is None:
        kind: Any = cls
        found = _PLAIN_COPY[cls] = (
            kind.__reduce__ is Model.__reduce__ and kind.__reduce_ex__ is object.__reduce_ex__
            and kind.__getstate__ is Model.__getstate__ and kind.__setstate__ is Model.__setstate__
            and getattr(kind, "__copy__", None) is None and cls not in copyreg.dispatch_table)
    return found


def _copied(row: Model) -> Model:
    """``copy.copy(row)``, made directly for a model whose copy is Django's own: what ``Model.__reduce__``,
    ``__getstate__`` and ``__setstate__`` make of it (its ``__dict__`` and the pickle version key, a copy
    of its ``_state`` and fields cache), without the pickle protocol's calls; anything else by ``copy.copy``."""
    cls = row.__class__
    state = row.__dict__
    old = state.get("_state")
    if type(old) is not ModelState or not _plain_copy(cls):
        return copy.copy(row)
    for value in state.values():
        if isinstance(value, memoryview):  # kept as bytes by __getstate__, made a memoryview again
            return copy.copy(row)
    new_state = object.__new__(ModelState)
    new_state.__dict__.update(_STATE_GETSTATE(old) if _STATE_GETSTATE is not None else old.__dict__)
    new_state.fields_cache = new_state.fields_cache.copy()
    copied = object.__new__(cls)
    values = copied.__dict__
    values.update(state)
    values["_state"] = new_state
    values[DJANGO_VERSION_PICKLE_KEY] = _DJANGO_VERSION
    return copied


def _grouped(shape: Shape) -> QuerySet[Any]:
    return shape.queryset.order_by().prefetch_related(None).annotate(**{PARENT: shape.column})


def _counts(shape: Shape, values: Sequence[Any]) -> dict[Any, int]:
    """``{key: its row count}`` for every key of *values* (0 without rows), one statement per chunk."""
    counts = dict.fromkeys(values, 0)
    with batch_connection(shape.queryset.db):
        for chunk in key_chunks(_grouped(shape), PARENT, shape.column.output_field, values):
            for row in chunk.values(PARENT).annotate(**{_N: Count("*")}).order_by():
                counts[row[PARENT]] = row[_N]
    return counts


def _aggregates(shape: Shape, grouped: QuerySet[Any], names: list[str],
                values: Sequence[Any]) -> dict[Any, Optional[dict[str, Any]]]:
    """``{key: its aggregates}`` for every key of *values* (None without rows), one statement per chunk."""
    found: dict[Any, Optional[dict[str, Any]]] = dict.fromkeys(values)
    with batch_connection(shape.queryset.db):
        for chunk in key_chunks(grouped, PARENT, shape.column.output_field, values):
            for row in chunk.order_by():
                found[row[PARENT]] = {name: row[name] for name in names}
    return found


def _named_aggregates(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The aggregates of an ``aggregate()`` call by name, as Django names them, or None (not plain)."""
    named: dict[str, Any] = {}
    for arg in args:
        try:
            alias = arg.default_alias
        except (AttributeError, TypeError):
            return None
        if not isinstance(alias, str) or alias in kwargs or alias in named:
            return None
        named[alias] = arg
    for name, value in kwargs.items():
        if name in named or name == PARENT:
            return None
        named[name] = value
    if not named or not all(getattr(v, "contains_aggregate", False) is True for v in named.values()):
        return None
    return named


# -- to-one relations read in place -----------------------------------------------------

class _Targets:
    """One to-one relation's targets loaded for a level: by the key the instances hold, and the rows of the
    last load (the level of the copies served from it)."""

    __slots__ = ("group", "loaded", "rows")

    def __init__(self) -> None:
        self.loaded: set[Any] = set()
        self.rows: dict[Any, Any] = {}  # key -> the target as loaded: each asker gets a copy
        self.group: list[Any] = []


def to_one(state: InPlace, descriptor: Any, instance: Model) -> Any:
    """``descriptor.get_object(instance)`` from the level's load, or ``_MISSING`` (run it as written)."""
    if state.busy or state.off or threading.get_ident() != state.thread:
        return _MISSING
    field = descriptor.field
    if len(field.related_fields) != 1:  # a composite foreign key
        return _MISSING
    attname, target = field.attname, field.target_field
    value = instance.__dict__.get(attname)
    if value is None:
        return _MISSING
    prep = target.get_prep_value
    value = prep(value)
    queryset = descriptor.get_queryset(instance=instance)
    key = ("to_one", field, queryset.db)
    entry: Optional[_Targets] = state.memo.get(key)
    if entry is None or value not in entry.loaded:
        levels = current_levels()
        peers = levels.peers_of(instance) if levels is not None else None
        if peers is None:  # a row or a target served in place: the rows of its load are its level
            known = state.groups.get(id(instance))
            peers = known[1] if known is not None and known[0] is instance else None
        if peers is None:
            return _MISSING
        loaded = () if entry is None else entry.loaded
        cls, db = instance.__class__, instance._state.db
        values = {value}
        others = False  # another instance of the level will ask: one statement for all (one target or many)
        for peer in peers:
            if peer is not instance and peer.__class__ is cls and peer._state.db == db \
                    and not field.is_cached(peer):
                raw = peer.__dict__.get(attname)  # a deferred key is left to its own read
                if raw is not None and (raw := prep(raw)) not in loaded:
                    values.add(raw)
                    others = True
        if not others:
            return _MISSING
        if entry is None:
            entry = state.memo[key] = _Targets()
        rows = state.load(_targets, queryset, target, list(values))
        entry.rows.update(rows)
        entry.loaded.update(values)
        entry.group = list(rows.values())
    row = entry.rows.get(value)
    if row is None:  # no such row: Django's own read raises DoesNotExist
        return _MISSING
    served = _fresh(row, None, None)
    state.groups[id(served)] = (served, entry.group)
    return served


def _targets(queryset: QuerySet[Any], target: Any, values: Sequence[Any]) -> dict[Any, Any]:
    """``{key: its row}`` of the rows of *queryset* whose *target* column is one of *values*."""
    found: dict[Any, Any] = {}
    prep = target.get_prep_value
    with batch_connection(queryset.db):
        for chunk in key_chunks(queryset.order_by(), target.name, target, values):
            for row in chunk:
                found[prep(getattr(row, target.attname))] = row
    return found


def _wrap_get_object(original: Callable[[Any, Model], Any]) -> Callable[[Any, Model], Any]:
    def get_object(self: Any, instance: Model) -> Any:
        ref = _current.get()
        if ref is None:
            return original(self, instance)
        state = ref()
        found = _MISSING if state is None else to_one(state, self, instance)
        if found is not _MISSING:
            return found
        if state is None or state.asking is _UNWATCHED:
            return original(self, instance)
        previous, state.asking = state.asking, instance  # the asking instance is the statement's row
        try:
            return original(self, instance)
        finally:
            state.asking = previous

    return get_object


_installed_descriptor: dict[str, Any] = {}  # "get_object" -> Django's own ForwardManyToOneDescriptor method


def _install_to_one() -> None:
    """Put the ``get_object`` wrapper on ``ForwardManyToOneDescriptor`` (under ``_install_lock``, once)."""
    from django.db.models.fields.related_descriptors import ForwardManyToOneDescriptor

    original = ForwardManyToOneDescriptor.__dict__["get_object"]
    _installed_descriptor["get_object"] = original
    wrapper = _wrap_get_object(original)
    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    wrapper.__doc__ = original.__doc__
    ForwardManyToOneDescriptor.get_object = wrapper


# -- the execution's state ------------------------------------------------------------

def start(owner: Any, mutation: bool = False) -> Optional[Callable[[], None]]:
    """Make in-place answers current for the execution *owner* runs (none for a *mutation*); returns
    what ends them.  The state lives on *owner* (the execution context, or strawberry-django's
    extension) for as long as the execution runs."""
    if mutation:
        return None
    state = InPlace()
    owner._dataloader_sync_inplace = state
    ref = weakref.ref(state)
    token = _current.set(ref)
    watched = list(connections.all())  # this thread's (Django's connections are per thread)
    watch = _WriteWatch(ref)
    for connection in watched:
        connection.execute_wrappers.append(watch)

    def end() -> None:
        for connection in watched:
            try:
                connection.execute_wrappers.remove(watch)
            except ValueError:  # removed by someone else
                pass
        _current.reset(token)
        state.memo.clear()
        state.groups.clear()
        state.alone.clear()
        state.off = True
        owner._dataloader_sync_inplace = None

    return end


def answering() -> Optional[InPlace]:
    """The running execution's in-place state when it answers on this thread now (not in a
    ``no_auto_relations`` field nor a load, not after a write), else None: what a seam asks first
    (``_manager_querysets``).  Outside an execution with the switch: one context-variable read."""
    ref = _current.get()
    if ref is None:
        return None
    state = ref()
    if state is None or state.busy or state.off or threading.get_ident() != state.thread:
        return None
    return state


def is_mutation(ctx: Any) -> bool:
    """Whether the graphql-core execution *ctx* runs a mutation."""
    operation = getattr(getattr(ctx, "operation", None), "operation", None)
    return getattr(operation, "value", None) == "mutation"


def left_alone(ctx: Any, fn: Callable[..., Any]) -> Callable[..., Any]:
    """*fn* (a ``no_auto_relations`` field's resolver) run with no in-place answers, nor for the
    queryset it returns (graphql-core iterates it after the call)."""

    def resolve_left_alone(root: Any, info: Any, **args: Any) -> Any:
        return run_alone(ctx, fn, root, info, **args)

    resolve_left_alone.__wrapped__ = fn  # type: ignore[attr-defined]
    return resolve_left_alone


def run_alone(owner: Any, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` with no in-place answers of the execution *owner* runs, nor for the
    queryset it returns."""
    state: Optional[InPlace] = getattr(owner, "_dataloader_sync_inplace", None)
    if state is None or state.busy:
        return fn(*args, **kwargs)
    state.busy = True
    try:
        value = fn(*args, **kwargs)
    finally:
        state.busy = False
    if isinstance(value, QuerySet):
        state.alone[id(value)] = value
    return value


#: How the statements an execution may run without writing begin (the in-place loads, savepoints).
_READS = ("SELECT", "SAVEPOINT", "RELEASE")


class _WriteWatch:
    """An execution wrapper (``connection.execute_wrappers``): after a statement that is not a read, the
    execution's in-place answers are dropped and the seam steps aside (see the module notes)."""

    __slots__ = ("state",)

    def __init__(self, state: Callable[[], Optional[InPlace]]) -> None:
        self.state = state

    def __call__(self, execute: Callable[..., Any], sql: Any, params: Any, many: bool, context: Any) -> Any:
        if not (isinstance(sql, str) and sql.lstrip()[:9].upper().startswith(_READS)):
            state = self.state()
            if state is not None:
                state.off = True
                state.memo.clear()
                state.groups.clear()
        return execute(sql, params, many, context)


def _wrap_fetch_all(original: Callable[[QuerySet[Any]], None]) -> Callable[[QuerySet[Any]], None]:
    def _fetch_all(self: QuerySet[Any]) -> None:
        ref = _current.get()
        if ref is None or self._result_cache is not None:
            return original(self)
        state = ref()
        rows = None if state is None else state.rows(self)
        if rows is None:
            if state is None or state.asking is _UNWATCHED:
                return original(self)
            _written(state, self, original)
            return None
        self._result_cache = rows
        self._prefetch_done = True  # the level's load ran the prefetches
        return None

    return _fetch_all


def _wrap_iterator(original: Callable[..., Any]) -> Callable[..., Any]:
    def _iterator(self: QuerySet[Any], use_chunked_fetch: bool, chunk_size: Optional[int]) -> Any:
        if _current.get() is None or (chunk_size is None and self._prefetch_related_lookups):
            return original(self, use_chunked_fetch, chunk_size)  # (iterator() then prefetches nothing)
        return _iterated(self, original, use_chunked_fetch, chunk_size)

    return _iterator


def _iterated(queryset: QuerySet[Any], original: Callable[..., Any], use_chunked_fetch: bool,
              chunk_size: Optional[int]) -> Any:
    """``queryset.iterator()``'s rows from the level's load (asked when the first row is, as Django
    runs its statement then), or the original's."""
    ref = _current.get()
    state = None if ref is None else ref()
    rows = None if state is None else state.rows(queryset)
    if rows is None and state is not None and state.asking is not _UNWATCHED:  # its statement runs at the first row
        iterator = original(queryset, use_chunked_fetch, chunk_size)
        first = _written(state, queryset, lambda _: next(iterator, _MISSING))
        if first is not _MISSING:
            yield first
            yield from iterator
    elif rows is None:
        yield from original(queryset, use_chunked_fetch, chunk_size)
    else:
        yield from rows


def _wrap_count(original: Callable[[QuerySet[Any]], int]) -> Callable[[QuerySet[Any]], int]:
    def count(self: QuerySet[Any]) -> int:
        ref = _current.get()
        if ref is None or self._result_cache is not None:
            return original(self)
        state = ref()
        found = None if state is None else state.count(self)
        if found is None:
            return original(self) if state is None or state.asking is _UNWATCHED else _written(state, self, original)
        return found

    return count


def _wrap_exists(original: Callable[[QuerySet[Any]], bool]) -> Callable[[QuerySet[Any]], bool]:
    def exists(self: QuerySet[Any]) -> bool:
        ref = _current.get()
        if ref is None or self._result_cache is not None:
            return original(self)
        state = ref()
        found = None if state is None else state.count(self)
        if found is None:
            return original(self) if state is None or state.asking is _UNWATCHED else _written(state, self, original)
        return found > 0

    return exists


def _wrap_aggregate(original: Callable[..., Any]) -> Callable[..., Any]:
    def aggregate(self: QuerySet[Any], *args: Any, **kwargs: Any) -> Any:
        ref = _current.get()
        if ref is None:
            return original(self, *args, **kwargs)
        state = ref()
        found = _MISSING if state is None else state.aggregate(self, original, args, kwargs)
        if found is not _MISSING:
            return found
        if state is None or state.asking is _UNWATCHED:
            return original(self, *args, **kwargs)
        return _written(state, self, lambda queryset: original(queryset, *args, **kwargs))

    return aggregate


# -- the REST framework test mode's rows --------------------------------------------------

def watch_rows() -> Optional[InPlace]:
    """The running execution's state on this thread, from now on telling the row of each statement it runs
    as written (``InPlace.asking``, see ``row_of``) until ``unwatch_rows``; None when there is none."""
    ref = _current.get()
    state = None if ref is None else ref()
    if state is None or threading.get_ident() != state.thread:
        return None
    state.asking = None
    return state


def unwatch_rows(state: InPlace) -> None:
    """The end of ``watch_rows``: the wrappers tell nothing again."""
    state.asking = _UNWATCHED


def row_of(queryset: QuerySet[Any]) -> Any:
    """What a queryset evaluated as written reads a row of: its related manager's instance (the ``instance``
    hint), else the values its ``WHERE`` compares with a relation or a primary key at the top
    (``Thumbnail.objects.get(original=self, size=...)``: the original's key, not the size), else None."""
    instance = queryset._hints.get("instance")
    if isinstance(instance, Model):
        return instance
    where = queryset.query.where
    if where.connector != AND or where.negated:
        return None
    keys = []
    for child in where.children:
        if isinstance(child, Exact) and isinstance(child.lhs, Col):
            target = child.lhs.target
            if getattr(target, "related_model", None) is None and not getattr(target, "primary_key", False):
                continue
            value = child.rhs
            try:
                hash(value)
            except TypeError:
                continue
            if not hasattr(value, "resolve_expression"):
                keys.append((target, value))
    return tuple(keys) if keys else None


def _written(state: InPlace, queryset: QuerySet[Any], original: Callable[[QuerySet[Any]], Any]) -> Any:
    """``original(queryset)``, run as written with its row told (``row_of``) to the test mode watching."""
    previous, state.asking = state.asking, row_of(queryset)
    try:
        return original(queryset)
    finally:
        state.asking = previous


_install_lock = threading.Lock()
_installed: dict[str, Any] = {}  # name -> Django's own method


def install() -> None:
    """Put the wrappers on ``QuerySet`` (once; see the module notes)."""
    with _install_lock:
        if _installed:
            return
        wraps: tuple[tuple[str, Callable[[Any], Any]], ...] = (
            ("_fetch_all", _wrap_fetch_all), ("count", _wrap_count), ("exists", _wrap_exists),
            ("aggregate", _wrap_aggregate), ("_iterator", _wrap_iterator))
        for name, wrap in wraps:
            original = QuerySet.__dict__[name]
            _installed[name] = original
            wrapper = wrap(original)
            wrapper.__wrapped__ = original
            wrapper.__doc__ = original.__doc__
            setattr(QuerySet, name, wrapper)
        _install_to_one()

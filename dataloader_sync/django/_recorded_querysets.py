"""A reverse foreign key's related manager's queryset, inside an execution with auto relations: recorded, not built.

A resolver (or a ``SerializerMethodField``) the user wrote runs for every
parent and builds its queryset anew each time
(``self.books.filter(published=True).order_by("-year")``): Django's
``Query.clone`` and ``add_q`` per call, tens of microseconds, the largest part
of what the switch costs once the level is loaded in one statement.  Inside an
execution with the switch, the related manager of a reverse foreign key
(``_manager_querysets.watch``) gives, for an instance the execution may hold, a
``RecordedQuerySet``: a ``QuerySet`` subclass (``isinstance(x, QuerySet)``
holds for every framework) that builds no ``Query``.  It records its chain
(``filter``, ``exclude``, ``order_by``, ``annotate``, ``alias``,
``select_related``, ``prefetch_related``, ``only``, ``defer``, ``distinct``,
``reverse``, ``all``, a slice ``[a:b]``), each step with its arguments, and the
chain is its key: a node of a tree of the steps seen (``_NODES``), each
argument read with its type (``1``, ``1.0`` and ``True`` are three keys), so two
parents whose resolvers chained alike have the same node.

Evaluated (iteration, ``len()``, ``bool()``, ``list()``: ``_fetch_all``; ``count()``
and ``exists()``, from the level's grouped count), it is
answered from the execution's in-place rows (``_inplace``): the first
evaluation of a node at a level builds the queryset as Django does and loads
the level through ``_inplace`` (one statement per shape), and learns which
loaded rows the node reads (in ``InPlace.memo``: the shape's key, the parent's
column, the database); the next parents of that level are served those rows
with no ``Query`` built.  Returned to ``_returned_querysets.level_value``
(graphene-django, strawberry-django), the same: the first parent of a field's
node builds, plans and shapes it, the next ones load the loader that shape
keyed.

Anything else materialises it: any attribute read that is not the recorded
state (``.query``, ``.db``, ``iterator()``, ``get()``, an unknown method,
pickling, copying, ``repr()``), a step with an argument that is not a plain
value (a ``QuerySet``, a ``Prefetch``, a list or a set, which may change after
the call while Django reads them at the call, an object of the user's; a
``Q`` is kept as a copy, as read at the call), a step not seen
built before (each step is built by Django the first time its node is met, so
an error is raised where Django raises it), an evaluation the level does not
answer.  Materialising replays the chain on what the related manager's
``get_queryset`` built when it was recorded (its ``_apply_rel_filters`` of
the plain ``Manager``'s queryset, as Django's ``get_queryset`` builds it when
the relation is not prefetched: Django's prefetch may since have kept this
very queryset as the prefetched one) and makes the object that very
``QuerySet`` in place (its ``__dict__`` and class): from then on it is exactly
Django's queryset, with the rows already served kept as its result cache and
whatever else was set on it since it was recorded kept too (Django's
``get_or_create`` sets ``_for_write`` before it first reads the query, so its
``get`` reads the database the router gives writes).

Recorded only when what Django would build is known without building it: the
manager's class is the one Django makes over the related model's plain
``Manager`` (a custom manager or queryset class is built as written), the
instance has a primary key and a non-empty key for the relation, and has not
prefetched it.  Outside an execution with the switch (a ``no_auto_relations``
field, a mutation, after a write, another thread: ``_inplace.answering``) the
wrapper costs one context-variable read and calls Django's own.

Django internals read: a related manager's ``instance``, ``field``, ``_db``,
``get_queryset``, ``_apply_rel_filters`` and the class Django made it from;
``Model._is_pk_set`` (Django >= 5.2); ``Model._state`` (``db``,
``fetch_mode`` on Django >= 6.1), ``_prefetched_objects_cache``; a
``QuerySet``'s ``__dict__`` as a whole (``_result_cache``, ``_prefetch_done``).
Tests cover Django 4.2, 5.2 and 6.1.

Guarantees:
- The rows, their order and every value are those of the queryset as Django
  builds it: a node is served only rows an evaluation of that node's queryset
  at that level loaded, for the key its own instance holds (checked against
  the shape's value when learned).
- ``_NODES`` is bounded (cleared when full; node numbers are never reused, so
  a forgotten node is only a miss); no lock (two threads may both add a
  step; either number is right, one is kept).
"""
from __future__ import annotations

import copy
import datetime
import decimal
import itertools
import uuid
from collections.abc import Hashable
from typing import Any, Optional

from django.db import router
from django.db.models import F, Manager, Model, Q, QuerySet

from ._inplace import InPlace, _value_reader, answering

__all__ = ["RecordedQuerySet", "is_recorded", "materialise", "recorded_root"]

# (node, step) -> the node the step leads to, for steps Django built without an error; roots by their key
_NODES: dict[Hashable, int] = {}
_NODES_MAX = 4096
_numbers = itertools.count(1)

_ATOMS = frozenset({str, int, bool, float, bytes, type(None), datetime.date, datetime.time, datetime.timedelta,
                    uuid.UUID})
_RECORDED = ("_dls_manager", "_dls_node", "_dls_steps")


class _Unrecordable(Exception):
    """An argument that is not a plain value: the step is built as written."""


def _typed(value: Any) -> Hashable:
    """*value* as a hashable that is equal only for values Django builds alike, type included; raises
    ``_Unrecordable`` for anything else."""
    kind = type(value)
    if kind in _ATOMS:
        return (kind, value)
    if kind is datetime.datetime:  # equal instants in two zones are two keys
        return (kind, value, str(value.tzinfo))
    if kind is decimal.Decimal:  # Decimal("1.0") == Decimal("1.00"): by its digits
        return (kind, str(value))
    if kind is tuple:  # (a list or a set may change after the call: Django reads it at the call)
        return (kind, tuple([_typed(v) for v in value]))
    if kind is frozenset:
        return (kind, frozenset([_typed(v) for v in value]))
    if kind is Q:
        return (kind, value.connector, value.negated, tuple([
            (child[0], _typed(child[1])) if type(child) is tuple and len(child) == 2 and type(child[0]) is str
            else _typed(child) for child in value.children]))
    if kind is F:
        return (kind, value.name)
    if isinstance(value, Model):
        pk = value.pk
        if pk is None:
            raise _Unrecordable
        return (kind, _typed(pk))
    constructed = getattr(value, "_constructor_args", None)  # an expression: by what it was made of
    if type(constructed) is tuple and len(constructed) == 2 and hasattr(value, "resolve_expression") \
            and not isinstance(value, QuerySet):
        args, kwargs = constructed
        return (kind, _typed(tuple(args)), tuple([(k, _typed(v)) for k, v in kwargs.items()]))
    raise _Unrecordable


def _step_key(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Hashable:
    return (name, _typed(args), tuple([(k, _typed(v)) for k, v in kwargs.items()]) if kwargs else ())


def _new(manager: Any, node: int, steps: tuple[Any, ...]) -> RecordedQuerySet:
    queryset = object.__new__(RecordedQuerySet)
    queryset.__dict__.update(_dls_manager=manager, _dls_node=node, _dls_steps=steps, model=manager.model,
                             _result_cache=None)
    return queryset


def recorded_root(manager: Any) -> Optional[RecordedQuerySet]:
    """The ``RecordedQuerySet`` of the related *manager*'s ``get_queryset()``, or None (build it as written)."""
    instance = manager.instance
    state = instance.__dict__
    prefetched = state.get("_prefetched_objects_cache")
    field = manager.field
    if prefetched and _cache_name(field.remote_field) in prefetched:
        return None
    is_pk_set = getattr(instance, "_is_pk_set", None)  # Django >= 5.2 (a composite key: each part)
    if (instance.pk is None) if is_pk_set is None else not is_pk_set():
        return None
    targets = field.foreign_related_fields
    if len(targets) != 1:
        return None
    value = getattr(instance, targets[0].attname)
    if value is None or value == "":
        return None
    model_state = instance._state
    key = ("root", type(manager), type(instance), manager._db, getattr(model_state, "fetch_mode", None))
    node = _NODES.get(key)
    if node is None:
        node = _remember(key)
    return _new(manager, node, ())


def _cache_name(rel: Any) -> str:
    """The name a relation's prefetched rows are kept under (``cache_name``, Django >= 5.1)."""
    name = getattr(rel, "cache_name", None)
    return name if isinstance(name, str) else rel.get_cache_name()


def _remember(key: Hashable) -> int:
    if len(_NODES) >= _NODES_MAX:
        _NODES.clear()
    node = _NODES[key] = next(_numbers)
    return node


def is_recorded(value: Any) -> bool:
    """Whether *value* is a ``RecordedQuerySet`` not materialised."""
    return type(value) is RecordedQuerySet


def materialise(queryset: RecordedQuerySet) -> None:
    """Make *queryset* the ``QuerySet`` Django builds for its chain, in place (see the module notes)."""
    recorded = queryset.__dict__
    manager = recorded["_dls_manager"]
    # what the related manager's get_queryset built when it was recorded (its instance had a key and had not
    # prefetched the relation; since then, Django's prefetch may have kept this very queryset there)
    real = manager._apply_rel_filters(Manager.get_queryset(manager))
    for name, args, kwargs in recorded["_dls_steps"]:
        real = real[args] if name == "slice" else getattr(real, name)(*args, **kwargs)
    built = real.__dict__
    # what was set on it since: rows served (kept, as an evaluated queryset keeps them), Django's prefetch
    # (_result_cache, _prefetch_done), a method that marks it before reading it (get_or_create's _for_write)
    for name, value in recorded.items():
        if name not in _RECORDED:
            built[name] = value
    queryset.__dict__ = built
    queryset.__class__ = real.__class__


def instance_of(queryset: RecordedQuerySet) -> Model:
    """The instance of the related manager *queryset* was recorded from."""
    instance: Model = queryset.__dict__["_dls_manager"].instance
    return instance


def db_of(queryset: RecordedQuerySet) -> str:
    """The database *queryset* would read, as Django's ``QuerySet.db`` reads it (its hints: the instance)."""
    manager = queryset.__dict__["_dls_manager"]
    return manager._db or router.db_for_read(manager.model, instance=manager.instance)  # type: ignore[no-any-return]


def _rows(state: InPlace, queryset: RecordedQuerySet) -> Optional[list[Any]]:
    """The rows of *queryset* from its level's load (see the module notes), or None: it is then
    materialised, and its node learned the first time (what an evaluation of it loads)."""
    recorded = queryset.__dict__
    key = ("recorded", recorded["_dls_node"])
    memo = state.memo
    learned = memo.get(key)
    instance = recorded["_dls_manager"].instance
    if learned and id(queryset) not in state.alone:
        rows_key, field, db, value_of = learned
        entry = memo.get(rows_key)
        if entry is not None:
            value = value_of(instance)
            if value in entry.loaded and db_of(queryset) == db:
                rows = state.served(entry, value, (field, instance))
                if rows is not None:
                    return rows
    materialise(queryset)
    if learned is None:
        found = state.shape(queryset)
        shape = None if found is None else found[0]
        learned = False
        if shape is not None and shape.known is not None and shape.known[1] is instance:
            value_of = _value_reader(shape, instance)
            if value_of is not None and value_of(instance) == shape.value:
                learned = (("rows", shape.key), shape.known[0], shape.db, value_of)
        memo[key] = learned
    return None


def _counted(queryset: RecordedQuerySet) -> Optional[int]:
    """``queryset.count()`` from its level's grouped count (``InPlace.count``), or None: it is then
    materialised, and its node learned the first time (the count it reads)."""
    recorded = queryset.__dict__
    if recorded.get("_result_cache") is not None:
        return None
    state = answering()
    if state is None:
        return None
    key = ("recorded count", recorded["_dls_node"])
    memo = state.memo
    learned = memo.get(key)
    instance = recorded["_dls_manager"].instance
    if learned and id(queryset) not in state.alone:
        counts_key, db, value_of, low, high = learned
        counts = memo.get(counts_key)
        if counts is not None:
            value = value_of(instance)
            if value in counts and db_of(queryset) == db:
                total: int = counts[value]
                end = total if high is None else min(total, high)
                return max(0, end - int(low))
    if learned is None:
        materialise(queryset)
        found = state.shape(queryset)
        shape = None if found is None else found[0]
        learned = False
        if shape is not None and shape.known is not None and shape.known[1] is instance:
            query = shape.queryset.query
            value_of = _value_reader(shape, instance)
            if value_of is not None and value_of(instance) == shape.value and not query.distinct \
                    and query.group_by is None and not query.extra:
                qkey, db, alias, target = shape.key[:4]  # type: ignore[index]  # InPlace.count's key
                learned = (("count", qkey, db, alias, target), shape.db, value_of, shape.low, shape.high)
        memo[key] = learned
    return None


class RecordedQuerySet(QuerySet):  # type: ignore[misc]
    """A related manager's queryset, recorded (see the module notes); made by ``recorded_root`` only."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        # Django's _clone calls self.__class__(model=..., query=...), read before the attribute that
        # materialises: what it makes is Django's own QuerySet
        return QuerySet(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:  # any state not recorded: Django's queryset, built
        if "_dls_manager" not in self.__dict__:
            raise AttributeError(name)
        materialise(self)
        return getattr(self, name)

    def _dls_chain(self, name: str, args: Any, kwargs: dict[str, Any]) -> Any:
        recorded = self.__dict__
        if "_dls_manager" not in recorded:  # (not reached: a materialised one is a QuerySet)
            return getattr(QuerySet, name)(self, *args, **kwargs)
        try:
            step = ("slice", args.start, args.stop) if name == "slice" else _step_key(name, args, kwargs)
        except _Unrecordable:
            step = None
        node = None if step is None else _NODES.get((recorded["_dls_node"], step))
        if node is None:  # built as written (an error is Django's, where Django raises it)
            materialise(self)
            result = self[args] if name == "slice" else getattr(self, name)(*args, **kwargs)
            if step is not None:
                _remember((recorded["_dls_node"], step))
            return result
        if name in ("filter", "exclude") and any(type(arg) is Q for arg in args):
            args = tuple([copy.deepcopy(arg) if type(arg) is Q else arg for arg in args])  # as read now
        return _new(recorded["_dls_manager"], node, recorded["_dls_steps"] + ((name, args, kwargs),))

    def filter(self, *args: Any, **kwargs: Any) -> Any:
        return self._dls_chain("filter", args, kwargs)

    def exclude(self, *args: Any, **kwargs: Any) -> Any:
        return self._dls_chain("exclude", args, kwargs)

    def order_by(self, *field_names: Any) -> Any:
        return self._dls_chain("order_by", field_names, {})

    def annotate(self, *args: Any, **kwargs: Any) -> Any:
        return self._dls_chain("annotate", args, kwargs)

    def alias(self, *args: Any, **kwargs: Any) -> Any:
        return self._dls_chain("alias", args, kwargs)

    def select_related(self, *fields: Any) -> Any:
        return self._dls_chain("select_related", fields, {})

    def prefetch_related(self, *lookups: Any) -> Any:
        return self._dls_chain("prefetch_related", lookups, {})

    def only(self, *fields: Any) -> Any:
        return self._dls_chain("only", fields, {})

    def defer(self, *fields: Any) -> Any:
        return self._dls_chain("defer", fields, {})

    def distinct(self, *field_names: Any) -> Any:
        return self._dls_chain("distinct", field_names, {})

    def reverse(self) -> Any:
        return self._dls_chain("reverse", (), {})

    def all(self) -> Any:
        return self._dls_chain("all", (), {})

    def __getitem__(self, k: Any) -> Any:
        recorded = self.__dict__
        if recorded.get("_result_cache") is not None or type(k) is not slice or k.step is not None \
                or type(k.start) not in (int, type(None)) or type(k.stop) not in (int, type(None)):
            materialise(self)
            return self[k]
        return self._dls_chain("slice", k, {})

    def _fetch_all(self) -> None:
        recorded = self.__dict__
        if recorded.get("_result_cache") is not None:
            return
        state = answering()
        rows = None if state is None else _rows(state, self)
        if rows is None:
            if "_dls_manager" in self.__dict__:  # (``_rows`` materialised it when it did not answer)
                materialise(self)
            self._fetch_all()
            return
        recorded["_result_cache"] = rows
        recorded["_prefetch_done"] = True  # the level's load ran the prefetches

    def count(self) -> int:
        found = _counted(self)
        if found is not None:
            return found
        if "_dls_manager" in self.__dict__:
            materialise(self)
        return self.count()

    def exists(self) -> bool:
        found = _counted(self)
        if found is not None:
            return found > 0
        if "_dls_manager" in self.__dict__:
            materialise(self)
        return self.exists()

    def __deepcopy__(self, memo: Any) -> Any:
        materialise(self)
        return self.__deepcopy__(memo)

    def __getstate__(self) -> Any:
        materialise(self)
        return self.__getstate__()

    def __reduce_ex__(self, protocol: Any) -> Any:
        materialise(self)
        return self.__reduce_ex__(protocol)

    def __reduce__(self) -> Any:
        materialise(self)
        return self.__reduce__()

    def __repr__(self) -> str:
        materialise(self)
        return repr(self)

"""The breadth-first walk: every relation a serializer will read, loaded for all the instances of a level at once.

``prepare(serializer, instance, registry)`` runs before REST framework's own
``to_representation``: it follows the serializer's field paths (``_plan``)
over the actual instances, one hop per round for every field of every
nested serializer that has reached that round, and loads each relation met
for all the instances of the round in one batch (``_level_relations``:
``Author.books`` once, not once per author).  The values are left where
Django's attribute access finds them, so REST framework then serializes as
it always does, reading what is already there.

- A round is the set of hops taken together: the first attribute of every
  field of the top serializer, then the next attribute of dotted sources
  and the first attribute of every field of the nested serializers reached,
  and so on.  Instances reached twice (the same publisher of two authors)
  are one instance of the round.
- A hop is loaded when its attribute is a relation of the instance's model
  (``_auto.relation_of``: forward and reverse foreign keys, one-to-one,
  many-to-many, ``GenericForeignKey``/``GenericRelation``).  Any other
  attribute (a column, a property, a method, ``to_attr`` lists) ends the
  path: it is read as written.  A to-many relation in the middle of a path
  goes on only through ``.all`` (``source="books.all"``) and ends at
  ``.count`` (answered from the loaded rows).
- What the instances hold already (the view's ``select_related`` and
  ``prefetch_related``) is used as it is, and walked into.

Guarantees:
- Same output as without the walk: only relations REST framework reads are
  loaded, into the caches its reads consult, with the rows those reads
  would return (``_level_relations``); whatever the walk cannot follow is
  left to REST framework.
- The root instances are those ``to_representation`` will iterate: a model
  instance, a list or tuple, or a ``QuerySet`` (evaluated here, so that
  REST framework iterates its result cache, the same instances; an
  unevaluated one joins the to-one hops the serializer reads from it first,
  ``_joins``: those hops cost no statement of their own, and a field whose
  path the joined rows answer whole, with no nested serializer below it, is
  not walked at all: ``_joins.joined_through``).  A
  ``Manager`` (``serializer(author.books, many=True)``), whose ``.all()``
  makes new instances, and other iterables are left as they are.
- Per call state only; no lock.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any, Callable, Optional

from django.db.models import Model, QuerySet
from django.db.models.fields.related_descriptors import ForwardManyToOneDescriptor
from django.db.models.query import ModelIterable
from rest_framework.serializers import ListSerializer, Serializer

from .._registry import DataLoaderRegistry
from ..django._auto import AutoRelation, relation_of
from ..django._level_relations import LevelRelation, load_level, related_values
from ._joins import joined_through, plannable, planned
from ._plan import FieldPath, paths

__all__ = ["Levels", "prepare", "root_instances"]


class Levels:
    """The walk's levels as a ``dataloader_sync._execution_levels.LevelSource``: the instances that one
    serializer serializes (the root list, a nested serializer's instances across all parents) are one level.

    While REST framework serializes, ``_views`` makes it current: Django's in-place answers
    (``dataloader_sync.django._inplace``: ``author.books.count()`` in a method, once per level) and
    ``FETCH_LEVEL`` read their peers from it.  Not thread-safe: the walk's thread only (another thread
    is answered None).
    """

    __slots__ = ("_dataloader_sync_inplace", "_of", "_thread", "__weakref__")

    def __init__(self) -> None:
        self._of: dict[int, tuple[Any, list[Any]]] = {}  # id(instance) -> (the instance, its level)
        self._thread = threading.get_ident()
        self._dataloader_sync_inplace: Any = None  # _inplace.start's state, kept on its owner

    def add(self, instances: list[Any]) -> None:
        for instance in instances:
            self._of[id(instance)] = (instance, instances)

    def peers_of(self, obj: Any) -> Optional[list[Any]]:
        """The instances of *obj*'s level (*obj* among them), or None."""
        if threading.get_ident() != self._thread:
            return None
        entry = self._of.get(id(obj))
        return entry[1] if entry is not None and entry[0] is obj else None

    def find(self, match: Callable[[Any], bool]) -> Any:
        """An instance of any level of the walk for which *match* is true, or None (REST framework's own
        pass does not say which instance it serializes: every level is looked at, latest first)."""
        if threading.get_ident() != self._thread:
            return None
        for instance, _ in reversed(self._of.values()):
            if match(instance):
                return instance
        return None


class _Cursor:
    """A field path being walked: where it is (*pos* in *attrs*) and the instances it has reached."""

    __slots__ = ("attrs", "child", "instances", "pk_only", "pos", "then")

    def __init__(self, path: FieldPath, instances: list[Any]) -> None:
        self.attrs = path.attrs
        self.pk_only = path.pk_only
        self.child = path.child
        self.then = path.then
        self.instances = instances
        self.pos = 0


def root_instances(instance: Any, serializer: Any = None) -> tuple[Optional[list[Any]], dict[str, Any]]:
    """The instances ``to_representation(instance)`` serializes at the top (None when they cannot be known),
    and the ``select_related`` tree their rows were read with (``{}`` when none or not known).

    An unevaluated ``QuerySet`` is evaluated as a copy joining the to-one hops *serializer* reads
    (``_joins.planned``), whose rows are put in *instance*'s own result cache, as Django's
    ``prefetch_related`` does for the querysets it fills: REST framework iterates the same rows."""
    if isinstance(instance, Model):
        return [instance], {}
    if isinstance(instance, QuerySet):
        read = instance
        if serializer is not None and plannable(instance):
            read = planned(instance, serializer)
        # the rows hold what the statement joined (a queryset of its own iterable, polymorphic ones, may not)
        joined = read.query.select_related if read._result_cache is None and \
            read._iterable_class is ModelIterable else False
        rows = list(read)  # fills its result cache: REST framework iterates the same instances
        if read is not instance:
            instance._result_cache = rows  # the copy's prefetches are done on these rows
            instance._prefetch_done = True
        return rows, joined if isinstance(joined, dict) else {}
    if isinstance(instance, (list, tuple)):
        return list(instance), {}
    return None, {}


def prepare(serializer: Any, instance: Any, registry: DataLoaderRegistry) -> tuple[bool, Optional[Levels]]:
    """Load, round by round, the relations *serializer* will read off *instance*.

    Returns:
        Whether a ``SerializerMethodField`` was met (its futures are settled after serializing), and the
        levels walked (None when the instances could not be known).
    """
    top = serializer.child if isinstance(serializer, ListSerializer) else serializer
    instances, joined = root_instances(instance, serializer)
    if instances is None or not isinstance(top, Serializer):
        return False, None
    levels = Levels()
    cursors: list[_Cursor] = []
    methods = _start(top, instances, cursors, levels)
    if joined:  # a path read from the root's joined rows alone has nothing to load: not walked
        model = instance.model
        cursors = [cursor for cursor in cursors if not joined_through(cursor, model, joined)]
    while cursors:
        _load_round(cursors, registry)
        going: list[_Cursor] = []
        for cursor in cursors:
            _step(cursor)
            if not cursor.instances:
                continue
            if cursor.pos < len(cursor.attrs):
                going.append(cursor)
            elif cursor.child is not None:  # the nested serializer's fields, on the instances reached
                methods |= _start(cursor.child, cursor.instances, going, levels)
            elif cursor.then:  # a slug path read off the targets
                going.append(_Cursor(FieldPath(cursor.then), cursor.instances))
        cursors = going
    return methods, levels


def _start(serializer: Serializer[Any], instances: list[Any], cursors: list[_Cursor], levels: Levels) -> bool:
    """Add the cursors of *serializer*'s fields on *instances* (a ``source="*"`` serializer's at once)."""
    found, methods = paths(serializer)
    if not instances:
        return methods
    levels.add(instances)
    for path in found:
        if path.attrs:
            cursors.append(_Cursor(path, instances))
        elif path.child is not None:
            methods |= _start(path.child, instances, cursors, levels)
    return methods


def _hop(cursor: _Cursor, cls: type) -> Optional[LevelRelation]:
    """The relation *cursor* follows from an instance of *cls* at its position, or None where the path ends
    (the same for every instance of a class: its callers ask once per class of a round, ``_hops``)."""
    rel = relation_of(cls, cursor.attrs[cursor.pos])
    if rel is None or not issubclass(cls, Model):
        return None
    last = cursor.pos == len(cursor.attrs) - 1
    if last and cursor.pk_only and isinstance(rel, AutoRelation) and \
            isinstance(rel.descriptor, ForwardManyToOneDescriptor):
        return None  # REST framework reads the key column (PKOnlyObject)
    if not last and isinstance(rel, AutoRelation) and rel.rel.many and \
            cursor.attrs[cursor.pos + 1] not in ("all", "count"):
        return None  # an attribute of a related manager: read as written
    return rel


def _hops(cursor: _Cursor) -> Iterator[tuple[Any, LevelRelation]]:
    """Each instance of *cursor* with the relation its next hop follows (those whose path ends left out)."""
    of: dict[type, Optional[LevelRelation]] = {}
    for instance in cursor.instances:
        cls = type(instance)
        rel = of[cls] if cls in of else of.setdefault(cls, _hop(cursor, cls))
        if rel is not None:
            yield instance, rel


def _load_round(cursors: Sequence[_Cursor], registry: DataLoaderRegistry) -> None:
    """Load every relation the cursors' next hop follows, for all their instances: one batch each."""
    wanted: dict[int, tuple[LevelRelation, dict[int, Any]]] = {}
    for cursor in cursors:
        for instance, rel in _hops(cursor):
            wanted.setdefault(id(rel), (rel, {}))[1][id(instance)] = instance
    load_level(registry, [(rel, list(instances.values())) for rel, instances in wanted.values()])


def _step(cursor: _Cursor) -> None:
    """Move *cursor* one hop on, to the instances the hop reached (none where its path ended)."""
    reached: dict[int, Any] = {}
    many = False
    for instance, rel in _hops(cursor):
        many = many or (isinstance(rel, AutoRelation) and rel.rel.many)
        for value in related_values(rel, instance):
            reached.setdefault(id(value), value)
    pos = cursor.pos + 1
    if many and pos < len(cursor.attrs):
        if cursor.attrs[pos] == "all":  # books.all: the rows
            pos += 1
        else:  # books.count: answered from the loaded rows, nothing further to walk
            reached = {}
    cursor.pos = pos
    cursor.instances = list(reached.values())

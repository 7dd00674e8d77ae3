"""Auto relations on Django models: which fields they take, and how each resolves through a loader.

``dataloader_sync.graphql.AutoRelationsExecutionContext`` asks this module
two things (see its module notes):

- ``classify(fn, default_attname)``: whether a resolve function is
  graphene-django's field around a default resolver — ``DjangoListField``
  (``partial(list_resolver, type, resolver, manager)``), a connection field
  (``partial(connection_resolver, resolver, connection, manager,
  queryset_resolver, max_limit, enforce_first_or_last)``, graphene-django's or
  ours), or the to-one field graphene-django builds when the target type
  overrides ``get_queryset`` (its ``custom_resolver`` closure).  A user's
  resolver inside any of them leaves the field alone.
- ``relation_of(model class, name)``: the ``AutoRelation`` of a relation
  attribute (``Author.books``), or None.
- ``execution(ctx)``: at the start of each execution, makes the in-place
  answers of related managers' querysets current for it (``_inplace``:
  ``self.books.count()`` in a resolver or a property, once per level);
  importing this module installs that seam on ``QuerySet``; ``left_alone``
  keeps it out of a field wrapped by ``no_auto_relations``.

How each resolves (``AutoRelation.resolve``), with the loader of the family
``load_auto_related`` (``related_loader``'s batch function under the name
``Author.books``):

===============================  ==============================================================
field                            value
===============================  ==============================================================
plain default resolver           the relation's loader; what is on the instance already
                                 (``select_related``, ``prefetch_related``) as it is, no statement
``DjangoListField``              the loader with the target type's ``get_queryset`` (if it
                                 overrides graphene-django's) applied to the target model's
                                 default queryset, in the batch; prefetched rows as they are
                                 when the type has no ``get_queryset`` of its own, or when its
                                 ``get_queryset`` returns them evaluated (graphene-django's
                                 ``list_resolver`` run on the parent: graphene-django-optimizer's
                                 types keep a list field's prefetched queryset)
connection fields                our ``DjangoConnectionField`` resolution (filters, order, the
                                 page and ``totalCount`` in the batch, see ``_graphene_fields``)
to-one, ``get_queryset`` own     the loader with ``get_queryset(default manager, info)`` applied
``GenericForeignKey``            the ``load_generic`` family's loader (``_generic``): one statement
                                 per target model; a cached target as it is
===============================  ==============================================================

A target type's ``get_queryset`` is called once per execution, with the
resolve info of the first field that needs it (its context and user are the
request's): what it returns is the queryset of every parent's batch.  The
to-one relations the field's selection reads through plain default
resolvers are joined into the batch (``joins``: ``select_related``), and
each field finds its loader once per selection per execution.

Guarantees:
- Nothing is imported from graphene-django unless it was imported already
  (``sys.modules``): a schema without it pays nothing for it.
- No lock: the caches are filled without one (two threads may both compute
  an entry; either is right), the rest is per call.
"""
from __future__ import annotations

import functools
import sys
from collections.abc import Hashable, Sequence
from typing import Any, Callable, Optional, Union

from django.db.models import Model, QuerySet
from django.db.models.fields.related_descriptors import ForwardManyToOneDescriptor, ReverseOneToOneDescriptor

from .._core import DataLoader
from .._registry import DataLoaderRegistry
from . import _inplace, _manager_querysets
from ._connection_scope import connection_loader
from ._generic import is_generic_foreign_key, load_generic
from ._orm import _related_key, _related_name, link_parents, load_related, load_related_counted
from ._relations import Relation, relation

__all__ = ["AutoRelation", "auto_related_loader", "classify", "join_hop", "joins", "level_queryset",
           "execution", "left_alone", "load_auto_related", "relation_of", "user_resolver", "with_level_mode"]

_inplace.install()
if not _inplace._watch_known:
    _inplace._watch_known.append(_manager_querysets.watch)


def load_auto_related(instances: Sequence[Model], field: Any, queryset: Optional[QuerySet[Any]] = None,
                      first: Optional[int] = None, joined: tuple[str, ...] = (), held: bool = False) -> list[Any]:
    """``load_related`` as the batch function of the auto relations' families, whose loaders are
    named after the relation alone: ``Author.books`` (``Author.books, queryset=...`` with a
    queryset).  The rows of a reverse relation know their parent (``book.author``, ``link_parents``),
    as those of the related manager the field reads without the switch do.

    Args:
        instances, field, queryset, first: as for ``load_related``.
        joined: ``select_related`` paths from the related model: the to-one
            relations the child selection reads, joined into the same statement.
        held: take a to-one an instance holds from it with a *queryset* too (strawberry-django
            reads a to-one the instance holds as it is, whatever the field's ``get_queryset``).

    A to-one relation that an instance holds by the time the batch runs (the user's code read it
    after the field asked: ``resolve_author_name`` reading ``book.author``) is taken from the
    instance, as without the switch; only the others are loaded.  With a *queryset* (graphene-django:
    the target type's ``get_queryset``, which its to-one fields apply to what the instance holds),
    only when *held*.
    """
    if (queryset is None or held) and first is None and isinstance(field, _JOINABLE):
        holds = [field.is_cached(instance) for instance in instances]
        if any(holds):  # the user's code read the relation of some after they asked: theirs, as Django has it
            rest = [instance for instance, h in zip(instances, holds) if not h]
            loaded = iter(load_related(rest, field, _auto_queryset(field, queryset, joined), None) if rest else ())
            cache = field.field if isinstance(field, ForwardManyToOneDescriptor) else field.related
            return [cache.get_cached_value(instance) if h else next(loaded) for instance, h in zip(instances, holds)]
    values = load_related(instances, field, _auto_queryset(field, queryset, joined), first)
    link_parents(field, instances, values)
    return values


def _auto_queryset(field: Any, queryset: Optional[QuerySet[Any]], joined: tuple[str, ...]) -> Optional[QuerySet[Any]]:
    queryset = level_queryset(field, queryset)
    if joined:
        queryset = (relation(field).manager().all() if queryset is None else queryset).select_related(*joined)
    return queryset


def _load_auto_counted(instances: Sequence[Model], field: Any, queryset: Optional[QuerySet[Any]],
                       first: int) -> tuple[list[Any], list[int]]:
    """``load_related_counted`` as ``load_auto_related`` runs its statement (a connection's page); the
    rows of a reverse relation know their parent (``link_parents``)."""
    values, counts = load_related_counted(instances, field, _auto_queryset(field, queryset, ()), first)
    link_parents(field, instances, values)
    return values, counts


load_auto_related.load_counted = _load_auto_counted  # type: ignore[attr-defined]  # _pages.load_page's


def _level_mode() -> Any:
    """``FETCH_LEVEL`` where Django has fetch modes (6.1 and later), else None."""
    global _LEVEL_MODE
    if _LEVEL_MODE is _UNKNOWN:
        try:
            from ._fetch_level import FETCH_LEVEL
        except ImportError:  # Django < 6.1: no fetch modes
            _LEVEL_MODE = None
        else:
            _LEVEL_MODE = FETCH_LEVEL
    return _LEVEL_MODE


_UNKNOWN: Any = object()
_LEVEL_MODE: Any = _UNKNOWN
# id(descriptor) -> (descriptor, its related manager's queryset with FETCH_LEVEL): one per relation, so
# the batch reads the queryset's family key once (_querysets._KEYS) instead of compiling it per batch
_LEVEL_BASES: dict[int, tuple[Any, QuerySet[Any]]] = {}


def level_queryset(field: Any, queryset: Optional[QuerySet[Any]]) -> Optional[QuerySet[Any]]:
    """The queryset a batch of *field* runs, with ``FETCH_LEVEL`` (Django >= 6.1): the instances auto
    relations load read what they lack once per level (``_fetch_level``).  A queryset whose fetch mode
    someone chose (``get_queryset``'s ``FETCH_RAISE``, ``FETCH_PEERS``) keeps it; *queryset* as it is
    on an older Django."""
    mode = _level_mode()
    if mode is None:
        return queryset
    if queryset is None:
        known = _LEVEL_BASES.get(id(field))
        if known is not None and known[0] is field:
            return known[1]
        base = relation(field).manager().all().fetch_mode(mode)
        _LEVEL_BASES[id(field)] = (field, base)
        return base
    return with_level_mode(queryset)


def with_level_mode(queryset: QuerySet[Any]) -> QuerySet[Any]:
    """*queryset* with ``FETCH_LEVEL`` (Django >= 6.1) when its fetch mode is Django's default
    (``FETCH_ONE``); *queryset* itself when someone chose its mode, or on an older Django."""
    mode = _level_mode()
    if mode is None:
        return queryset
    # QuerySet._fetch_mode: Django keeps the mode there and offers no reader for it
    from django.db.models import FETCH_ONE

    if queryset._fetch_mode is FETCH_ONE:
        return queryset.fetch_mode(mode)
    return queryset


def _auto_key(field: Any, queryset: Optional[QuerySet[Any]] = None, first: Optional[int] = None,
              joined: tuple[str, ...] = (), held: bool = False) -> Hashable:
    key = (_related_key(field, queryset, first), joined)
    return (*key, "held") if held else key


def _auto_name(field: Any, queryset: Optional[QuerySet[Any]] = None, first: Optional[int] = None,
               joined: tuple[str, ...] = (), held: bool = False) -> str:
    name = _related_name(field, queryset, first)
    return f"{name}, select_related=({', '.join(joined)})" if joined else name


load_auto_related.dataloader_key = _auto_key  # type: ignore[attr-defined]
load_auto_related.dataloader_name = _auto_name  # type: ignore[attr-defined]
load_auto_related.dataloader_name_is_label = True  # type: ignore[attr-defined]


def auto_related_loader(registry: DataLoaderRegistry, field: Any, queryset: Optional[QuerySet[Any]] = None,
                        joined: tuple[str, ...] = (), held: bool = False) -> DataLoader[Any, Any]:
    """``related_loader`` for auto relations: the connection being resolved's page loader, else
    the ``load_auto_related`` family's (*held*: see ``load_auto_related``)."""
    page = connection_loader(registry, load_auto_related, field, queryset)
    if page is not None:
        return page
    if held:
        return registry.loader_for(load_auto_related, field, queryset, joined=joined, held=True)
    if joined:
        return registry.loader_for(load_auto_related, field, queryset, joined=joined)
    return registry.loader_for(load_auto_related, field, queryset)


# -- the fields graphene-django makes --------------------------------------------------------

class ListSpec:
    """A ``DjangoListField`` around a default resolver (*own*: its type overrides ``get_queryset``)."""

    __slots__ = ("object_type", "own")

    def __init__(self, object_type: Any) -> None:
        self.object_type = object_type
        self.own = _own_get_queryset(object_type)


class ConnectionSpec:
    """A connection field around a default resolver: *resolve* is ours (``_LoaderPages``),
    *args* what graphene-django's partial passes after the resolver; *own*: its node type
    overrides ``get_queryset``."""

    __slots__ = ("args", "own", "resolve")

    def __init__(self, resolve: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.resolve = resolve
        self.args = args
        self.own = _own_get_queryset(args[0]._meta.node)


class ToOneSpec:
    """graphene-django's to-one field of a target type with its own ``get_queryset``."""

    __slots__ = ("object_type", "own")

    def __init__(self, object_type: Any) -> None:
        self.object_type = object_type
        self.own = True


def _own_get_queryset(object_type: Any) -> bool:
    """Whether a ``DjangoObjectType`` overrides graphene-django's ``get_queryset``."""
    from graphene_django import DjangoObjectType

    return object_type.get_queryset.__func__ is not DjangoObjectType.get_queryset.__func__


def _closure(fn: Any) -> dict[str, Any]:
    code = getattr(fn, "__code__", None)
    cells = getattr(fn, "__closure__", None) or ()
    if code is None:
        return {}
    return dict(zip(code.co_freevars, (cell.cell_contents for cell in cells)))


def classify(fn: Any, default_attname: Callable[[Any], Any]) -> Optional[tuple[Optional[str], Any]]:
    """``(attribute name, spec)`` for graphene-django's fields around a default resolver, else None."""
    if "graphene_django" not in sys.modules:
        return None
    if isinstance(fn, functools.partial):
        func = fn.func
        if getattr(func, "__qualname__", None) == "DjangoListField.list_resolver" and len(fn.args) == 3:
            attname = default_attname(fn.args[1])
            return None if attname is False else (attname, ListSpec(fn.args[0]))
        owner = getattr(func, "__self__", None)
        if getattr(func, "__name__", None) == "connection_resolver" and isinstance(owner, type) and len(fn.args) == 6:
            resolve = _connection_resolve(owner)
            attname = default_attname(fn.args[0])
            if resolve is None or attname is False:
                return None
            return attname, ConnectionSpec(resolve, fn.args[1:])
        return None
    if getattr(fn, "__name__", None) == "custom_resolver" and getattr(fn, "__module__", None) == \
            "graphene_django.converter":
        cells = _closure(fn)
        attname = default_attname(cells.get("resolver"))
        object_type = cells.get("_type")
        if attname is False or object_type is None:
            return None
        return attname, ToOneSpec(object_type)
    return None


def _connection_resolve(owner: type) -> Optional[Callable[..., Any]]:
    """Our connection resolution for a field class whose ``connection_resolver`` is graphene-django's
    or ours; None for a class that has its own."""
    from graphene_django.fields import DjangoConnectionField as Stock

    from ._graphene_fields import DjangoConnectionField, _LoaderPages

    if issubclass(owner, _LoaderPages):
        if owner.connection_resolver.__func__ is _LoaderPages.connection_resolver.__func__:  # type: ignore[attr-defined]
            return owner.connection_resolver
        return None
    if owner.connection_resolver.__func__ is Stock.connection_resolver.__func__:  # type: ignore[attr-defined]
        return DjangoConnectionField.connection_resolver
    return None


def execution(ctx: Any) -> Optional[Callable[[], None]]:
    """Start the in-place answers of the execution *ctx* (``_inplace``); returns what ends them."""
    return _inplace.start(ctx, _inplace.is_mutation(ctx))


def left_alone(ctx: Any, fn: Callable[..., Any]) -> Callable[..., Any]:
    """A resolver wrapped by ``no_auto_relations``: no in-place answers for what it evaluates (``_inplace``)."""
    return _inplace.left_alone(ctx, fn)


def user_resolver(ctx: Any, fn: Callable[..., Any]) -> Callable[..., Any]:
    """The resolver standing for a resolver the user wrote: it runs as written, the queryset it
    returns is planned for the field's selection (``_planned_querysets``: the to-one hops it reads
    joined, ``FETCH_LEVEL``), and a relation queryset is loaded for the level (``_returned_querysets``;
    inside a connection field, paged for the level: ``_returned_pages``)."""
    from ._planned_querysets import planned
    from ._returned_pages import returned_connection
    from ._returned_querysets import returned_resolver

    paged = returned_connection(ctx, fn, functools.partial(planned, joins=functools.partial(joins, connection=True),
                                                           level=with_level_mode))
    if paged is not None:
        return paged
    return returned_resolver(ctx, fn, functools.partial(planned, joins=joins, level=with_level_mode))


# -- to-one hops joined into the batch --------------------------------------------------------

#: How deep a chain of to-one hops is joined into one statement (``author__publisher`` is 2).
MAX_JOIN_DEPTH = 4


def joins(ctx: Any, info: Any, model: type[Model], connection: bool = False) -> tuple[str, ...]:
    """The ``select_related`` paths, from *model*, of the to-one relations the field's selection
    reads through default resolvers (and theirs, to ``MAX_JOIN_DEPTH``): computed once per
    selection per execution (``graphql._auto_relations.join_paths``).

    A to-one field joins when its resolver is a plain default one (a target type with its own
    ``get_queryset`` is loaded by its own batch, where that queryset applies) and its relation is a
    forward foreign key or one-to-one, or a reverse one-to-one.  With *connection*, the selection
    read is that of the connection's ``edges { node }``.  Abstract types (interfaces, unions) are
    not looked into: their to-one fields are batches of their own.
    """
    from ..graphql._auto_relations import join_paths

    return join_paths(ctx, info, model, join_hop, "__", MAX_JOIN_DEPTH, connection)


def join_hop(model: Any, name: str) -> Any:
    """The related model of *model*'s to-one relation *name* that ``select_related`` can join, or None."""
    auto = relation_of(model, name)
    if not isinstance(auto, AutoRelation) or not isinstance(auto.descriptor, _JOINABLE):
        return None
    return auto.rel.related_model


# -- relations -------------------------------------------------------------------------------

#: The relations select_related follows (a forward one-to-one is a ForwardManyToOneDescriptor).
_JOINABLE = (ForwardManyToOneDescriptor, ReverseOneToOneDescriptor)

# (model, attribute) -> its auto relation or None; filled without a lock (see the notes)
_RELATIONS: dict[tuple[type, str], Optional[Union[AutoRelation, GenericAutoRelation]]] = {}


def relation_of(cls: type, name: str) -> Optional[Union[AutoRelation, GenericAutoRelation]]:
    """The ``AutoRelation`` of *cls*'s attribute *name*, or None when *cls* is not a model or the
    attribute not one of ``_relations``' kinds."""
    key = (cls, name)
    try:
        return _RELATIONS[key]
    except KeyError:
        pass
    found: Optional[Union[AutoRelation, GenericAutoRelation]] = None
    if isinstance(cls, type) and issubclass(cls, Model):
        descriptor = getattr(cls, name, None)
        try:
            rel = relation(descriptor)
        except TypeError:
            rel = None
        if rel is not None:
            found = AutoRelation(descriptor, rel)
        elif "django.contrib.contenttypes.fields" in sys.modules:
            # Django < 6.1 puts the GenericForeignKey itself on the class, 6.1 a descriptor of it
            field = getattr(descriptor, "field", descriptor)
            if is_generic_foreign_key(field):
                found = GenericAutoRelation(field)
    _RELATIONS[key] = found
    return found


def _prefetch_name(descriptor: Any) -> Optional[str]:
    """The key of ``instance._prefetched_objects_cache`` that holds a to-many relation's prefetched rows."""
    generic = relation(descriptor).generic
    if generic is not None:  # a GenericRelation's manager: the field's attname
        return generic.attname  # type: ignore[no-any-return]
    rel = getattr(descriptor, "rel", None)
    field = getattr(descriptor, "field", None)
    if getattr(descriptor, "reverse", None) is not None and field is not None:  # many-to-many
        return field.related_query_name() if descriptor.reverse else field.name  # type: ignore[no-any-return]
    if rel is not None and field is not None:  # reverse foreign key
        name = getattr(field.remote_field, "cache_name", None)
        if not isinstance(name, str):
            name = field.remote_field.get_cache_name()
        return name
    return None


class AutoRelation:
    """One relation attribute of a model, as auto relations resolve it.  Immutable; shared by threads."""

    __slots__ = ("descriptor", "prefetch_name", "rel")

    def __init__(self, descriptor: Any, rel: Relation) -> None:
        self.descriptor = descriptor
        self.rel = rel
        self.prefetch_name = _prefetch_name(descriptor) if rel.many else None

    def on_instance(self, root: Any) -> bool:
        """Whether *root* holds the relation's value already (no statement to read it)."""
        if self.rel.many:
            cache = root.__dict__.get("_prefetched_objects_cache")
            return cache is not None and self.prefetch_name in cache
        return bool(self.descriptor.is_cached(root))

    def resolve(self, ctx: Any, root: Any, info: Any, args: dict[str, Any], spec: Any,
                fallback: Callable[..., Any], memo: dict[Any, Any]) -> Any:
        """The field's value: a loader's future, or what *fallback* (the framework's resolver) gives.

        *memo* is the caller's store for this relation and field in this execution (its loader per
        selection).
        """
        if spec is None:
            if self.on_instance(root):
                return fallback(root, info, **args)
            return self._loader(ctx, info, spec, memo).load(root)
        if spec.__class__ is ConnectionSpec:
            if not spec.own and self.on_instance(root):
                return fallback(root, info, **args)
            return spec.resolve(functools.partial(self._load_in_connection, ctx), *spec.args, root, info, **args)
        if self.on_instance(root):
            if not spec.own:
                return fallback(root, info, **args)
            if spec.__class__ is ListSpec:
                value = fallback(root, info, **args)
                if isinstance(value, QuerySet) and value._result_cache is not None:
                    return value  # get_queryset kept the prefetched rows (graphene-django-optimizer's types)
        return self._loader(ctx, info, spec, memo).load(root)

    def _loader(self, ctx: Any, info: Any, spec: Any, memo: dict[Any, Any]) -> DataLoader[Any, Any]:
        """The loader of this relation for the field being resolved: found once per selection per execution
        (the queryset and the joins depend on the field and its selection, not on the parent)."""
        nodes = info.field_nodes
        # a selection is known by its first field node (and how many were merged with it)
        key: Hashable = id(nodes[0]) if len(nodes) == 1 else (id(nodes[0]), len(nodes))
        loader: Optional[DataLoader[Any, Any]] = memo.get(key)
        if loader is None:
            queryset = None
            if spec is not None and spec.own:
                queryset = self._queryset(ctx, spec.object_type, info)
            joined = joins(ctx, info, self.rel.related_model)
            loader = memo[key] = auto_related_loader(ctx.auto_loaders(), self.descriptor, queryset, joined)
        return loader

    def _load_in_connection(self, ctx: Any, root: Any, info: Any, **args: Any) -> Any:
        # the connection's resolver: the page request it installed serves this relation, with
        # the to-one relations its nodes read joined into the base queryset
        joined = joins(ctx, info, self.rel.related_model, connection=True)
        base = self.rel.manager().all().select_related(*joined) if joined else None
        return auto_related_loader(ctx.auto_loaders(), self.descriptor, base).load(root)

    def _queryset(self, ctx: Any, object_type: Any, info: Any) -> Any:
        """``object_type.get_queryset(target default queryset, info)``, once per execution."""
        key: Hashable = ("django.get_queryset", object_type, self.rel.related_model)
        memo = ctx.auto_memo
        try:
            return memo[key]
        except KeyError:
            pass
        from graphene_django.utils import maybe_queryset

        model = object_type._meta.model
        queryset = maybe_queryset(object_type.get_queryset(model._default_manager.all(), info))
        memo[key] = queryset
        return queryset


class GenericAutoRelation:
    """A ``GenericForeignKey`` as auto relations resolve it: the ``load_generic`` family's loader,
    one statement per target model.  Immutable; shared by threads."""

    __slots__ = ("field",)

    def __init__(self, field: Any) -> None:
        self.field = field

    def resolve(self, ctx: Any, root: Any, info: Any, args: dict[str, Any], spec: Any,
                fallback: Callable[..., Any], memo: dict[Any, Any]) -> Any:
        """The target: a loader's future, or what *fallback* gives when it is on the instance already."""
        if spec is not None or self.field.is_cached(root):
            return fallback(root, info, **args)
        return ctx.auto_loaders().loader_for(load_generic, self.field).load(root)

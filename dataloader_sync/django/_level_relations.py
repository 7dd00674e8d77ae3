"""A relation loaded for every instance of a level and left where Django's own attribute access reads it.

Code that reads relations through plain attribute access (REST framework's
serializers, templates) cannot be handed a loader's future; but Django reads
a relation from the instance before it queries: a to-many relation from
``instance._prefetched_objects_cache`` (what ``prefetch_related`` fills, so
``author.books.all()``, ``.count()`` and iteration hit it) and a to-one
relation from the field's cache (what ``select_related`` fills).
``load_level(registry, wanted)`` loads each relation of *wanted* for all its
instances through the auto relations' loaders (``Author.books``: the
``load_auto_related`` family, ``load_generic`` for a ``GenericForeignKey``),
dispatched together, and stores each value there, as ``prefetch_related``
would; ``related_values`` then reads what a relation holds on an instance,
without a statement.

What is stored, per relation kind (Django's own caches, read by its descriptors):

==========================  ====================================================================
relation                    where the value goes
==========================  ====================================================================
reverse FK, many-to-many,   ``_prefetched_objects_cache[name]``: the related manager's queryset
``GenericRelation``         with the rows as its result cache (``prefetch_related``'s way); a
                            reverse FK's rows also get their forward FK to the parent cached, as
                            Django's prefetch and ``author.books.all()`` do, and a generic
                            relation's rows their ``GenericForeignKey``
forward FK / one-to-one     the field's cache; a one-to-one target also gets its reverse cached
reverse one-to-one          the relation's cache (``None`` when there is none: the descriptor then
                            raises ``DoesNotExist`` as it does after a query that found nothing)
``GenericForeignKey``       the field's cache (``None`` for no target, as Django caches it)
==========================  ====================================================================

Guarantees:
- An instance that holds the relation already (its own ``select_related`` or
  ``prefetch_related``, or an earlier load) is used as it is: not loaded, not
  overwritten.
- One statement per relation (per database, per target model for a
  ``GenericForeignKey``) per call, as the loaders make it; nothing for an
  instance whose foreign key is ``None`` or that was never saved.
- Same answers as plain attribute access: a forward foreign key whose target
  row is missing is not stored (Django then queries and raises as before);
  the loaders' keys are cleared after the call, so a later call reads the
  database as it is then, not a value cached before a write.
- Django internals read (named, as the module notes of ``_orm`` do): the
  related managers' ``get_queryset()`` and a ``QuerySet``'s ``_result_cache``
  and ``_prefetch_done`` (as ``prefetch_related_objects`` sets them), and the
  field caches' ``is_cached`` / ``get_cached_value`` / ``set_cached_value``
  (``FieldCacheMixin``).
- No lock: everything is per call on the caller's instances.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Union

from django.db.models.fields.related_descriptors import ForwardManyToOneDescriptor, ManyToManyDescriptor

from .._core import DataLoader
from .._registry import DataLoaderRegistry
from ._auto import AutoRelation, GenericAutoRelation, auto_related_loader
from ._generic import load_generic

__all__ = ["LevelRelation", "load_level", "related_values"]

#: A relation as ``_auto.relation_of`` gives it.
LevelRelation = Union[AutoRelation, GenericAutoRelation]


def load_level(registry: DataLoaderRegistry, wanted: Iterable[tuple[LevelRelation, Sequence[Any]]]) -> None:
    """Load each relation for those of its instances that lack it, in one dispatch, and store the values.

    Args:
        registry: the registry whose loaders load (named ``Author.books``, ``Note.target``).
        wanted: ``(relation, instances)`` pairs; the instances are of the relation's model.
    """
    pending: list[tuple[LevelRelation, DataLoader[Any, Any], list[Any], list[Any]]] = []
    for rel, instances in wanted:
        need = [instance for instance in instances if _needs_load(rel, instance)]
        if not need:
            continue
        loader = _loader(registry, rel)
        pending.append((rel, loader, need, [loader.load(instance) for instance in need]))
    for _, loader, _, _ in pending:
        loader.dispatch_count()
    try:
        for rel, _, need, futures in pending:
            for instance, future in zip(need, futures):
                _store(rel, instance, future.result())
    finally:
        for _, loader, need, _ in pending:
            for instance in need:
                loader.clear(instance)


def related_values(rel: LevelRelation, instance: Any) -> list[Any]:
    """What *rel* holds on *instance* (cached, never queried): its rows, its target, or ``[]``."""
    if isinstance(rel, GenericAutoRelation):
        target = rel.field.get_cached_value(instance, None) if rel.field.is_cached(instance) else None
        return [] if target is None else [target]
    if rel.rel.many:
        cache = instance.__dict__.get("_prefetched_objects_cache")
        queryset = cache.get(rel.prefetch_name) if cache is not None else None
        rows = getattr(queryset, "_result_cache", None)
        return list(rows) if rows is not None else []
    if not rel.descriptor.is_cached(instance):
        return []
    target = _to_one_cache(rel).get_cached_value(instance, None)
    return [] if target is None else [target]


def _loader(registry: DataLoaderRegistry, rel: LevelRelation) -> DataLoader[Any, Any]:
    if isinstance(rel, GenericAutoRelation):
        return registry.loader_for(load_generic, rel.field)
    return auto_related_loader(registry, rel.descriptor)


def _needs_load(rel: LevelRelation, instance: Any) -> bool:
    if isinstance(rel, GenericAutoRelation):
        return not rel.field.is_cached(instance)
    if rel.on_instance(instance):
        return False
    if rel.rel.many or not isinstance(rel.descriptor, ForwardManyToOneDescriptor):
        return instance.pk is not None  # an unsaved instance has no related rows (its manager refuses it)
    attname = rel.descriptor.field.attname
    # a None foreign key costs Django no statement; a deferred one (not in __dict__) is read by the batch
    return attname not in instance.__dict__ or instance.__dict__[attname] is not None


def _to_one_cache(rel: AutoRelation) -> Any:
    """The ``FieldCacheMixin`` holding a to-one relation's value on the parent."""
    descriptor = rel.descriptor
    return descriptor.field if isinstance(descriptor, ForwardManyToOneDescriptor) else descriptor.related


def _store(rel: LevelRelation, instance: Any, value: Any) -> None:
    if isinstance(rel, GenericAutoRelation):
        rel.field.set_cached_value(instance, value)
        return
    descriptor = rel.descriptor
    if rel.rel.many:
        _store_rows(rel, instance, value)
    elif isinstance(descriptor, ForwardManyToOneDescriptor):
        field = descriptor.field
        if value is None:
            return  # a dangling foreign key: Django's own read raises DoesNotExist, as without us
        field.set_cached_value(instance, value)
        if not field.remote_field.multiple:  # a one-to-one: the target knows its source, as in Django
            field.remote_field.set_cached_value(value, instance)
    else:  # a reverse one-to-one
        descriptor.related.set_cached_value(instance, value)
        if value is not None:
            descriptor.related.field.set_cached_value(value, instance)


def _store_rows(rel: AutoRelation, instance: Any, rows: list[Any]) -> None:
    """The rows as ``prefetch_related`` leaves them: the manager's queryset, evaluated, in the cache."""
    descriptor = rel.descriptor
    queryset = descriptor.__get__(instance, type(instance)).get_queryset()
    queryset._result_cache = list(rows)
    queryset._prefetch_done = True
    cache = instance.__dict__.get("_prefetched_objects_cache")
    if cache is None:
        cache = instance._prefetched_objects_cache = {}
    cache[rel.prefetch_name] = queryset
    if rel.rel.generic is not None:
        field = _generic_foreign_key(rel.rel.generic)  # each row's GenericForeignKey is the parent
    elif not isinstance(descriptor, ManyToManyDescriptor):
        field = descriptor.field  # a reverse foreign key: each row's forward FK is the parent
    else:
        return
    if field is None:
        return
    for row in rows:
        if not field.is_cached(row):
            field.set_cached_value(row, instance)


def _generic_foreign_key(relation: Any) -> Any:
    """The ``GenericForeignKey`` of a ``GenericRelation``'s rows (its content type and object id fields), or None.

    A cached target is checked by Django against the row's content type and object id on every read
    (``GenericForeignKey.__get__``), so caching the parent there is safe even for a proxy model."""
    for field in relation.related_model._meta.private_fields:
        if getattr(field, "ct_field", None) == relation.content_type_field_name and hasattr(field, "is_cached") \
                and getattr(field, "fk_field", None) == relation.object_id_field_name:
            return field
    return None

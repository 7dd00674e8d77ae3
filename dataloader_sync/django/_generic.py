"""Generic foreign keys (``GenericForeignKey``): the target row of each instance, one statement per target model.

``load_generic`` is a batch function for ``DataLoaderRegistry.loader_for``
(the family of one ``GenericForeignKey`` field), as ``load_related`` is for
the other relations; its loaders are named after the field
(``Note.target``).

Guarantees:
- One SQL statement per target model and database among the batch's
  instances (in chunks of the backend's parameter limit, as ``load_related``),
  read through the target model's base manager, as Django's own descriptor
  reads it.  The content types come from Django's per-database cache
  (``ContentType.objects.get_for_id``).
- The value of a load: the target instance, or ``None`` (no content type or
  object id, a missing row, an object id the target's primary key refuses).
- No lock: everything runs in the batch call.
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from django.core.exceptions import ValidationError
from django.db import router
from django.db.models import Model

from ._connections import batch_connection
from ._querysets import key_chunks

__all__ = ["is_generic_foreign_key", "load_generic"]


def is_generic_foreign_key(field: Any) -> bool:
    """Whether *field* is a ``GenericForeignKey`` (contenttypes imported, so possibly in use)."""
    from django.contrib.contenttypes.fields import GenericForeignKey

    return isinstance(field, GenericForeignKey)


def load_generic(instances: Sequence[Model], field: Any) -> list[Any]:
    """The target of *field* (a ``GenericForeignKey``) on each instance: one statement per target model.

    Args:
        instances: instances of the field's model.
        field: the ``GenericForeignKey`` (``Note.target``).

    Returns:
        One target instance or ``None`` per instance, in order.
    """
    from django.contrib.contenttypes.models import ContentType

    ct_attname = field.model._meta.get_field(field.ct_field).attname
    wanted: list[Any] = []
    groups: dict[tuple[str, Any], dict[Any, None]] = {}
    for instance in instances:
        ct_id, object_id = getattr(instance, ct_attname), getattr(instance, field.fk_field)
        if ct_id is None or object_id is None:
            wanted.append(None)
            continue
        db = instance._state.db or router.db_for_read(type(instance), instance=instance)  # Django's record
        model = ContentType.objects.db_manager(db).get_for_id(ct_id).model_class()
        try:
            key = model._meta.pk.to_python(object_id) if model is not None else None
        except ValidationError:
            key = None
        if model is None or key is None:
            wanted.append(None)
            continue
        wanted.append((db, model, key))
        groups.setdefault((db, model), {})[key] = None
    found: dict[tuple[str, Any, Any], Any] = {}
    for (db, model), keys in groups.items():
        pk = model._meta.pk
        base = model._base_manager.using(db).order_by()
        with batch_connection(db):
            for chunk in key_chunks(base, pk.name, pk, list(keys)):
                for row in chunk:
                    found[(db, model, row.pk)] = row
    return [found.get(w) if w is not None else None for w in wanted]


def _generic_key(field: Any) -> Hashable:
    key: Hashable = field  # a GenericForeignKey hashes as a model field: by its model and name
    return key


def _generic_name(field: Any) -> str:
    return f"{field.model.__name__}.{field.name}"


load_generic.dataloader_key = _generic_key  # type: ignore[attr-defined]
load_generic.dataloader_name = _generic_name  # type: ignore[attr-defined]
load_generic.dataloader_name_is_label = True  # type: ignore[attr-defined]

"""What a model field descriptor means to a loader: which rows to query, and how to match them to a parent.

A relation is read once per descriptor from Django's own metadata (the
descriptor classes of ``django.db.models.fields.related_descriptors``) into a
``Relation``: the related model, the parent's key attribute, and the path,
on the related model, of the value that equals that key.  The loaders then
annotate every related row with that path (``F(path)``), filter on it and
group by it, so every kind of relation is one query of the same shape:

===========================  ==================  ==========================  ==========================
descriptor (example)         related model       parent's key attribute      path on the related model
===========================  ==================  ==========================  ==========================
forward FK / one-to-one      ``Author``          ``book.author_id``          the target field (``id``)
(``Book.author``)
reverse FK (``Author.books``)  ``Book``          ``author.id``               ``author_id``
reverse one-to-one           ``AuthorProfile``   ``author.id``               ``author_id``
(``Author.profile``)
many-to-many (``Book.tags``)   ``Tag``           ``book.id``                 ``books__id`` (the through table's column)
many-to-many, reverse        ``Book``            ``tag.id``                  ``tags__id``
(``Tag.books``)
generic relation             ``Note``            ``book.id``                 ``object_id`` (and the
(``Book.notes``)                                                             book's content type)
===========================  ==================  ==========================  ==========================

Django trims the last join of a path that ends on the key a foreign key
points to, so ``books__id`` reads the through table's ``book_id`` and
``author_id`` needs no join at all.

Guarantees:
- ``relation(descriptor)`` raises ``TypeError`` for anything else than the
  descriptor kinds above (a ``GenericForeignKey``, which ``_generic``
  loads, a plain field, a ``Field`` object), naming what was given.
- A ``Relation`` is immutable, and the same object for the same descriptor
  (a small cache, filled without a lock: two threads may both build it, and
  either copy is right).
"""
from __future__ import annotations

import dataclasses
import sys
from typing import Any, Optional

from django.db.models import Manager
from django.db.models.fields.related_descriptors import (
    ForwardManyToOneDescriptor,
    ManyToManyDescriptor,
    ReverseManyToOneDescriptor,
    ReverseOneToOneDescriptor,
)

__all__ = ["Relation", "generic_filter", "relation"]


@dataclasses.dataclass(frozen=True)
class Relation:
    """A relation, read from its descriptor (see the module notes).

    Attributes:
        label: ``"Author.books"``: the parent model and the attribute.
        related_model: the model of the rows a load returns.
        parent_attname: the parent instance's attribute holding the key
            (``author_id`` on a book for ``Book.author``; ``id`` on an author for
            ``Author.books``).
        path: the related model's path whose value equals that key.
        key_field: the related model's field at the end of *path* (its
            ``get_db_prep_value`` and ``cast_db_type`` shape the keys in SQL).
        many: True when a load gives a list (reverse FK, many-to-many).
        base_manager: True when the related rows come from the related
            model's ``_base_manager`` (a forward FK or one-to-one, as in
            Django), False for its ``_default_manager``.
        through_table: a many-to-many relation's through table (its join
            links rows to parents), else None.
        reverse_path: for a forward foreign key or one-to-one with a reverse
            accessor, the related model's path to the parent's primary key
            (``books__id`` for ``Book.author``): the rows can be matched by
            the parents' keys when their foreign key column was deferred.
        parent_pk: the parent model's primary key field, beside *reverse_path*.
        generic: for a ``GenericRelation`` (``Book.notes``), the field: the
            related rows are also filtered on its content type
            (``generic_filter``), and the parents' keys are converted to the
            object id field's type.
    """

    label: str
    related_model: Any
    parent_attname: str
    path: str
    key_field: Any
    many: bool
    base_manager: bool
    through_table: Optional[str] = None
    reverse_path: Optional[str] = None
    parent_pk: Any = None
    generic: Any = None

    def manager(self) -> Manager[Any]:
        model = self.related_model
        manager: Manager[Any] = model._base_manager if self.base_manager else model._default_manager
        return manager


_CACHE: dict[int, tuple[Any, Relation]] = {}  # id(descriptor) -> (descriptor, its Relation)


def relation(descriptor: Any) -> Relation:
    """The ``Relation`` of *descriptor* (``Book.author``, ``Author.books``, ``Book.tags``, ...).

    Raises:
        TypeError: *descriptor* is not one of a model's relation descriptors.
    """
    cached = _CACHE.get(id(descriptor))
    if cached is not None and cached[0] is descriptor:
        return cached[1]
    made = _read(descriptor)
    _CACHE[id(descriptor)] = (descriptor, made)  # holds the descriptor: its id cannot be reused
    return made


def generic_filter(rel: Relation, db: str) -> dict[str, Any]:
    """The content type filter of a ``GenericRelation``'s rows on database *db* (its ``ContentType``
    is read from Django's per-database cache)."""
    from django.contrib.contenttypes.models import ContentType

    field = rel.generic
    content_type = ContentType.objects.db_manager(db).get_for_model(field.model,
                                                                    for_concrete_model=field.for_concrete_model)
    return {f"{field.content_type_field_name}__pk": content_type.pk}


def _generic_descriptor() -> Any:
    """``ReverseGenericManyToOneDescriptor``, or None where contenttypes cannot be imported."""
    module = sys.modules.get("django.contrib.contenttypes.fields")
    return getattr(module, "ReverseGenericManyToOneDescriptor", None)


def _read(d: Any) -> Relation:
    # ManyToManyDescriptor and the generic relations' descriptor are
    # ReverseManyToOneDescriptors, and a forward one-to-one a
    # ForwardManyToOneDescriptor: test the special cases first.
    generic = _generic_descriptor()
    if generic is not None and isinstance(d, generic):  # Book.notes: notes whose target is the book
        field = d.field
        object_id = field.remote_field.model._meta.get_field(field.object_id_field_name)
        return Relation(f"{field.model.__name__}.{field.name}", field.remote_field.model,
                        field.model._meta.pk.attname, object_id.attname, object_id, True, False, generic=field)
    if isinstance(d, ManyToManyDescriptor):
        field, rel = d.field, d.rel
        through = rel.through._meta
        if d.reverse:  # Tag.books: books whose tags include the tag
            source_fk = through.get_field(field.m2m_reverse_field_name())
            return Relation(f"{field.related_model.__name__}.{rel.get_accessor_name()}", field.model,
                            source_fk.target_field.attname, f"{field.name}__{source_fk.target_field.name}",
                            source_fk.target_field, True, False, through.db_table)
        source_fk = through.get_field(field.m2m_field_name())  # Book.tags: tags of the book
        return Relation(f"{field.model.__name__}.{field.name}", field.related_model,
                        source_fk.target_field.attname,
                        f"{field.related_query_name()}__{source_fk.target_field.name}",
                        source_fk.target_field, True, False, through.db_table)
    if isinstance(d, ReverseManyToOneDescriptor):  # Author.books
        field = d.field
        return Relation(f"{d.rel.model.__name__}.{d.rel.get_accessor_name()}", d.rel.related_model,
                        field.target_field.attname, field.attname, field, True, False)
    if isinstance(d, ReverseOneToOneDescriptor):  # Author.profile
        field = d.related.field
        return Relation(f"{d.related.model.__name__}.{d.related.get_accessor_name()}", d.related.related_model,
                        field.target_field.attname, field.attname, field, False, True)
    if isinstance(d, ForwardManyToOneDescriptor):  # Book.author, AuthorProfile.author
        field = d.field
        pk = field.model._meta.pk
        remote = field.remote_field
        hidden = remote.hidden if hasattr(remote, "hidden") else remote.is_hidden()  # Django 5.1 renamed it
        reverse = None if hidden else f"{field.related_query_name()}__{pk.name}"
        return Relation(f"{field.model.__name__}.{field.name}", field.related_model, field.attname,
                        field.target_field.attname, field.target_field, False, True, None, reverse,
                        pk if reverse else None)
    raise TypeError(f"field must be a relation descriptor of a model, such as Author.books (got {type(d).__name__})")

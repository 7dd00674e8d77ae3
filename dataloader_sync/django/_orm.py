"""Django ORM loaders: relations and rows by field, batched without hand-written batch functions.

``load_related`` is a batch function for ``DataLoaderRegistry.loader_for``;
``related_loader(registry, Author.books)`` is that family's loader, and
``model_loader(registry, Author)`` one that loads rows by a field.

Guarantees:
- One SQL statement per batch for every relation kind (see ``_relations``),
  and per database alias among the batch's instances; more only when a
  batch outgrows the backend's limit of bound parameters (never on
  PostgreSQL; see ``_querysets``).  A batch whose keys are all ``None``
  foreign keys, or whose queryset can match nothing, runs no statement.
- The value of a load: for a to-one relation (forward foreign key or
  one-to-one, reverse one-to-one) the related instance or ``None`` (a
  ``None`` foreign key, a missing row, a row the queryset filters out); for a
  to-many relation (reverse foreign key, many-to-many either side) a new
  list, ``[]`` when there is nothing.
- Order: each list is in the related queryset's order (its ``order_by()``,
  else the related model's ``Meta.ordering``, else the primary key), the
  primary key breaking ties; ``first=N`` keeps the first N of that order per
  parent, in the same statement (``ROW_NUMBER() OVER (PARTITION BY parent
  ORDER BY ...)``, filtered, which Django 4.2+ compiles to a subquery; a
  ``distinct()`` queryset's rows are all read, as a window would number the
  duplicates ``DISTINCT`` drops, and the first N kept).
- The rows come from the database the instances were loaded from
  (``instance._state.db``) unless the queryset names one (``.using()``).
- Two equal querysets (same model, SQL, parameters and ``.using()`` alias)
  are one family argument: they share one loader per registry.
- Parents that deferred their key column (``only()``) cost no statement of
  their own for a forward foreign key or one-to-one with a reverse accessor:
  the rows are matched to the parents' primary keys through the reverse
  join; otherwise the deferred keys of the batch are read first, one
  statement for all of them.
- Off a request's thread (a tick, ``executor=``), the batch leaves no
  connection open behind it (see ``_connections``).
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Hashable, Sequence
from typing import Any, Optional, Union

from django.core.exceptions import ValidationError
from django.db import router
from django.db.models import Count, F, Func, Model, QuerySet, Window
from django.db.models.functions import RowNumber

from .._core import DataLoader
from .._registry import DataLoaderRegistry
from ._connection_scope import connection_loader
from ._connections import batch_connection
from ._querysets import EMPTY, check_queryset, key_chunks, ordering_of, queryset_key, queryset_label, using_alias
from ._relations import Relation, generic_filter, relation

__all__ = ["link_parents", "load_model", "load_related", "model_loader", "related_loader", "unlinked"]

_PARENT = "_dataloader_sync_parent"  # annotation: the parent key a related row belongs to
_ROW = "_dataloader_sync_row"  # annotation: the row's position within its parent (first=)
_TOTAL = "_dataloader_sync_total"  # annotation: the number of its parent's rows (load_related_counted)


def _check_first(first: Any, rel: Relation) -> None:
    if first is None:
        return
    if isinstance(first, bool) or not isinstance(first, int):
        raise TypeError("first must be an int or None")
    if first < 1:
        raise ValueError("first must be >= 1")
    if not rel.many:
        raise ValueError(f"first applies to a to-many relation ({rel.label} gives one instance)")


def _checked(field: Any, queryset: Optional[QuerySet[Any]], first: Optional[int]) -> Relation:
    rel = relation(field)
    if queryset is not None:
        check_queryset(queryset, rel.related_model)
        ordering_of(queryset)  # refuses order_by("?") now, not when the batch runs
    _check_first(first, rel)
    return rel


def _empty(queryset: Optional[QuerySet[Any]]) -> bool:
    key = queryset_key(queryset)
    return isinstance(key, tuple) and key[2] == EMPTY


def load_related(instances: Sequence[Model], field: Any, queryset: Optional[QuerySet[Any]] = None,
                 first: Optional[int] = None) -> list[Any]:
    """The related rows of each instance through *field*, in one SQL statement.

    A batch function for ``registry.loader_for(load_related, field, ...)``
    (``related_loader`` is that call); see the module notes for values,
    order and statement counts.

    Args:
        instances: the parents, e.g. books for ``Book.author``, authors for
            ``Author.books``; a deferred key attribute is read as the module
            notes say.
        field: a relation descriptor of the parents' model: ``Book.author``
            (forward foreign key), ``AuthorProfile.author`` (forward
            one-to-one), ``Author.books`` (reverse foreign key),
            ``Author.profile`` (reverse one-to-one), ``Book.tags`` /
            ``Tag.books`` (many-to-many).
        queryset: a queryset of the related model that filters, orders and
            annotates the related rows (not sliced; ``.using()`` picks the
            database).  Default: the related model's default manager (base
            manager for forward relations, as in Django).
        first: keep each parent's first *first* related rows (to-many only).

    Returns:
        One value per instance, in order: an instance or ``None`` (to-one), a list (to-many).

    Raises:
        TypeError, ValueError: a *field* that is not a relation descriptor, a
        queryset of another model, sliced, of values; *first* < 1 or on a
        to-one relation.
    """
    return _load(instances, field, queryset, first, None)


def load_related_counted(instances: Sequence[Model], field: Any, queryset: Optional[QuerySet[Any]],
                         first: int) -> tuple[list[Any], list[int]]:
    """``load_related``'s lists for a to-many *field* limited by *first*, and the number of all of each
    parent's rows, read from the same statement (``COUNT(*) OVER (PARTITION BY parent)``, computed
    before the rows past *first* are dropped; a ``distinct()`` queryset's rows are all read and
    counted as they come): a connection's page and its ``totalCount`` (``_pages.load_page``)."""
    counts: dict[Any, int] = {}
    rows = _load(instances, field, queryset, first, counts)
    rel = relation(field)
    parents = [getattr(instance, rel.parent_attname) for instance in instances]
    if rel.generic is not None:
        parents = [rel.key_field.to_python(key) if key is not None else None for key in parents]
    return rows, [counts.get(key, 0) if key is not None else 0 for key in parents]


load_related.load_counted = load_related_counted  # type: ignore[attr-defined]  # _pages.load_page's


def _load(instances: Sequence[Model], field: Any, queryset: Optional[QuerySet[Any]], first: Optional[int],
          counts: Optional[dict[Any, int]]) -> list[Any]:
    """``load_related``; *counts*, when given, filled with ``{parent key: its rows}`` by the statement."""
    rel = _checked(field, queryset, first)
    if rel.reverse_path is not None and _by_parent_key(rel, instances, queryset):
        return _load_by_parent_key(rel, instances, queryset)
    _load_deferred_keys(instances, rel.parent_attname)
    parents = [getattr(instance, rel.parent_attname) for instance in instances]
    if rel.generic is not None:  # the parents' keys as the object id column holds them
        parents = [rel.key_field.to_python(key) if key is not None else None for key in parents]
    found: dict[Any, Any] = {}
    if not _empty(queryset):
        for db, keys in keys_by_database(rel, queryset, instances, parents).items():
            found.update(_fetch(rel, queryset, first, db, list(dict.fromkeys(keys)), counts))
    if rel.many:
        return [list(found.get(key, ())) if key is not None else [] for key in parents]
    return [found.get(key) if key is not None else None for key in parents]


def link_parents(field: Any, instances: Sequence[Model], values: Sequence[Any]) -> None:
    """For a reverse foreign key or one-to-one *field* (``Author.books``, ``Author.profile``), each row
    of *values* (``load_related``'s, one per instance) gets its forward relation (``book.author``) set to
    its parent, as Django's related managers and prefetches do: reading it costs no statement.  A row
    that has it already (``select_related``) keeps its own; other relations are left as they are."""
    rel = relation(field)
    key_field = rel.key_field
    if not key_field.is_relation:  # forward relations, many-to-many, generic relations: a plain column
        return
    for instance, value in zip(instances, values):
        for row in (value if rel.many else (value,)) if value is not None else ():
            if not key_field.is_cached(row):
                key_field.set_cached_value(row, instance)


def keys_by_database(rel: Relation, queryset: Optional[QuerySet[Any]], instances: Sequence[Model],
                     parents: Sequence[Any]) -> dict[str, list[Any]]:
    """The parents' non-None keys grouped by the database alias their related rows are read from.

    The alias is the queryset's ``.using()``, else the instance's own
    database, else the router's choice for the related model.
    """
    by_db: dict[str, list[Any]] = {}
    for instance, key in zip(instances, parents):
        if key is not None:
            # Model._state.db: Django's documented record of the database an instance came from.
            db = (using_alias(queryset) if queryset is not None else None) or instance._state.db \
                or router.db_for_read(rel.related_model, instance=instance)
            by_db.setdefault(db, []).append(key)
    return by_db


def _by_parent_key(rel: Relation, instances: Sequence[Model], queryset: Optional[QuerySet[Any]]) -> bool:
    """Whether a to-one batch is better matched by the parents' primary keys: some parent deferred its
    foreign key column, and the queryset joins no table its filters could share with the reverse join."""
    if all(rel.parent_attname in instance.__dict__ for instance in instances):
        return False
    if queryset is None:
        return True
    return len(queryset.query.alias_map) <= 1 and not queryset.query.annotations


def _load_by_parent_key(rel: Relation, instances: Sequence[Model], queryset: Optional[QuerySet[Any]]) -> list[Any]:
    """The related row of each parent, matched through the reverse join by the parent's primary key
    (``Author`` rows annotated with ``books__id``): one statement, where reading the deferred foreign
    keys first would cost one more.  The foreign key of each parent whose row was found is stored as
    Django stores a loaded deferred column."""
    pk, path = rel.parent_pk, rel.reverse_path
    assert path is not None  # _by_parent_key's caller checked it
    by_parent = dataclasses.replace(rel, parent_attname=pk.attname, path=path, key_field=pk)
    parents = [getattr(instance, pk.attname) for instance in instances]
    found: dict[Any, Any] = {}
    if not _empty(queryset):
        for db, keys in keys_by_database(by_parent, queryset, instances, parents).items():
            found.update(_fetch(by_parent, queryset, None, db, list(dict.fromkeys(keys))))
    values = [found.get(key) if key is not None else None for key in parents]
    target = rel.key_field.attname
    for instance, value in zip(instances, values):
        if value is not None and rel.parent_attname not in instance.__dict__:
            instance.__dict__[rel.parent_attname] = getattr(value, target)
    return values


def _load_deferred_keys(instances: Sequence[Model], attname: str) -> None:
    """Load the key column *attname* of the instances that deferred it: one statement per model and database.

    Reading a deferred column loads it for that instance alone (one query
    each): ``Book.objects.only("title")``, or strawberry-django's optimizer,
    would turn a batch back into N+1.  The values are stored as Django
    stores a loaded deferred column, so later reads are free too.
    """
    deferred: dict[tuple[Any, str], list[Model]] = {}
    for instance in instances:
        if attname not in instance.__dict__:  # deferred (a loaded column is in the instance's __dict__)
            db = instance._state.db or router.db_for_read(type(instance), instance=instance)  # documented, as above
            deferred.setdefault((type(instance)._meta.concrete_model, db), []).append(instance)
    for (model, db), group in deferred.items():
        with batch_connection(db):
            values = dict(model._base_manager.using(db).filter(pk__in={i.pk for i in group})
                          .values_list("pk", attname))
        for instance in group:
            instance.__dict__[attname] = values.get(instance.pk)


def _fetch(rel: Relation, queryset: Optional[QuerySet[Any]], first: Optional[int], db: str,
           keys: list[Any], counts: Optional[dict[Any, int]] = None) -> dict[Any, Any]:
    """``{parent key: [rows] or row}`` for *keys* on *db*: one statement (per chunk, see ``_querysets``);
    with *first*, *counts* (if given) filled with each parent's number of rows, a window of the same statement."""
    base = (rel.manager().all() if queryset is None else unlinked(rel, queryset)).using(db)
    if rel.generic is not None:
        base = base.filter(**generic_filter(rel, db))
    ordering = ordering_of(base)
    # a window numbers (and counts) the rows before DISTINCT drops duplicates: a distinct() queryset's
    # rows are all read, each parent's first kept and counted here
    windowed = first is not None and not base.query.distinct
    if not windowed:
        base = base.annotate(**{_PARENT: F(rel.path)})
    else:
        # Django filters on a window (ROW_NUMBER <= first) by selecting from a subquery whose columns it
        # keys by expression: a parent key equal to a column of the row (Book.author_id) was selected
        # once, and the rows were read one column short (IndexError) whenever the order named a joined
        # column (order_by("author__name")).  The same column, as an expression of its own.
        base = base.annotate(**{_PARENT: Func(F(rel.path), template="%(expressions)s")})
        base = base.annotate(**{_ROW: Window(RowNumber(), partition_by=F(_PARENT), order_by=ordering)})
        if counts is not None:
            base = base.annotate(**{_TOTAL: Window(Count("*"), partition_by=F(_PARENT))})
        base = base.filter(**{f"{_ROW}__lte": first})
    base = base.order_by(*ordering)
    found: dict[Any, Any] = {}
    with batch_connection(db):
        for chunk in key_chunks(base, _PARENT, rel.key_field, keys):
            for row in chunk:
                key = row.__dict__.pop(_PARENT)
                row.__dict__.pop(_ROW, None)
                if counts is not None and windowed:
                    counts[key] = row.__dict__.pop(_TOTAL)
                if rel.many:
                    found.setdefault(key, []).append(row)
                else:
                    found.setdefault(key, row)
    if first is not None and not windowed:
        _keep_first(found, first, counts)
    return found


def _keep_first(found: dict[Any, list[Any]], first: int, counts: Optional[dict[Any, int]]) -> None:
    """Each parent's first *first* rows of *found* (all its rows), counted in *counts* if given."""
    for key, rows in found.items():
        if counts is not None:
            counts[key] = len(rows)
        del rows[first:]


def unlinked(rel: Relation, queryset: QuerySet[Any]) -> QuerySet[Any]:
    """*queryset*, or the same rows selected by primary key when it joins the relation's own through table.

    The parent annotation (``F("books__id")``) reuses a join the queryset
    already has to that table, so ``Tag.books`` with
    ``Book.objects.filter(tags__name="x")`` would keep only the links to tag
    "x".  Selecting the queryset's rows in a subquery keeps its filter apart
    from the link: the books of each tag that are (also) tagged "x".  The
    queryset's order is kept; its annotations cannot be (they are refused).
    """
    if rel.through_table is None or all(
            join.table_name != rel.through_table for join in queryset.query.alias_map.values()):
        return queryset
    if queryset.query.annotations:
        raise ValueError(f"a queryset for {rel.label} that joins the relation itself cannot be annotated "
                         "(filter on a subquery: pk__in=...)")
    ordered = queryset.query.order_by or (queryset.query.default_ordering and queryset.query.get_meta().ordering)
    selected = queryset.model._default_manager.filter(pk__in=queryset.order_by().values("pk"))
    return selected.order_by(*ordering_of(queryset)) if ordered else selected


def _related_key(field: Any, queryset: Optional[QuerySet[Any]] = None, first: Optional[int] = None) -> Hashable:
    _checked(field, queryset, first)
    return (field, queryset_key(queryset), first)


def _related_name(field: Any, queryset: Optional[QuerySet[Any]] = None, first: Optional[int] = None) -> str:
    parts = [relation(field).label]
    if queryset is not None:
        parts.append(f"queryset={queryset_label(queryset)}")
    if first is not None:
        parts.append(f"first={first}")
    return ", ".join(parts)


# The family's hooks for DataLoaderRegistry.loader_for: a queryset counts by
# its SQL, not by the object, and the name reads "load_related(Author.books)".
load_related.dataloader_key = _related_key  # type: ignore[attr-defined]
load_related.dataloader_name = _related_name  # type: ignore[attr-defined]


def related_loader(registry: DataLoaderRegistry, field: Any, queryset: Optional[QuerySet[Any]] = None,
                   first: Optional[int] = None) -> DataLoader[Any, Any]:
    """``registry.loader_for(load_related, field, queryset, first)``: the loader of a relation.

    ``related_loader(info.context.loaders, Author.books).load(author)`` is a
    future of the author's books; see ``load_related`` for the arguments and
    values.  The loader is made on first use per registry (so per request),
    named ``load_related(Author.books)``.

    Called without *first* in the resolver of a connection field that pages
    through related loaders (``dataloader_sync.django.DjangoConnectionField``,
    ``DjangoFilterConnectionField``, ``dataloader_sync.strawberry_django.connection``)
    for a relation to that connection's nodes, it returns the loader of the
    connection's own page family instead: the field's filters, order and
    page applied in the batch (see ``_connection_scope``).

    Raises:
        TypeError, ValueError: as ``load_related``, at once.
    """
    if first is None:
        page = connection_loader(registry, load_related, field, queryset)
        if page is not None:
            return page
    return registry.loader_for(load_related, field, queryset, first)


def load_model(values: Sequence[Any], model_or_queryset: Union[type[Model], QuerySet[Any]],
               field: str = "pk") -> list[Any]:
    """The row of *model_or_queryset* whose *field* equals each value, or ``None``: one SQL statement.

    A batch function for ``registry.loader_for`` (``model_loader`` is that
    call).  Values are converted by the field (``Field.to_python``), so the
    string ``"3"`` finds the row with primary key 3; a value it refuses fails
    that key only (``ValidationError``).  When several rows share a value
    (a field that is not unique), the first in the queryset's order wins
    (primary key order when it has none).

    Raises:
        TypeError, ValueError: see ``model_loader``.
    """
    queryset, model_field = _model_args(model_or_queryset, field)
    results: list[Any] = []
    keys: list[Any] = []
    for value in values:
        try:
            key = model_field.to_python(value)
        except ValidationError as exc:
            results.append(exc)
            continue
        results.append(key)
        keys.append(key)
    found: dict[Any, Any] = {}
    if keys and not _empty(queryset):
        db = queryset.db
        base = queryset.annotate(**{_PARENT: F(model_field.attname)}).order_by(*ordering_of(queryset))
        with batch_connection(db):
            for chunk in key_chunks(base, _PARENT, model_field, list(dict.fromkeys(k for k in keys if k is not None))):
                for row in chunk:
                    found.setdefault(row.__dict__.pop(_PARENT), row)
    return [r if isinstance(r, Exception) else found.get(r) for r in results]


def _model_args(model_or_queryset: Any, field: Any) -> tuple[QuerySet[Any], Any]:
    if isinstance(model_or_queryset, QuerySet):
        check_queryset(model_or_queryset, model_or_queryset.model, "model_or_queryset")
        queryset = model_or_queryset
    elif isinstance(model_or_queryset, type) and issubclass(model_or_queryset, Model):
        queryset = model_or_queryset._default_manager.all()  # type: ignore[attr-defined]
    else:
        raise TypeError("model_or_queryset must be a model class or a QuerySet")
    if not isinstance(field, str):
        raise TypeError("field must be a str (a field name, or 'pk')")
    return queryset, _model_field(queryset.model, field)


@functools.lru_cache(maxsize=1024)
def _model_field(model: Any, field: str) -> Any:
    """*model*'s concrete field named *field* (a model's fields do not change: cached, as Django's _meta does)."""
    meta = model._meta
    model_field = meta.pk if field == "pk" else meta.get_field(field)
    if not getattr(model_field, "concrete", False) or model_field.many_to_many or model_field.one_to_many:
        raise ValueError(f"field must name a concrete field of {model.__name__} (got {field!r})")
    return model_field


def _model_key(model_or_queryset: Any, field: Any = "pk") -> Hashable:
    if isinstance(model_or_queryset, QuerySet):
        check_queryset(model_or_queryset, model_or_queryset.model, "model_or_queryset")
        ordering_of(model_or_queryset)  # refuses order_by("?") now, not when the batch runs
        source: Hashable = queryset_key(model_or_queryset)
        model = model_or_queryset.model
    elif isinstance(model_or_queryset, type) and issubclass(model_or_queryset, Model):
        source = model = model_or_queryset
    else:
        raise TypeError("model_or_queryset must be a model class or a QuerySet")
    if not isinstance(field, str):
        raise TypeError("field must be a str (a field name, or 'pk')")
    return (source, _model_field(model, field).attname)


def _model_name(model_or_queryset: Any, field: Any = "pk") -> str:
    if isinstance(model_or_queryset, QuerySet):
        return f"{model_or_queryset.model.__name__}.{field}, queryset={queryset_label(model_or_queryset)}"
    return f"{model_or_queryset.__name__}.{field}"


load_model.dataloader_key = _model_key  # type: ignore[attr-defined]
load_model.dataloader_name = _model_name  # type: ignore[attr-defined]


def model_loader(registry: DataLoaderRegistry, model_or_queryset: Union[type[Model], QuerySet[Any]],
                 field: str = "pk") -> DataLoader[Any, Any]:
    """``registry.loader_for(load_model, model_or_queryset, field)``: ``load(value)`` → the instance or ``None``.

    ``model_loader(registry, Author).load(3)`` is a future of the author with
    primary key 3; ``model_loader(registry, Book.objects.filter(year__gte=2000), "title")``
    loads books by title, among those the queryset selects.  Equal querysets
    share one loader, as for ``related_loader``.

    Args:
        model_or_queryset: a model class (its default manager) or a queryset
            of it (filters apply; ``.using()`` picks the database; not sliced).
        field: the name of a concrete field (``"pk"``, ``"id"``, ``"slug"``,
            a foreign key's ``"author"`` or ``"author_id"``).

    Raises:
        TypeError, ValueError: not a model or queryset, a sliced or values
        queryset, a *field* that is not a concrete field's name (Django's
        ``FieldDoesNotExist`` for an unknown name).
    """
    return registry.loader_for(load_model, model_or_queryset, field)

"""Pages of to-many relations for connection fields: the rows, their count, one query each per batch.

A connection field that resolves through ``related_loader`` installs a
:class:`PageRequest` (see ``_connection_scope``) built from its arguments:
the related model, a function making its filtered and ordered queryset, the
number of leading rows it needs per parent and whether its ``totalCount`` is
selected.  ``related_loader`` then hands the resolver the loader of the
family ``load_page(load_related, field, queryset=..., first=..., count=...)``,
whose values are :class:`Page` lists.

Guarantees:
- One SQL query per batch for the rows (``load_related`` with ``queryset=``
  and ``first=``: a window function when limited), plus one for the counts
  when ``count`` is true (``GROUP BY`` the parent link), whatever the number
  of parents.
- Equal querysets (same SQL and parameters) share a family: the key is
  ``load_related``'s own (``dataloader_key``), with the count flag.
- The related side's link column (``Book.author_id`` for ``Author.books``) is
  loaded even when the queryset defers it (strawberry-django's optimizer
  does, with ``only()``): grouping rows by parent never costs a query per row.
- The rows and counts are read from the parents' database (Django's router
  with the first parent as hint, as a related manager does), unless the
  queryset was given one with ``using()``.
- No lock: everything here runs in the batch call or in a resolver.
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, Callable, Optional

from django.db import models, router
from django.db.models.fields.related_descriptors import ManyToManyDescriptor, ReverseManyToOneDescriptor
from graphql import FieldNode, FragmentSpreadNode, InlineFragmentNode

from .._dataloader import DataLoader
from .._registry import DataLoaderRegistry

__all__ = ["Page", "PageRequest", "count_related", "load_page", "related_model", "selects"]


class Page(list):  # type: ignore[type-arg]
    """One parent's leading related rows, in order, and the number of all of them.

    Iterating and indexing give the rows loaded: those before the page asked
    for, the page and one more (which tells whether there is a next page).
    ``total_count`` is the number of all the parent's rows matching the
    filters, when it was counted (the connection's ``totalCount`` was
    selected), else None.  ``len()`` is ``total_count`` when it is known —
    what a connection reads as the length of the whole list, as it would ask
    a queryset's ``count()`` — and the number of rows loaded otherwise.
    """

    total_count: Optional[int] = None

    def __len__(self) -> int:
        total = self.total_count
        return list.__len__(self) if total is None else total


def related_model(field: Any) -> Optional[type[models.Model]]:
    """The model on the far side of a to-many relation descriptor, or None for any other value.

    ``Author.books`` (a reverse foreign key) gives ``Book``; ``Book.tags`` and
    ``Tag.books`` (many-to-many, either side) give ``Tag`` and ``Book``.
    """
    if isinstance(field, ManyToManyDescriptor):
        return field.rel.related_model if field.reverse else field.rel.model  # type: ignore[no-any-return]
    if isinstance(field, ReverseManyToOneDescriptor):
        return field.rel.related_model  # type: ignore[no-any-return]
    return None


def _link(field: Any) -> tuple[str, Callable[[Any], Any], Optional[str]]:
    """``(path, key_of, column)`` of a to-many descriptor.

    *path* leads from the related model back to the parent (a lookup and a
    ``values()`` name), *key_of* gives a parent's value in that column, and
    *column* is the related model's own attribute holding it (a foreign key's
    ``attname``), None for many-to-many (the link is in the through table).
    """
    if isinstance(field, ManyToManyDescriptor):
        m2m = field.field
        path = m2m.name if field.reverse else m2m.related_query_name()
        return path, _pk, None
    fk = field.field  # ReverseManyToOneDescriptor: Book.author for Author.books
    target = fk.target_field.attname
    return fk.name, lambda instance: getattr(instance, target), fk.attname


def _pk(instance: Any) -> Any:
    return instance.pk


def _with_column(queryset: models.QuerySet[Any], column: Optional[str], name: Optional[str]) -> models.QuerySet[Any]:
    """*queryset*, loading *column* even if ``only()``/``defer()`` left it out."""
    if column is None:
        return queryset
    fields, defer = queryset.query.deferred_loading
    if defer:
        if column in fields or name in fields:
            kept = set(fields) - {column, name}
            queryset = queryset.defer(None)
            return queryset.defer(*kept) if kept else queryset
        return queryset
    if fields and column not in fields and name not in fields:
        return queryset.only(*fields, column)
    return queryset


def count_related(instances: Sequence[Any], field: Any, queryset: Optional[models.QuerySet[Any]] = None) -> list[int]:
    """How many related rows (in *queryset*, default: all) each instance has, in one SQL query.

    Args:
        instances: the parents (model instances).
        field: a to-many relation descriptor (``Author.books``, ``Book.tags``, ``Tag.books``).
        queryset: the related side's rows to count (its filters apply; its
            order, limits and annotations do not matter).

    Returns:
        One count per instance, in order.

    Raises:
        TypeError: *field* is not a to-many relation descriptor.
    """
    model = related_model(field)
    if model is None:
        raise TypeError(f"field must be a to-many relation descriptor, got {field!r}")
    if not instances:
        return []
    path, key_of, _ = _link(field)
    base = model._default_manager.all() if queryset is None else queryset
    rows = (base.filter(**{f"{path}__in": list(instances)}).order_by().values(path)
            .annotate(_dataloader_sync_count=models.Count("pk", distinct=True)))
    counts = {row[path]: row["_dataloader_sync_count"] for row in rows}
    return [counts.get(key_of(instance), 0) for instance in instances]


def load_page(instances: list[Any], load_related: Callable[..., Any], field: Any, queryset: Any = None,
              first: Optional[int] = None, count: bool = False) -> list[Page]:
    """Batch function of the page families: ``load_related``'s lists as :class:`Page`\\ s, counted if asked.

    Args:
        instances: the parents.
        load_related: ``dataloader_sync.django.load_related``.
        field, queryset, first: as for ``load_related``.
        count: also count each parent's rows in *queryset* (one more query).

    Returns:
        One ``Page`` per parent, in order.
    """
    model = related_model(field)
    if queryset is not None and instances and model is not None and model is queryset.model:
        _, _, column = _link(field)
        queryset = _with_column(queryset, column, field.field.name if column else None)
        # The parents' database, as a related manager (and prefetch_related)
        # would use, unless the queryset names one.
        queryset = queryset.using(queryset._db or router.db_for_read(model, instance=instances[0]))
    rows = load_related(instances, field, queryset=queryset, first=first)
    totals = count_related(instances, field, queryset) if count else None
    pages = []
    for i, items in enumerate(rows):
        page = Page(items)
        if totals is not None:
            page.total_count = totals[i]
        pages.append(page)
    return pages


def _page_key(load_related: Callable[..., Any], field: Any, queryset: Any = None, first: Optional[int] = None,
              count: bool = False) -> Hashable:
    key_of = getattr(load_related, "dataloader_key", None)
    inner = key_of(field, queryset=queryset, first=first) if key_of is not None else (field, queryset, first)
    return (load_related, inner, count)


def _page_name(load_related: Callable[..., Any], field: Any, queryset: Any = None, first: Optional[int] = None,
               count: bool = False) -> str:
    name_of = getattr(load_related, "dataloader_name", None)
    inner = name_of(field, queryset=queryset, first=first) if name_of is not None else repr(field)
    return f"{inner}, count=True" if count else inner


load_page.dataloader_key = _page_key  # type: ignore[attr-defined]
load_page.dataloader_name = _page_name  # type: ignore[attr-defined]


class PageRequest:
    """A connection field's request to the related loaders of its resolver (a ``ConnectionRequest``).

    Not shared between threads: a connection field makes one per parent,
    while its resolver runs.

    Args:
        model: the connection's node model; only relations to it are served.
        make_queryset: ``fn(base) -> queryset``: the connection's filters and
            order applied to *base*, the ``queryset=`` given to
            ``related_loader`` or None (then the field's default rows:
            its manager's).  Called when the resolver asks for a loader.
        first: the number of leading rows needed per parent, or None for all.
        count: the connection's ``totalCount`` is selected (counted only when
            *first* limits the rows: otherwise the rows are all there).

    Attributes:
        served: True once a loader of this request's family was handed out.
    """

    def __init__(self, model: type[models.Model], make_queryset: Callable[[Optional[models.QuerySet[Any]]], Any],
                 first: Optional[int], count: bool) -> None:
        self.model = model
        self.make_queryset = make_queryset
        self.first = first
        self.count = count and first is not None
        self.served = False

    def loader_for(self, registry: DataLoaderRegistry, batch_fn: Callable[..., Any], field: Any,
                   queryset: Any) -> Optional[DataLoader[Any, Any]]:
        """The page family's loader for *field*, or None if *field* does not lead to the node model."""
        model = related_model(field)
        if model is None or model._meta.concrete_model is not self.model._meta.concrete_model:
            return None
        filtered = self.make_queryset(queryset)
        self.served = True
        return registry.loader_for(load_page, batch_fn, field, queryset=filtered, first=self.first,
                                   count=self.count)


def selects(info: Any, name: str) -> bool:
    """Whether the field being resolved selects a subfield *name* (through fragments too)."""
    stack = [node.selection_set for node in info.field_nodes]
    while stack:
        selection_set = stack.pop()
        if selection_set is None:
            continue
        for selection in selection_set.selections:
            if isinstance(selection, FieldNode):
                if selection.name.value == name:
                    return True
            elif isinstance(selection, InlineFragmentNode):
                stack.append(selection.selection_set)
            elif isinstance(selection, FragmentSpreadNode):
                fragment = info.fragments.get(selection.name.value)
                if fragment is not None:
                    stack.append(fragment.selection_set)
    return False

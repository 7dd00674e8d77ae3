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
  of parents.  A request made with ``in_page`` (strawberry-django's
  connections) has the counts read from the rows' own query instead
  (``COUNT(*) OVER (PARTITION BY parent)``) when the batch function offers
  it (its ``dataloader_counted``: ``load_related``'s and the auto
  relations') and the queryset joins no table (``counts_in_window``: a join
  to a many side could repeat a row, which the grouped count would not).
- Equal querysets (same SQL and parameters) share a family: the key is
  ``load_related``'s own (``dataloader_key``), with the count flag.
- The rows and the counts are read from the same database: the queryset's
  if it names one (``using()``), else each parent's (as ``load_related``).
- No lock: everything here runs in the batch call or in a resolver.
"""
from __future__ import annotations

import weakref
from collections.abc import Hashable, Sequence
from typing import Any, Callable, Optional

from django.db import models
from graphql import FieldNode, FragmentSpreadNode, InlineFragmentNode

from .._core import DataLoader
from .._registry import DataLoaderRegistry
from ._connections import batch_connection
from ._orm import counts_in_window, keys_by_database, unlinked
from ._querysets import key_chunks
from ._relations import generic_filter, relation

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
    try:
        rel = relation(field)
    except TypeError:
        return None
    return rel.related_model if rel.many else None


_PARENT = "_dataloader_sync_parent"  # annotation: the parent key a counted row belongs to
_COUNT = "_dataloader_sync_count"


def count_related(instances: Sequence[Any], field: Any, queryset: Optional[models.QuerySet[Any]] = None) -> list[int]:
    """How many related rows (in *queryset*, default: all) each instance has, in one SQL query.

    The rows are counted where ``load_related`` reads them: the queryset's
    database if it names one, else each parent's (``GROUP BY`` the parent
    key, in chunks of the backend's parameter limit as ``load_related``).

    Args:
        instances: the parents (model instances).
        field: a to-many relation descriptor (``Author.books``, ``Book.tags``, ``Tag.books``).
        queryset: the related side's rows to count (its filters apply; its
            order and annotations do not matter).

    Returns:
        One count per instance, in order.

    Raises:
        TypeError: *field* is not a to-many relation descriptor.
    """
    rel = relation(field)
    if not rel.many:
        raise TypeError(f"field must be a to-many relation descriptor, got {rel.label}")
    parents = [getattr(instance, rel.parent_attname) for instance in instances]
    if rel.generic is not None:
        parents = [rel.key_field.to_python(key) if key is not None else None for key in parents]
    by_db = keys_by_database(rel, queryset, instances, parents)
    counts: dict[Any, int] = {}
    for db, keys in by_db.items():
        # a queryset joining the relation's own through table is counted by
        # primary key, apart from the parent link, as load_related selects it
        base = (rel.manager().all() if queryset is None else unlinked(rel, queryset)).using(db).order_by()
        if rel.generic is not None:
            base = base.filter(**generic_filter(rel, db))
        base = base.annotate(**{_PARENT: models.F(rel.path)})
        with batch_connection(db):
            for chunk in key_chunks(base, _PARENT, rel.key_field, list(dict.fromkeys(keys))):
                grouped = chunk.values(_PARENT).annotate(**{_COUNT: models.Count("pk", distinct=True)})
                counts.update((row[_PARENT], row[_COUNT]) for row in grouped)
    return [counts.get(key, 0) if key is not None else 0 for key in parents]


def load_page(instances: list[Any], load_related: Callable[..., Any], field: Any, queryset: Any = None,
              first: Optional[int] = None, count: bool = False, in_page: bool = False) -> list[Page]:
    """Batch function of the page families: ``load_related``'s lists as :class:`Page`\\ s, counted if asked.

    Args:
        instances: the parents.
        load_related: ``dataloader_sync.django.load_related``.
        field, queryset, first: as for ``load_related``.
        count: also count each parent's rows in *queryset* (one more query).
        in_page: count them in the rows' query where it can (see the module notes).

    Returns:
        One ``Page`` per parent, in order.
    """
    counted = getattr(load_related, "dataloader_counted", None) if in_page else None
    totals: Optional[list[int]] = None
    if count and first is not None and counted is not None and counts_in_window(field, queryset):
        rows, totals = counted(instances, field, queryset, first)  # the counts from the rows' statement
    else:
        rows = load_related(instances, field, queryset=queryset, first=first)
        if count:
            totals = count_related(instances, field, queryset)
    pages = []
    for i, items in enumerate(rows):
        page = Page(items)
        if totals is not None:
            page.total_count = totals[i]
        pages.append(page)
    return pages


def _page_key(load_related: Callable[..., Any], field: Any, queryset: Any = None, first: Optional[int] = None,
              count: bool = False, in_page: bool = False) -> Hashable:
    key_of = getattr(load_related, "dataloader_key", None)
    inner = key_of(field, queryset=queryset, first=first) if key_of is not None else (field, queryset, first)
    return (load_related, inner, count, in_page)


def _page_name(load_related: Callable[..., Any], field: Any, queryset: Any = None, first: Optional[int] = None,
               count: bool = False, in_page: bool = False) -> str:
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
        reuse_key: what *make_queryset*'s result depends on besides the
            registry, the relation and the base (the field and its
            arguments), or None.  Requests with equal keys in one registry
            (the same field with the same arguments under every parent of a
            level) share one queryset, built once: the family key of an
            equal queryset object is not compiled again for each parent.
        in_page: count in the rows' own query where it can (``load_page``).

    Attributes:
        served: True once a loader of this request's family was handed out.
    """

    def __init__(self, model: type[models.Model], make_queryset: Callable[[Optional[models.QuerySet[Any]]], Any],
                 first: Optional[int], count: bool, reuse_key: Optional[Hashable] = None,
                 in_page: bool = False) -> None:
        self.model = model
        self.make_queryset = make_queryset
        self.first = first
        self.count = count and first is not None
        self.reuse_key = reuse_key
        self.in_page = in_page
        self.served = False

    def loader_for(self, registry: DataLoaderRegistry, batch_fn: Callable[..., Any], field: Any,
                   queryset: Any) -> Optional[DataLoader[Any, Any]]:
        """The page family's loader for *field*, or None if *field* does not lead to the node model."""
        model = related_model(field)
        if model is None or model._meta.concrete_model is not self.model._meta.concrete_model:
            return None
        filtered = self._queryset(registry, field, queryset)
        self.served = True
        if self.count and self.in_page:
            return registry.loader_for(load_page, batch_fn, field, queryset=filtered, first=self.first,
                                       count=True, in_page=True)
        return registry.loader_for(load_page, batch_fn, field, queryset=filtered, first=self.first,
                                   count=self.count)


    def _queryset(self, registry: DataLoaderRegistry, field: Any, base: Any) -> Any:
        if self.reuse_key is None:
            return self.make_queryset(base)
        # The base takes part by identity (a QuerySet hashes by identity).
        key = (self.reuse_key, field, base)
        made = _QUERYSETS.get(registry)
        if made is None:
            made = _QUERYSETS.setdefault(registry, {})
        queryset = made.get(key)
        if queryset is None:  # two threads of one registry may both build it: either is right
            queryset = made[key] = self.make_queryset(base)
        return queryset


# Per registry (so per request), the querysets requests built, by reuse key;
# they go with the registry.  Dict reads and writes are atomic: no lock.
_QUERYSETS: weakref.WeakKeyDictionary[DataLoaderRegistry, dict[Hashable, Any]] = weakref.WeakKeyDictionary()


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

"""Connection fields whose resolver the user wrote: the relation queryset it returns, paged for the whole level.

graphene-django resolves a ``DjangoConnectionField`` (and
``DjangoFilterConnectionField``, and ours) through ``partial(cls.connection_resolver,
resolver, connection, default manager, queryset_resolver, max_limit,
enforce_first_or_last)`` (``DjangoConnectionField.wrap_resolve``):
``connection_resolver`` runs the user's resolver, passes what it returns
through ``queryset_resolver`` (the node type's ``get_queryset``; for the filter
field the filterset with the field's arguments, its ``order_by`` included; a
subclass's own ``resolve_queryset``), then ``resolve_connection`` counts the
queryset and slices the page: two statements per parent.

With auto relations on, such a field — of a class whose ``connection_resolver``
is graphene-django's or ours (``_graphene_fields._LoaderPages``) and whose
``resolve_connection`` is graphene-django's — runs that same
``connection_resolver`` with ``queryset_resolver`` wrapped.  The queryset that
comes out of it (filtered, ordered) is planned for the nodes' selection
(``_planned_querysets``, the hops of ``edges { node }``), and when it is a
relation of the parent (``_queryset_shapes.shape_of``) without a slice of its
own, it becomes a load of the ``load_returned_page`` family's loader for its
shape: one statement for the level, each parent's rows the page needs
(``_graphene_fields.rows_needed``: a window over the parent key, as
``Shape.load`` does for slices) and, when the connection selects a field other
than ``edges`` and ``pageInfo`` (``totalCount``), the count of all its rows in
the same statement.  graphene-django then slices each parent's page from its
``_pages.Page`` as it does for a connection over a loader's future, with the
same cursors and ``pageInfo``; ``connection.length`` is the count.  A
``distinct()`` queryset's rows are all read (a window would number the
duplicates ``DISTINCT`` drops), each parent's first kept and counted.

Anything else runs as written: a parent that is no model instance, a resolver
returning something that is not a queryset (or a manager), a queryset that is
no relation of the parent or that ``shape_of`` does not recognise, a slice of
its own, a limited page on a database without window functions (unless
``distinct()``), a field class with its own ``connection_resolver`` or
``resolve_connection``.

graphene-django internals read: the arguments of ``wrap_resolve``'s partial (their
order), ``DjangoConnectionField.connection_resolver`` and ``resolve_connection``
(compared by identity), ``graphene_django.utils.maybe_queryset``.

Guarantees:
- Only inside an execution with the switch (``_auto.user_resolver`` makes
  these resolvers for that execution alone).
- The user's resolver, ``get_queryset``, the filterset and graphene-django's
  checks (``enforce_first_or_last``, ``max_limit``) run as without the switch,
  once per parent, in the same order; only the statements change.
"""
from __future__ import annotations

import functools
import sys
from collections.abc import Hashable, Sequence
from typing import Any, Callable, Optional

from django.db.models import Model, QuerySet

from ..graphql._auto_relations import FieldLabels
from ._pages import Page, reads_length
from ._queryset_shapes import Shape, shape_of, windows
from ._returned_querysets import ParentKey, _python_name

__all__ = ["load_returned_page", "returned_connection"]


def load_returned_page(keys: Sequence[ParentKey], shape: Shape, first: Optional[int] = None, count: bool = False,
                       label: str = "") -> list[Page]:
    """Each parent's ``Page`` of *shape*: its first *first* rows (None: all), counted when *count*, in one
    statement (a ``distinct()`` shape's rows all read, the first kept).  *label* names the loader only."""
    values = list(dict.fromkeys(key.value for key in keys))
    known = [key.instance for key in keys if key.instance is not None]
    if shape.queryset.query.distinct:  # a window would number the duplicates DISTINCT drops: every row read
        found = shape.load(values, known)
        totals: Optional[dict[Any, int]] = {value: len(rows) for value, rows in found.items()} if count else None
        if first is not None:
            found = {value: rows[:first] for value, rows in found.items()}
    else:
        totals = {} if count else None
        found = shape.load(values, known, first, totals)
    pages = []
    for key in keys:
        page = Page(found.get(key.value, ()))
        if totals is not None:
            page.total_count = totals.get(key.value, 0)
        pages.append(page)
    return pages


def _page_key(shape: Shape, first: Optional[int] = None, count: bool = False, label: str = "") -> Hashable:
    return (shape.key, first, count)


def _page_name(shape: Shape, first: Optional[int] = None, count: bool = False, label: str = "") -> str:
    return label


load_returned_page.dataloader_key = _page_key  # type: ignore[attr-defined]
load_returned_page.dataloader_name = _page_name  # type: ignore[attr-defined]
load_returned_page.dataloader_name_is_label = True  # type: ignore[attr-defined]


def _stock_resolution(fn: Any) -> bool:
    """Whether *fn* is a connection field's resolve partial whose resolution is graphene-django's or ours."""
    if not isinstance(fn, functools.partial) or len(fn.args) != 6 or fn.keywords:
        return False
    func = fn.func
    owner = getattr(func, "__self__", None)
    if getattr(func, "__name__", None) != "connection_resolver" or not isinstance(owner, type):
        return False
    from graphene_django.fields import DjangoConnectionField as Stock

    from ._graphene_fields import _LoaderPages

    resolution = owner.connection_resolver.__func__  # type: ignore[attr-defined]
    stock: Any = Stock
    if resolution is not stock.connection_resolver.__func__ and not (
            issubclass(owner, _LoaderPages) and resolution is _LoaderPages.connection_resolver.__func__):  # type: ignore[attr-defined]
        return False
    return bool(owner.resolve_connection.__func__ is stock.resolve_connection.__func__)  # type: ignore[attr-defined]


def returned_connection(ctx: Any, fn: Any, plan: Callable[..., QuerySet[Any]]) -> Optional[Callable[..., Any]]:
    """The resolver standing for a connection field's resolve partial *fn* around a resolver the user
    wrote, or None when *fn* is none (see the module notes).  *plan* is ``_planned_querysets.planned``
    with the joins of a connection's nodes."""
    if "graphene_django" not in sys.modules or not _stock_resolution(fn):
        return None
    resolver, connection, manager, queryset_resolver, max_limit, enforce = fn.args
    labels = FieldLabels(_python_name(resolver))

    def resolve_returned_connection(root: Any, info: Any, **args: Any) -> Any:
        if not isinstance(root, Model):
            return fn(root, info, **args)
        label = labels.of(root.__class__, info)

        def paged(connection: Any, iterable: Any, info: Any, page_args: dict[str, Any]) -> Any:
            value = queryset_resolver(connection, iterable, info, page_args)
            return _page(ctx, root, info, value, page_args, max_limit, plan, label)

        return fn.func(resolver, connection, manager, paged, max_limit, enforce, root, info, **args)

    resolve_returned_connection.__wrapped__ = fn  # type: ignore[attr-defined]
    return resolve_returned_connection


def _page(ctx: Any, root: Model, info: Any, value: Any, args: dict[str, Any], max_limit: Optional[int],
          plan: Callable[..., QuerySet[Any]], label: str) -> Any:
    """A future of *root*'s ``Page`` of *value*, the queryset ``queryset_resolver`` gave, or *value*."""
    from graphene_django.utils import maybe_queryset

    from ._graphene_fields import rows_needed

    queryset = maybe_queryset(value)  # a manager's queryset, as resolve_connection takes it
    if not isinstance(queryset, QuerySet):
        return value
    shape = shape_of(plan(ctx, info, queryset), root)
    if shape is None or shape.low or shape.high is not None:
        return value
    first = rows_needed(args, max_limit)
    if first is not None and not shape.distinct and not windows(shape.db):
        return value
    count = first is not None and reads_length(info)
    loader = ctx.auto_loaders().loader_for(load_returned_page, shape, first, count, label=label)
    return loader.load(ParentKey(shape.value, None if shape.known is None else shape.known[1]))

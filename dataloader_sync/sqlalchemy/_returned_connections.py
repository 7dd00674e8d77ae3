"""graphene-sqlalchemy connection fields whose resolver the user wrote: the relation query it returns, for the level.

graphene-sqlalchemy resolves a ``SQLAlchemyConnectionField`` through
``partial(cls.connection_resolver, resolver, connection type, model)``
(``SQLAlchemyConnectionField.wrap_resolve``): ``connection_resolver`` runs the
user's resolver and gives what it returns to ``resolve_connection``, which
takes its length (``Query.count()``: a statement) and slices the page out of
it (``query[start:end]``: another): two statements per parent.  The field's
``sort`` and ``filter`` arguments are not applied to what a resolver returns
(only to the model's own query, when there is no resolver): the resolver
applies its filters and order itself.

With auto relations on, such a field — of a class whose
``connection_resolver`` and ``resolve_connection`` are graphene-sqlalchemy's
(compared by identity) — runs that same ``connection_resolver`` around the
user's resolver wrapped: a query it returns that is a relation of the parent
(``_query_shapes.shape_of``) with no ``LIMIT``/``OFFSET`` of its own becomes a
load of the ``load_connection_rows`` family's loader for its shape and the
rows the page needs: one statement for the level, each parent's rows in the
query's order (the primary key breaking ties).  With ``first`` (and no
``last`` nor ``before``) only the rows up to the page's end are read, a window
over the parent key (``row_number() OVER (PARTITION BY ...)``) with each
parent's count of all its rows read in the same statement (``count(*) OVER
(PARTITION BY ...)``), as Django's connection fields do (read from a subquery:
loader options then load when read, as for a limited query's rows,
``_query_shapes``); otherwise every row.
``connection_resolver`` sees a loader's future,
wraps it in a ``promise.Promise`` as it does any thenable and chains
``resolve_connection`` on it (the execution settles such Promises:
``dataloader_sync.graphql._promises``); ``resolve_connection`` then takes the
length of the parent's rows (``Rows``: the count of all of them) and slices
its page out of them: the same edges, cursors and ``pageInfo``.
``connection.iterable`` is those rows: their ``len()`` and ``count()`` (no
argument) are the number of all the parent's rows, as the query's
``count()`` was; iterating it gives the rows read (up to the page's end).

Anything else runs as written: a parent that is not a mapped instance, a
resolver returning anything but a ``Query`` the shape reader recognises (or a
thenable: graphene-sqlalchemy's own batching), a query with a ``LIMIT`` or
``OFFSET`` of its own, a field class with its own ``connection_resolver`` or
``resolve_connection``.

graphene-sqlalchemy internals read: the arguments of ``wrap_resolve``'s
partial (their order), ``SQLAlchemyConnectionField.connection_resolver`` and
``resolve_connection`` (compared by identity).  ``QueryShape._order`` (the
query's order, the primary key after it) is this package's.

Guarantees:
- Only inside an execution with the switch (the execution context wraps the
  user's resolvers of that execution; nothing else changes).
- The user's resolver runs once per parent, as without the switch; only the
  statements change.
"""
from __future__ import annotations

import functools
import sys
from collections.abc import Hashable, Sequence
from typing import Any, Callable, Optional

from sqlalchemy import func, inspect, select
from sqlalchemy.orm import InstanceState, Query, aliased

from ..graphql._auto_relations import FieldLabels, resolver_python_name
from ._query_shapes import QueryShape, shape_of
from ._related import run_rows
from ._sessions import check_thread

__all__ = ["Rows", "load_connection_rows", "returned_connection"]


class Rows(list):  # type: ignore[type-arg]
    """A parent's leading rows, as a connection's ``iterable``: ``len()`` and ``count()`` with no argument
    are ``total``, the number of all its rows (what ``Query.count()`` was for the query they stand for);
    iterating and indexing give the rows read."""

    total: int = 0

    def __len__(self) -> int:
        return self.total

    def count(self, *value: Any) -> int:
        return self.total if not value else list.count(self, *value)


_ROW = "dataloader_row"
_TOTAL = "dataloader_total"


def load_connection_rows(keys: Sequence[tuple[Any, ...]], shape: QueryShape, first: Optional[int] = None,
                         label: str = "") -> list[Rows]:
    """Each parent's first *first* rows of its query of *shape* (None: all) and the number of all of them,
    in one statement.  *label* names the loader."""
    name = label or _rows_name(shape)
    values = list(dict.fromkeys(keys))
    totals: dict[tuple[Any, ...], int] = {}
    if first is None:
        found = shape.load(values, name)
    else:
        check_thread(shape.session, name)
        found = {key: [] for key in values}
        width = len(shape.columns)
        for row in run_rows(shape.session, functools.partial(_page_statement, shape, first), shape.mapper,
                            shape.columns, values, unique=True):
            key = tuple(row[1:width + 1])
            assert key in found, (name, key)  # the keys are of the columns' Python type (shape_of)
            found[key].append(row[0])
            totals[key] = row[width + 1]
    pages = []
    for key in keys:
        page = Rows(found.get(key, ()))
        page.total = totals.get(key, list.__len__(page)) if first is not None else list.__len__(page)
        pages.append(page)
    return pages


def _page_statement(shape: QueryShape, first: int, clause: Any) -> Any:
    """``SELECT entity, key columns, total`` of each parent's first *first* rows for the keys of *clause*."""
    query = shape.query.filter(clause).order_by(None)
    columns = list(shape.columns)
    labels = [col.label(f"dataloader_key_{i}") for i, col in enumerate(columns)]
    row = func.row_number().over(partition_by=columns, order_by=shape._order())
    total = func.count().over(partition_by=columns)
    sub = query.add_columns(*labels, row.label(_ROW), total.label(_TOTAL)).subquery()
    entity = aliased(shape.mapper.class_, sub)
    return select(entity, *(sub.c[label.name] for label in labels), sub.c[_TOTAL]) \
        .where(sub.c[_ROW] <= first).order_by(sub.c[_ROW])


def rows_needed(args: dict[str, Any]) -> Optional[int]:
    """How many leading rows per parent graphene-sqlalchemy's page of *args* reads (the rows before it, after
    ``after``, and the page), or None for all (``last`` or ``before`` slice from the end; no ``first``)."""
    if args.get("last") is not None or args.get("before") is not None or args.get("first") is None:
        return None
    from graphql_relay import get_offset_with_default

    return int(get_offset_with_default(args.get("after"), -1) + 1 + args["first"])


def _rows_key(shape: QueryShape, first: Optional[int] = None, label: str = "") -> Hashable:
    return ("connection rows", shape.key, first)


def _rows_name(shape: QueryShape, first: Optional[int] = None, label: str = "") -> str:
    return label or f"load_connection_rows({shape.mapper.class_.__name__})"


load_connection_rows.__dict__.update(dataloader_key=_rows_key, dataloader_name=_rows_name,
                                     dataloader_name_is_label=True)


def _connection_partial(fn: Any) -> Optional[functools.partial[Any]]:
    """The graphene-sqlalchemy connection field's resolve partial *fn* is (or wraps, through
    ``__wrapped__``: another integration's wrapper), when its resolution is graphene-sqlalchemy's; else None."""
    while not isinstance(fn, functools.partial) and getattr(fn, "__wrapped__", None) is not None:
        fn = fn.__wrapped__
    if not isinstance(fn, functools.partial) or len(fn.args) != 3 or fn.keywords:
        return None
    func = fn.func
    owner = getattr(func, "__self__", None)
    if getattr(func, "__name__", None) != "connection_resolver" or not isinstance(owner, type):
        return None
    from graphene_sqlalchemy.fields import SQLAlchemyConnectionField as Stock

    stock: Any = Stock
    kind: Any = owner
    if not issubclass(kind, Stock) \
            or kind.connection_resolver.__func__ is not stock.connection_resolver.__func__ \
            or kind.resolve_connection.__func__ is not stock.resolve_connection.__func__:
        return None
    return fn


def returned_connection(ctx: Any, fn: Any) -> Optional[Callable[..., Any]]:
    """The resolver standing for a graphene-sqlalchemy connection field's resolve partial *fn* around a
    resolver the user wrote, or None when *fn* is none (see the module notes)."""
    if "graphene_sqlalchemy" not in sys.modules:
        return None
    partial = _connection_partial(fn)
    if partial is None:
        return None
    resolver, connection_type, model = partial.args
    labels = FieldLabels(resolver_python_name(resolver))

    def resolve_returned_connection(root: Any, info: Any, **args: Any) -> Any:
        if not isinstance(inspect(root, raiseerr=False), InstanceState):
            return fn(root, info, **args)

        def rows(root: Any, info: Any, **args: Any) -> Any:
            value = resolver(root, info, **args)
            if not isinstance(value, Query):
                return value
            shape = shape_of(value, root)
            if shape is None or shape.low or shape.high is not None:
                return value
            label = labels.of(type(root), info)
            loader = ctx.auto_loaders().loader_for(load_connection_rows, shape, rows_needed(args), label=label)
            return loader.load(shape.value)

        return partial.func(rows, connection_type, model, root, info, **args)

    resolve_returned_connection.__wrapped__ = fn  # type: ignore[attr-defined]
    return resolve_returned_connection

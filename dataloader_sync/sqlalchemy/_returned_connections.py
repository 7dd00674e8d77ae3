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
load of the ``load_connection_rows`` family's loader for its shape: one
statement for the level, every row of each parent, in the query's order (the
primary key breaking ties).  ``connection_resolver`` sees a loader's future,
wraps it in a ``promise.Promise`` as it does any thenable and chains
``resolve_connection`` on it (the execution settles such Promises:
``dataloader_sync.graphql._promises``); ``resolve_connection`` then takes the
length of the parent's rows and slices its page out of them: the same
edges, cursors and ``pageInfo``.  ``connection.iterable`` is those rows (a
list whose ``count()`` with no argument is its length, as the query's was).

Every row of each parent is read, not the page's alone: ``resolve_connection``
asks the length of the whole list before it slices, so a window of the page's
rows would need each parent's count from the same statement, which
``QueryShape`` does not make (a page of a few rows out of many reads them all:
still one statement for the level, against two per parent).

Anything else runs as written: a parent that is not a mapped instance, a
resolver returning anything but a ``Query`` the shape reader recognises (or a
thenable: graphene-sqlalchemy's own batching), a query with a ``LIMIT`` or
``OFFSET`` of its own, a field class with its own ``connection_resolver`` or
``resolve_connection``.

graphene-sqlalchemy internals read: the arguments of ``wrap_resolve``'s
partial (their order), ``SQLAlchemyConnectionField.connection_resolver`` and
``resolve_connection`` (compared by identity).

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

from sqlalchemy import inspect
from sqlalchemy.orm import InstanceState, Query

from ..graphql._auto_relations import FieldLabels, resolver_python_name
from ._query_shapes import QueryShape, shape_of

__all__ = ["Rows", "load_connection_rows", "returned_connection"]


class Rows(list):  # type: ignore[type-arg]
    """A parent's rows, as a connection's ``iterable``: ``count()`` with no argument is ``len()``, as
    ``Query.count()`` was for the query they stand for."""

    def count(self, *value: Any) -> int:
        return len(self) if not value else list.count(self, *value)


def load_connection_rows(keys: Sequence[tuple[Any, ...]], shape: QueryShape, label: str = "") -> list[Rows]:
    """Every row of each parent's query of *shape*, in one statement.  *label* names the loader."""
    found = shape.load(list(dict.fromkeys(keys)), label or _rows_name(shape))
    return [Rows(found.get(key, ())) for key in keys]


def _rows_key(shape: QueryShape, label: str = "") -> Hashable:
    return ("connection rows", shape.key)


def _rows_name(shape: QueryShape, label: str = "") -> str:
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
            loader = ctx.auto_loaders().loader_for(load_connection_rows, shape, label=labels.of(type(root), info))
            return loader.load(shape.value)

        return partial.func(rows, connection_type, model, root, info, **args)

    resolve_returned_connection.__wrapped__ = fn  # type: ignore[attr-defined]
    return resolve_returned_connection

"""Queries a resolver returns, loaded for the whole level: one statement per query shape.

With auto relations on, a field whose resolver the user wrote keeps it: the
resolver runs for every parent, as without the switch.  What it returns is
looked at: an unevaluated ``Query`` that is a relation of the parent (a
``lazy="dynamic"`` relationship's query, ``author.book_query.filter(...)``;
``session.query(Book).filter(with_parent(author, Author.books))``; see
``_query_shapes``) becomes a load of the ``load_returned_query`` family's
loader for its shape, keyed by the parent's key.  Parents whose resolvers
built the same query share one loader: one statement for the level; two
shapes are two loaders, two statements.  Anything else is returned as it is.

The value a parent gets is the list of the rows its own query would give, in
its order (the primary key breaking ties), its ``LIMIT``/``OFFSET`` applied
per parent: graphene and graphql-core iterate a list as they iterate the
query.  A 2.0-style ``Select`` is not executable by them (it is no iterable,
graphene-sqlalchemy's connection takes its ``len()``), so a resolver returning
one fails without the switch; it is returned as it is, and fails alike.

Each loader is named after the field: ``Author.published_books`` (the
parent's class, the resolver's name without ``resolve_``, else the field's).

Guarantees:
- Only inside an execution with the switch (the execution context wraps the
  user's resolvers of that execution; nothing else changes).
- A resolver result that is not a ``Query`` costs one ``isinstance`` check.
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, Callable

from sqlalchemy import inspect
from sqlalchemy.orm import InstanceState, Query

from ..graphql._auto_relations import FieldLabels, resolver_python_name
from ._query_shapes import QueryShape, shape_of

__all__ = ["load_returned_query", "returned_resolver"]


def load_returned_query(keys: Sequence[tuple[Any, ...]], shape: QueryShape, label: str = "") -> list[list[Any]]:
    """The rows of each parent's query of *shape*, in one statement.  *label* names the loader."""
    found = shape.load(list(dict.fromkeys(keys)), label or _returned_name(shape))
    return [list(found.get(key, ())) for key in keys]


def _returned_key(shape: QueryShape, label: str = "") -> Hashable:
    return ("returned query", shape.key)


def _returned_name(shape: QueryShape, label: str = "") -> str:
    return label or f"load_returned_query({shape.mapper.class_.__name__})"


load_returned_query.__dict__.update(dataloader_key=_returned_key, dataloader_name=_returned_name,
                                    dataloader_name_is_label=True)


def returned_resolver(ctx: Any, fn: Callable[..., Any]) -> Callable[..., Any]:
    """A resolver that calls the user's *fn* and loads what it returns through a level loader when
    that is a relation query of the parent (see the module notes)."""
    labels = FieldLabels(resolver_python_name(fn))

    def resolve_returned_query(root: Any, info: Any, **args: Any) -> Any:
        value = fn(root, info, **args)
        if not isinstance(value, Query) or not isinstance(inspect(root, raiseerr=False), InstanceState):
            return value
        shape = shape_of(value, root)
        if shape is None:
            return value
        return ctx.auto_loaders().loader_for(load_returned_query, shape, label=labels.of(type(root), info)).load(
            shape.value)

    resolve_returned_query.__wrapped__ = fn  # type: ignore[attr-defined]  # what it stands for (``_python_name``)
    return resolve_returned_query

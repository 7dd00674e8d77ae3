"""Querysets a resolver returns, loaded for the whole level: one statement per query shape.

With auto relations on, a field whose resolver the user wrote keeps it: the
resolver runs for every parent, as without the switch.  What it returns is
looked at: an unevaluated queryset that is a relation of the parent
(``self.books.filter(...)``, ``Book.objects.filter(author=self)``; see
``_queryset_shapes``) becomes a load of the ``load_returned`` family's
loader for its shape, keyed by the parent's key.  Parents whose resolvers
built the same query share one loader: one statement for the level; two
shapes (two filters) are two loaders, two statements.  Every unevaluated
queryset is first planned for the field's selection (``_planned_querysets``:
its to-one hops joined, ``FETCH_LEVEL``); a queryset that is no relation of
the parent (a root's) is returned planned, as the list of its rows when the
field is a list (the same statement, run by the resolver rather than by
graphql-core's list completion: the execution then holds the rows as one
level, for ``_inplace``), anything else as it is.

The value a parent gets is the list of the rows its own queryset would give,
in its order (the primary key breaking ties), its slice applied per parent
(graphene's list completion iterates either alike).  What graphene-django
applies to a returned queryset (``DjangoListField``: the type's
``get_queryset``) is applied before the shape is read, as without the switch.

Each loader is named after the field: ``Author.published_books`` (the
parent's model, the resolver's name without ``resolve_``, else the field's).

A related manager's queryset recognised here has its relation watched
(``_manager_querysets.watch``): the next parents' resolvers, in this
execution and the next ones with the switch, get the manager's own condition
copied from the query Django built, rather than built again.

Guarantees:
- Only inside an execution with the switch (the execution context wraps the
  user's resolvers of that execution; nothing else changes).
- A resolver result that is not a queryset costs one ``isinstance`` check.
"""
from __future__ import annotations

import functools
from collections.abc import Hashable, Sequence
from typing import Any, Callable, Optional

from django.db.models import Model, QuerySet
from graphql import is_list_type, is_non_null_type

from .._core import loop_getter
from ..graphql._auto_relations import FieldLabels, resolver_python_name
from ._inplace import _value_reader
from ._manager_querysets import watch
from ._queryset_shapes import Shape, shape_of
from ._querysets import queryset_label
from ._recorded_querysets import db_of, instance_of, is_recorded, materialise

_get_running_loop = loop_getter()  # asyncio's, through the wall (_core/_compat)

__all__ = ["ParentKey", "level_value", "listed", "load_returned", "returned_resolver"]


class ParentKey:
    """A parent's key in a ``load_returned`` loader: equal by *value* (the key its queryset compared
    with); *instance* is the parent a related manager knows (set on its rows), or None.  Immutable."""

    __slots__ = ("instance", "value")

    def __init__(self, value: Any, instance: Any) -> None:
        self.value = value
        self.instance = instance

    def __hash__(self) -> int:
        return hash(self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ParentKey) and self.value == other.value

    def __repr__(self) -> str:
        return f"ParentKey({self.value!r})"


def load_returned(keys: Sequence[ParentKey], shape: Shape, label: str = "") -> list[list[Any]]:
    """The rows of each parent's queryset of *shape*, in one statement.  *label* names the loader only."""
    values = list(dict.fromkeys(key.value for key in keys))
    known = [key.instance for key in keys if key.instance is not None]
    found = shape.load(values, known)
    return [list(found.get(key.value, ())) for key in keys]


def _returned_key(shape: Shape, label: str = "") -> Hashable:
    return shape.key


def _returned_name(shape: Shape, label: str = "") -> str:
    return label or f"load_returned({queryset_label(shape.queryset)})"


load_returned.dataloader_key = _returned_key  # type: ignore[attr-defined]
load_returned.dataloader_name = _returned_name  # type: ignore[attr-defined]
load_returned.dataloader_name_is_label = True  # type: ignore[attr-defined]


def _python_name(fn: Any) -> Optional[str]:
    """``resolver_python_name``, read through graphene-django's ``DjangoListField`` partial."""
    while getattr(fn, "__wrapped__", None) is not None:
        fn = fn.__wrapped__
    if isinstance(fn, functools.partial):  # DjangoListField: partial(list_resolver, type, resolver, manager)
        inner = fn.args[1] if len(fn.args) == 3 else fn.func
        return _python_name(inner)
    return resolver_python_name(fn)


def listed(info: Any, value: Any) -> Any:
    """*value*'s rows as a list when it is a queryset and the field a list (graphql-core iterates it
    alike: the same statement), so that the execution knows them as one level (``_inplace``: their
    relations evaluated in place are answered for the level); anything else, and any value on an
    event loop's thread (no query runs there), as it is."""
    if not isinstance(value, QuerySet) or _get_running_loop() is not None:
        return value
    return_type = info.return_type
    if is_non_null_type(return_type):
        return_type = return_type.of_type
    return list(value) if is_list_type(return_type) else value


def returned_resolver(ctx: Any, fn: Callable[..., Any],
                      plan: Callable[[Any, Any, QuerySet[Any]], QuerySet[Any]]) -> Callable[..., Any]:
    """A resolver that calls the user's *fn* and loads what it returns through a level loader when
    that is a relation queryset of the parent, any queryset planned for the field's selection first
    (``plan(ctx, info, queryset)``, see ``_planned_querysets``; see the module notes)."""
    labels = FieldLabels(_python_name(fn))

    def resolve_returned(root: Any, info: Any, **args: Any) -> Any:
        value = fn(root, info, **args)
        if not isinstance(value, QuerySet):
            return value
        return level_value(ctx, root, info, value, plan, labels)

    resolve_returned.__wrapped__ = fn  # type: ignore[attr-defined]  # what it stands for (``_python_name``)
    return resolve_returned


def level_value(ctx: Any, root: Any, info: Any, value: QuerySet[Any],
                plan: Callable[[Any, Any, QuerySet[Any]], QuerySet[Any]], labels: FieldLabels) -> Any:
    """*value*, a queryset a resolver returned for *root*, as the level loads it: planned, then a load of
    its shape's loader when it is a relation queryset of *root*, else the planned queryset (its rows,
    for a list field: ``listed``).

    *ctx* gives ``auto_loaders()`` (the registry) and ``auto_memo``; the loader is named by *labels*.

    A ``RecordedQuerySet`` of *root*'s related manager (``_recorded_querysets``) is not built for the next
    parents of the field: the first one's is, planned and shaped, and the next ones with the same chain
    load the loader its shape keyed, with their own key (the shape's value read off the instance as it
    was read off the first one, and checked equal then)."""
    learn: Any = None  # the memo key to learn this recorded chain under
    if is_recorded(value) and instance_of(value) is root and value.__dict__["_result_cache"] is None:
        nodes = info.field_nodes
        key = ("recorded", id(nodes[0]), len(nodes), value.__dict__["_dls_node"])
        memo = ctx.auto_memo
        learned = memo.get(key)
        if learned:
            shape, value_of = learned
            if db_of(value) == shape.db:
                loader = ctx.auto_loaders().loader_for(load_returned, shape, label=labels.of(root.__class__, info))
                return loader.load(ParentKey(value_of(root), root))
        materialise(value)
        if learned is None:
            memo[key] = False  # learned below when it is a relation of root's with root's key
            learn = key
    value = plan(ctx, info, value)
    shape = shape_of(value, root) if isinstance(root, Model) else None
    if shape is None:
        return listed(info, value)
    if shape.known is not None:  # a related manager's: its next parents' filter copied (_manager_querysets)
        watch(shape.known[0])
        if learn is not None and shape.known[1] is root:
            value_of = _value_reader(shape, root)
            if value_of is not None and value_of(root) == shape.value:
                ctx.auto_memo[learn] = (shape, value_of)
    loader = ctx.auto_loaders().loader_for(load_returned, shape, label=labels.of(root.__class__, info))
    return loader.load(ParentKey(shape.value, None if shape.known is None else shape.known[1]))

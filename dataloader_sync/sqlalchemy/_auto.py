"""Auto relations on SQLAlchemy mapped instances: which fields they take, and how each resolves.

``dataloader_sync.graphql.AutoRelationsExecutionContext`` asks this module,
as it asks ``dataloader_sync.django._auto``:

- ``classify(fn, default_attname)``: whether a resolve function is one
  graphene-sqlalchemy makes for a relationship — its attribute resolver
  (``get_attr_resolver``: ``lambda root, info: getattr(root, model_attr)``),
  its asyncio-only batch resolver (``batching=True``: an ``async def`` that
  this execution could not run), or a connection field
  (``SQLAlchemyConnectionField``, ``BatchSQLAlchemyConnectionField``) around
  a default resolver.  A ``resolve_<field>`` the user wrote is none of them.
- ``relation_of(mapped class, name)``: the ``AutoRelation`` of a
  relationship attribute (``Author.books``), or None.
- ``user_resolver(ctx, fn)``: the resolver standing for a resolver the user
  wrote: a relation query it returns (a ``lazy="dynamic"`` relationship's,
  ``with_parent``) is loaded for the level (``_returned_queries``).

A relationship resolves through the loader of the family
``load_auto_related`` (``load_related`` named ``Author.books``), in the
instance's own session, one statement per relationship per level; a value
already loaded on the instance (an eager load, an earlier access) is read
as it is, with no statement.  The many-to-one and one-to-one relationships
the field's selection reads through default resolvers (and theirs, to
``MAX_JOIN_DEPTH`` hops) are joined into that statement (``joinedload``), so
their fields cost nothing more.  A connection's list is the loaded list, sliced
by graphene-sqlalchemy as it slices a list.

Guarantees:
- graphene-sqlalchemy is never imported here unless it was imported already.
- No lock: the cache is filled without one (two threads may both compute an
  entry; either is right).
"""
from __future__ import annotations

import functools
import sys
from collections.abc import Sequence
from typing import Any, Callable, Optional

from sqlalchemy import inspect
from sqlalchemy.orm import Mapper, joinedload
from sqlalchemy.orm.attributes import instance_state

from ._loaders import _related_key, _related_name
from ._related import load_related
from ._relations import relation_of as sqlalchemy_relation

__all__ = ["AutoRelation", "classify", "load_auto_related", "relation_of", "user_resolver"]


#: How deep a chain of to-one hops is joined into one statement (``author.publisher`` is 2).
MAX_JOIN_DEPTH = 4


def load_auto_related(instances: Sequence[Any], attribute: Any, session: Any = None,
                      joined: tuple[str, ...] = ()) -> list[Any]:
    """``load_related`` as the batch function of the auto relations' families (loaders named
    ``Author.books``); *joined*: the to-one relationship paths from the related class
    (``author.publisher``) joined into the statement (``joinedload``)."""
    return load_related(instances, attribute, session, options=_joined_loads(attribute, joined))


def _joined_loads(attribute: Any, joined: tuple[str, ...]) -> list[Any]:
    """``joinedload`` chains for the longest of the *joined* paths (each one's prefixes come with it)."""
    longest = [path for path in joined if not any(other.startswith(path + ".") for other in joined)]
    options = []
    for path in longest:
        cls = attribute.property.mapper.class_
        option = None
        for name in path.split("."):
            relationship = getattr(cls, name)
            option = joinedload(relationship) if option is None else option.joinedload(relationship)
            cls = relationship.property.mapper.class_
        options.append(option)
    return options


def _auto_key(attribute: Any, session: Any = None, joined: tuple[str, ...] = ()) -> Any:
    return (_related_key(attribute, session), joined)


def _auto_name(attribute: Any, session: Any = None, joined: tuple[str, ...] = ()) -> str:
    name = _related_name(attribute, session)
    return f"{name}, joinedload=({', '.join(joined)})" if joined else name


load_auto_related.__dict__.update(dataloader_key=_auto_key, dataloader_name=_auto_name,
                                  dataloader_name_is_label=True)


def _hop(cls: Any, name: str) -> Any:
    """The related class of *cls*'s to-one relationship *name* (many-to-one, one-to-one), or None."""
    mapper: Any = inspect(cls, raiseerr=False)
    if not isinstance(mapper, Mapper):
        return None
    prop = mapper.relationships.get(name)
    if prop is None or prop.uselist:
        return None
    return prop.mapper.class_


class ConnectionSpec:
    """A connection field around a default resolver: graphene-sqlalchemy's own
    ``connection_resolver`` is called with the loader's future as the resolved list."""

    __slots__ = ("args",)

    def __init__(self, args: tuple[Any, ...]) -> None:
        self.args = args  # (connection type, model)


def _closure(fn: Any) -> dict[str, Any]:
    code = getattr(fn, "__code__", None)
    if code is None:
        return {}
    return dict(zip(code.co_freevars, (cell.cell_contents for cell in getattr(fn, "__closure__", None) or ())))


def _own_attname(fn: Any) -> Any:
    """The attribute a graphene-sqlalchemy relationship resolver reads, or False."""
    module, name = getattr(fn, "__module__", None), getattr(fn, "__name__", None)
    if module == "graphene_sqlalchemy.resolvers" and name == "<lambda>":
        attname = _closure(fn).get("model_attr")
        return attname if isinstance(attname, str) else False
    if module == "graphene_sqlalchemy.batching" and name == "resolve":
        prop = _closure(fn).get("relationship_prop")
        return getattr(prop, "key", False)
    return False


def classify(fn: Any, default_attname: Callable[[Any], Any]) -> Optional[tuple[Optional[str], Any]]:
    """``(attribute name, spec)`` for graphene-sqlalchemy's relationship resolvers, else None."""
    if "graphene_sqlalchemy" not in sys.modules:
        return None
    attname = _own_attname(fn)
    if attname is not False:
        return attname, None
    if isinstance(fn, functools.partial) and len(fn.args) == 3 and \
            getattr(fn.func, "__name__", None) == "connection_resolver":
        from graphene_sqlalchemy.fields import BatchSQLAlchemyConnectionField, SQLAlchemyConnectionField

        owner: Any = getattr(fn.func, "__self__", None)
        own: Any = getattr(getattr(owner, "connection_resolver", None), "__func__", None)
        stock = (SQLAlchemyConnectionField.connection_resolver.__func__,
                 BatchSQLAlchemyConnectionField.connection_resolver.__func__)
        if not isinstance(owner, type) or not issubclass(owner, SQLAlchemyConnectionField) or own not in stock:
            return None
        inner = fn.args[0]
        attname = _own_attname(inner)
        if attname is False:
            attname = default_attname(inner)
        if attname is False:
            return None
        return attname, ConnectionSpec(fn.args[1:])
    return None


_RELATIONS: dict[tuple[type, str], Optional[AutoRelation]] = {}  # filled without a lock (see the notes)


def relation_of(cls: type, name: str) -> Optional[AutoRelation]:
    """The ``AutoRelation`` of *cls*'s relationship *name*, or None (not mapped, not a relationship,
    or one ``load_related`` cannot batch: joined by more than column equalities)."""
    key = (cls, name)
    try:
        return _RELATIONS[key]
    except KeyError:
        pass
    found = None
    mapper: Any = inspect(cls, raiseerr=False) if isinstance(cls, type) else None
    if isinstance(mapper, Mapper) and name in mapper.relationships:
        attribute = getattr(cls, name)
        try:
            sqlalchemy_relation(attribute)
        except (TypeError, ValueError):
            attribute = None
        if attribute is not None:
            found = AutoRelation(attribute, name)
    _RELATIONS[key] = found
    return found


class AutoRelation:
    """One relationship of a mapped class, as auto relations resolve it.  Immutable; shared by threads."""

    __slots__ = ("attribute", "key")

    def __init__(self, attribute: Any, key: str) -> None:
        self.attribute = attribute
        self.key = key

    def value(self, ctx: Any, root: Any, info: Any, memo: dict[Any, Any], connection: bool = False) -> Any:
        """The loaded value on *root*, else the relationship loader's future (its loader found once per
        selection per execution, with the to-one hops the selection reads joined in)."""
        if self.key in instance_state(root).dict:  # loaded: eagerly, or by an earlier access
            return getattr(root, self.key)
        nodes = info.field_nodes
        key = (id(nodes[0]), len(nodes), connection)
        loader = memo.get(key)
        if loader is None:
            from ..graphql._auto_relations import join_paths

            target = self.attribute.property.mapper.class_
            joined = join_paths(ctx, info, target, _hop, ".", MAX_JOIN_DEPTH, connection)
            loader = memo[key] = (ctx.auto_loaders().loader_for(load_auto_related, self.attribute, joined=joined)
                                  if joined else ctx.auto_loaders().loader_for(load_auto_related, self.attribute))
        return loader.load(root)

    def resolve(self, ctx: Any, root: Any, info: Any, args: dict[str, Any], spec: Any,
                fallback: Callable[..., Any], memo: dict[Any, Any]) -> Any:
        """The field's value: the loaded value or a loader's future (a connection around it)."""
        if spec is None:
            return self.value(ctx, root, info, memo)
        from graphene_sqlalchemy.fields import SQLAlchemyConnectionField

        def resolved(root: Any, info: Any, **args: Any) -> Any:
            return self.value(ctx, root, info, memo, connection=True)

        return SQLAlchemyConnectionField.connection_resolver(resolved, *spec.args, root, info, **args)


def user_resolver(ctx: Any, fn: Callable[..., Any]) -> Callable[..., Any]:
    """The resolver standing for a resolver the user wrote: it runs as written, and a relation query
    it returns is loaded for the level (``_returned_queries``; inside a graphene-sqlalchemy connection
    field, every row of each parent for the level, the page sliced from them: ``_returned_connections``);
    anything else is returned as it is."""
    from ._returned_connections import returned_connection
    from ._returned_queries import returned_resolver

    paged = returned_connection(ctx, fn)
    if paged is not None:
        return paged
    return returned_resolver(ctx, fn)

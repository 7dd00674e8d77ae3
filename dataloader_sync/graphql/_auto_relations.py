"""AutoRelationsExecutionContext: relation fields batched with no resolver written.

A field whose resolver is the framework's default, on a parent that is an
ORM instance whose attribute of that name is a relation, resolves through
that relation's loader (``related_loader`` semantics): one statement per
relation per level.  Everything else runs as in ``DataLoaderExecutionContext``.

How a field is recognised (once per field per execution, never per value):

- its resolve function is one of the framework's defaults — graphql-core's
  ``default_field_resolver`` (Ariadne's fields without a resolver), Ariadne's
  ``resolve_to(name)`` (``convert_names_case``), graphene's
  ``partial(dict_or_attr_resolver, name, default)`` — or a shape an
  integration knows (``dataloader_sync.django._auto``: graphene-django's
  ``DjangoListField``, connection fields and to-one fields around a default
  resolver; ``dataloader_sync.sqlalchemy._auto``: graphene-sqlalchemy's
  relationship and connection fields); a field wrapped by
  ``no_auto_relations`` is left alone; a resolver the user wrote runs as
  written, through the integration's ``user_resolver`` when it has one
  (``dataloader_sync.django._returned_querysets``: a relation queryset it
  returns is loaded for the level; ``_returned_pages``: inside a
  graphene-django connection field, paged for the level;
  ``dataloader_sync.sqlalchemy._returned_queries``: a relation ``Query``
  likewise);
- its type is an object, interface or union (or a list of them): a scalar
  field is never looked at again;
- then, per parent class, the integration says whether the attribute is a
  relation (``relation_of``); a parent of another class (a dict, a plain
  object, a model without that relation) gets the field's own resolver.

The integrations are the seam (``Integration``, ``AutoRelation``): each
decides how its relation loads, with what is already on the instance and the
to-one hops the field's selection reads (``join_paths``) joined into the
batch.

Where resolvers are swapped: on graphql-core 3.2, in the plan of each
selection (``_plan``), so the fast field loop stays; elsewhere (middleware,
graphql-core 3.3) the execution's middleware manager is wrapped so that
graphql-core's ``execute_field`` gets the swapped resolver.  The schema and
its fields are never changed: the same schema executed with another class
behaves as before.

Guarantees:
- The request's registry is the context's (``info.context.loaders``,
  ``info.context["loaders"]``), left open; without one, the execution makes
  one on the first relation it batches and closes it when the operation
  returns.
- Per execution state only (instances are not shared between threads).
"""
from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
from collections.abc import Iterator
from typing import Any, Callable, Optional, Protocol

from graphql import (
    FieldNode,
    FragmentSpreadNode,
    GraphQLObjectType,
    InlineFragmentNode,
    default_field_resolver,
    get_named_type,
    is_composite_type,
)

from .._auto import opted_out
from .._registry import DataLoaderRegistry
from .._request_registry import close_quietly
from . import _compat
from ._django_debug import DjangoDebugExecutionContext
from ._execution import DataLoaderExecutionContext
from ._loop import LEAF_TYPES
from ._scope import registry_of

__all__ = ["AutoRelation", "AutoRelationsExecutionContext", "FieldLabels", "Integration", "auto_base", "classify",
           "join_paths", "resolver_python_name", "subfields"]

class AutoRelation(Protocol):
    """A relation of an ORM class, as an integration resolves it."""

    def resolve(self, ctx: Any, root: Any, info: Any, args: dict[str, Any], spec: Any,
                fallback: Callable[..., Any], memo: dict[Any, Any]) -> Any:
        """The field's value on *root*: a loader's future, or what *fallback* (the field's own
        resolver) gives.  *spec* is what ``classify`` said of the field (None: a plain default
        resolver); *memo* a store of the caller's for this relation and field in this execution."""


class Integration(Protocol):
    """What an integration module gives auto relations."""

    def classify(self, fn: Any, default_attname: Callable[[Any], Any]) -> Optional[tuple[Optional[str], Any]]:
        """``(attribute name, spec)`` when *fn* is one of its framework's fields around a default resolver."""

    def relation_of(self, cls: type, name: str) -> Optional[AutoRelation]:
        """The relation *name* of *cls*, or None."""

    # optional: ``user_resolver(ctx, fn)``, the resolver standing for a resolver *fn* the user wrote
    # (it runs *fn* and may batch what *fn* returns); an integration without it leaves *fn* alone.
    # Each integration's wraps the one before: a value it does not know it must return as it is.
    # optional: ``left_alone(ctx, fn)``, the resolver standing for a resolver *fn* wrapped by
    # ``no_auto_relations``: *fn* as it runs without the switch.
    # optional: ``execution(ctx)``, called as each execution starts; what it returns (a callable,
    # or None) is called when the operation returns (Django's: in-place answers, ``_inplace``).


#: Integrations that know ORM instances and framework resolvers: module names,
#: imported when the library of the first name is (their ``classify`` and
#: ``relation_of``; see ``dataloader_sync.django._auto``).
_INTEGRATIONS = (("django.db.models", "dataloader_sync.django._auto"),
                 ("sqlalchemy.orm", "dataloader_sync.sqlalchemy._auto"))


def _integrations() -> list[Integration]:
    found: list[Any] = []
    for library, module in _INTEGRATIONS:
        if library in sys.modules:
            found.append(importlib.import_module(module))
    return found


def default_attname(fn: Any) -> Any:
    """The attribute a framework's default resolver *fn* reads: a name, None (graphql-core's:
    the field's name), or False when *fn* is not a default resolver."""
    if fn is default_field_resolver:
        return None
    if getattr(fn, "_ariadne_alias_resolver", False) is True and getattr(fn, "__module__", None) == "ariadne.resolvers":
        attname = _cells(fn).get("attr_name")  # Ariadne's resolve_to(name): its default for converted names
        return attname if isinstance(attname, str) else False
    if isinstance(fn, functools.partial) and len(fn.args) == 2 and not fn.keywords:
        graphene = sys.modules.get("graphene.types.resolver")
        if graphene is not None and fn.func in (graphene.dict_or_attr_resolver, graphene.attr_resolver,
                                                graphene.get_default_resolver()):
            return fn.args[0] if isinstance(fn.args[0], str) else False
    return False


def _cells(fn: Any) -> dict[str, Any]:
    code = getattr(fn, "__code__", None)
    if code is None:
        return {}
    return dict(zip(code.co_freevars, (cell.cell_contents for cell in getattr(fn, "__closure__", None) or ())))


def classify(fn: Any) -> Optional[tuple[Optional[str], Any]]:
    """``(attribute name or None, spec)`` when *fn* resolves a field the framework's default way, else None.

    The spec is None for a plain default resolver, or an integration's
    description of the framework field around one (graphene-django's list,
    connection and to-one fields).
    """
    if opted_out(fn):
        return None
    for integration in _integrations():
        found = integration.classify(fn, default_attname)
        if found is not None:
            return found
    attname = default_attname(fn)
    if attname is False:
        return None
    return attname, None


# -- the names of a user's resolver's loaders -------------------------------------------------------

def resolver_python_name(fn: Any) -> Optional[str]:
    """The field name a graphene resolver's function says (``resolve_published_books`` gives
    ``published_books``), or None.  A wrapper that names what it wraps (``__wrapped__``: another
    integration's ``user_resolver``, a decorator) is read through."""
    while getattr(fn, "__wrapped__", None) is not None:
        fn = fn.__wrapped__
    name = getattr(fn, "__name__", None)
    if isinstance(name, str) and name.startswith("resolve_") and len(name) > 8:
        return name[8:]
    return None


class FieldLabels:
    """The names of the loaders a user's resolver batches through, one per parent class:
    ``Author.published_books`` (the parent's class, then *python_name*, else the GraphQL field's
    name).  Per execution and field; not shared between threads."""

    __slots__ = ("by_class", "python_name")

    def __init__(self, python_name: Optional[str]) -> None:
        self.python_name = python_name
        self.by_class: dict[type, str] = {}

    def of(self, cls: type, info: Any) -> str:
        label = self.by_class.get(cls)
        if label is None:
            label = self.by_class[cls] = f"{cls.__name__}.{self.python_name or info.field_name}"
        return label


# -- to-one hops the selection reads ------------------------------------------------------------

def join_paths(ctx: Any, info: Any, model: Any, hop: Callable[[Any, str], Any], separator: str, depth: int,
               connection: bool = False, attname: Optional[Callable[[Any, Any, str], Any]] = None) -> tuple[str, ...]:
    """The paths, from *model*, of the to-one relations the field being resolved selects through
    default resolvers, and theirs, *depth* hops deep: what an ORM can join into the batch that loads
    the field's rows.  Computed once per selection per execution.

    Args:
        ctx: the execution (its ``auto_memo`` and ``field_resolver``).
        info: the resolve info of the field whose rows are loaded.
        model: the class of those rows.
        hop: ``hop(model, attribute name)``: the related class of a to-one relation the ORM can
            join, else None.
        separator: between the names of a path (``author__publisher``, ``author.publisher``).
        depth: the longest path, in hops.
        connection: read the selection of the field's ``edges { node }`` (a connection).
        attname: ``attname(ctx, field definition, field name)``: the attribute a field reads when it
            is resolved the framework's default way, else None; default: the field's resolver as
            ``classify`` sees it (strawberry-django gives its own).

    Returns:
        The paths, each after its prefixes.  Abstract types (interfaces, unions) are not looked into.
    """
    nodes = info.field_nodes
    key = ("joins", model, hop, connection, *map(id, nodes))
    memo = ctx.auto_memo
    found: Optional[tuple[str, ...]] = memo.get(key)
    if found is None:
        gql_type = get_named_type(info.return_type)
        if connection:
            gql_type, nodes = _connection_nodes(gql_type, nodes, info.fragments)
        found = memo[key] = tuple(_paths(ctx, gql_type, nodes, info.fragments, model, hop, separator, "", depth,
                                         attname or _default_attname))
    return found


def _default_attname(ctx: Any, field_def: Any, name: str) -> Optional[str]:
    kind = classify(field_def.resolve or ctx.field_resolver)
    if kind is None or kind[1] is not None:
        return None
    return kind[0] or name


def subfields(gql_type: Any, nodes: Any, fragments: Any) -> dict[str, list[Any]]:
    """``{field name: its field nodes}`` of *nodes*' selections on the object type *gql_type*."""
    found: dict[str, list[Any]] = {}
    stack = [node.selection_set for node in nodes]
    while stack:
        selection_set = stack.pop()
        if selection_set is None:
            continue
        for selection in selection_set.selections:
            if isinstance(selection, FieldNode):
                found.setdefault(selection.name.value, []).append(selection)
            elif isinstance(selection, InlineFragmentNode):
                condition = selection.type_condition
                if condition is None or condition.name.value == gql_type.name:
                    stack.append(selection.selection_set)
            elif isinstance(selection, FragmentSpreadNode):
                fragment = fragments.get(selection.name.value)
                if fragment is not None and fragment.type_condition.name.value == gql_type.name:
                    stack.append(fragment.selection_set)
    return found


def _connection_nodes(gql_type: Any, nodes: Any, fragments: Any) -> tuple[Any, list[Any]]:
    """The node type of a connection type and the field nodes of its ``edges { node }``."""
    if not isinstance(gql_type, GraphQLObjectType) or "edges" not in gql_type.fields:
        return None, []
    edge_type = get_named_type(gql_type.fields["edges"].type)
    edges = subfields(gql_type, nodes, fragments).get("edges", [])
    if not isinstance(edge_type, GraphQLObjectType) or "node" not in edge_type.fields:
        return None, []
    return get_named_type(edge_type.fields["node"].type), subfields(edge_type, edges, fragments).get("node", [])


def _paths(ctx: Any, gql_type: Any, nodes: list[Any], fragments: Any, model: Any, hop: Callable[[Any, str], Any],
           separator: str, prefix: str, depth: int, attname_of: Callable[[Any, Any, str], Any]) -> Iterator[str]:
    if not isinstance(gql_type, GraphQLObjectType) or not nodes or depth < 1:
        return
    for name, sub_nodes in subfields(gql_type, nodes, fragments).items():
        field_def = gql_type.fields.get(name)
        if field_def is None:
            continue
        attname = attname_of(ctx, field_def, name)
        if attname is None:
            continue
        related = hop(model, attname)
        if related is None:
            continue
        path = prefix + attname
        yield path
        yield from _paths(ctx, get_named_type(field_def.type), sub_nodes, fragments, related, hop, separator,
                          path + separator, depth - 1, attname_of)


class _Relations:
    """``relation_of(class, name)`` across the integrations, cached per execution."""

    __slots__ = ("found", "integrations")

    def __init__(self) -> None:
        self.found: dict[tuple[type, str], Optional[AutoRelation]] = {}
        self.integrations = _integrations()

    def get(self, cls: type, name: str) -> Optional[AutoRelation]:
        key = (cls, name)
        try:
            return self.found[key]
        except KeyError:
            pass
        rel = None
        for integration in self.integrations:
            rel = integration.relation_of(cls, name)
            if rel is not None:
                break
        self.found[key] = rel
        return rel


class _AutoMiddleware:
    """graphql-core's middleware manager, giving ``execute_field`` the auto resolver of each field."""

    def __init__(self, inner: Any, auto: Callable[[Any, Optional[str]], Any]) -> None:
        self.inner = inner
        self.auto = auto
        self.made: dict[int, tuple[Any, Any]] = {}

    def get_field_resolver(self, field_resolver: Any) -> Any:
        made = self.made.get(id(field_resolver))
        if made is None or made[0] is not field_resolver:
            made = self.made[id(field_resolver)] = (field_resolver, self.auto(field_resolver, None))
        resolver = made[1]
        return resolver if self.inner is None else self.inner.get_field_resolver(resolver)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def auto_base() -> type:
    """The class auto relations extend: ``DjangoDebugExecutionContext`` where graphene-django is
    installed (its ``_debug`` field listed last, see ``_django_debug``), else
    ``DataLoaderExecutionContext``."""
    if importlib.util.find_spec("graphene_django") is not None:
        return DjangoDebugExecutionContext
    return DataLoaderExecutionContext


class AutoRelationsExecutionContext(auto_base()):  # type: ignore[misc]
    """``DataLoaderExecutionContext`` that batches default-resolved relation fields by itself.

    Pass it as ``execution_context_class=`` (graphene, graphene-django,
    Ariadne, graphql-core 3.2) or ``executor_class=`` (graphql-core 3.3).  A
    field resolved by the framework's default resolver on a Django model
    instance, whose name is a relation of the model, resolves through that
    relation's loader (named ``Author.books``), with the target type's
    ``get_queryset`` applied in the batch; data already on the instance
    (``select_related``, ``prefetch_related``) is used as it is.  A resolver
    the user wrote runs as written, and a relation queryset it returns
    (``self.books.filter(...)``) is loaded for the whole level, one statement
    per query shape; a field wrapped in ``dataloader_sync.no_auto_relations``
    is left alone.  See the module notes.

    One instance runs one operation, on the calling thread; not shared between threads.
    """

    _auto_registry: Optional[DataLoaderRegistry] = None
    _auto_own: Optional[DataLoaderRegistry] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._auto_registry = registry_of(self.context_value)
        self._auto_made: dict[tuple[int, Optional[str], bool], tuple[Any, Any]] = {}
        self._auto_relations = _Relations()
        self.auto_memo: dict[Any, Any] = {}  # per execution: what the integrations computed once
        if self._plans is None:  # graphql-core's execute_field runs the fields: hook its resolver lookup
            inner: Any = getattr(self, "middleware_manager", None)
            self.middleware_manager = _AutoMiddleware(inner or None, self._auto)

    def auto_loaders(self) -> DataLoaderRegistry:
        """The registry the auto loaders live in: the context's, or one of this execution's."""
        registry = self._auto_registry
        if registry is None:
            registry = self._auto_registry = self._auto_own = DataLoaderRegistry()
        return registry

    # -- resolvers ------------------------------------------------------------------
    def _auto(self, fn: Any, field_name: Optional[str], takes_args: bool = True) -> Any:
        """*fn*, or the auto resolver standing for it (made once per execution)."""
        key = (id(fn), field_name, takes_args)
        made = self._auto_made.get(key)
        if made is not None and made[0] is fn:
            return made[1]
        kind = classify(fn)
        if kind is None:
            resolver = self._left_alone(fn) if opted_out(fn) else self._user_resolver(fn)
        else:
            resolver = _auto_resolver(self, fn, kind[0] or field_name, kind[1], takes_args)
        self._auto_made[key] = (fn, resolver)
        return resolver

    def _user_resolver(self, fn: Any) -> Any:
        """*fn*, a resolver the user wrote, as the integrations run it: each integration's
        ``user_resolver`` wraps what the one before made (Django's, then SQLAlchemy's), so a
        resolver returning either ORM's query is looked at by the integration that knows it."""
        resolver = fn
        for integration in self._auto_relations.integrations:
            wrap = getattr(integration, "user_resolver", None)
            if wrap is not None:
                resolver = wrap(self, resolver)
        return resolver

    def _left_alone(self, fn: Any) -> Any:
        """*fn*, a resolver wrapped by ``no_auto_relations``, as the integrations leave it alone
        (Django's: no in-place answers while it runs nor for the queryset it returns)."""
        resolver = fn
        for integration in self._auto_relations.integrations:
            wrap = getattr(integration, "left_alone", None)
            if wrap is not None:
                resolver = wrap(self, resolver)
        return resolver

    if _compat.OWN_FIELDS:

        def _plan(self, parent_type: Any, fields: Any) -> Optional[list[Any]]:
            """``DataLoaderExecutionContext._plan``, with each default-resolved composite field's
            resolver swapped for its auto resolver."""
            plans = self._plans
            if plans is None:
                return None
            known = plans.get(id(fields))
            if known is not None and known[0] is fields and known[1] is parent_type:
                plan: list[Any] = known[2]
                return plan
            plan = _compat.plan_fields(self, parent_type, fields, LEAF_TYPES)
            for i, entry in enumerate(plan):  # once per selection, not per field: its slots by name
                if is_composite_type(get_named_type(entry[_compat.PLAN_RETURN_TYPE])):
                    given = entry[_compat.PLAN_RESOLVE]
                    resolver = self._auto(given, entry[_compat.PLAN_FIELD_NAME],
                                          bool(entry[_compat.PLAN_FIELD_DEF].args))
                    if resolver is not given:
                        plan[i] = (*entry[:_compat.PLAN_RESOLVE], resolver, *entry[_compat.PLAN_RESOLVE + 1:])
            plans[id(fields)] = (fields, parent_type, plan)  # keeps *fields* alive: its id stays its own
            return plan

    # -- the end of the operation ------------------------------------------------------
    def _close_own(self) -> None:
        own, self._auto_own = self._auto_own, None
        if own is not None:
            self._auto_registry = None
            close_quietly(own)

    def _start_integrations(self) -> list[Callable[[], None]]:
        """Each integration's ``execution(ctx)`` for this execution: what ends each, in order."""
        ends = []
        for integration in self._auto_relations.integrations:
            start = getattr(integration, "execution", None)
            end = start(self) if start is not None else None
            if end is not None:
                ends.append(end)
        return ends

    def _end(self, ends: list[Callable[[], None]]) -> None:
        try:
            for end in reversed(ends):
                end()
        finally:
            self._close_own()

    if _compat.IS_EXECUTOR:

        def execute_root_grouped_field_set(self, *args: Any) -> Any:
            ends = self._start_integrations()
            try:
                return super().execute_root_grouped_field_set(*args)
            finally:
                self._end(ends)

    else:

        def execute_operation(self, *args: Any) -> Any:
            ends = self._start_integrations()
            try:
                return super().execute_operation(*args)
            finally:
                self._end(ends)


_NO_ARGS: dict[str, Any] = {}  # the arguments of a field that defines none (never written to)


def _auto_resolver(ctx: AutoRelationsExecutionContext, fn: Any, attname: Optional[str], spec: Any,
                   takes_args: bool = True) -> Any:
    """The resolver of a default-resolved field: its relation's loader where the parent has one, else *fn*.

    Per parent class, the relation and a dict of its own (``memo``: what the relation keeps per
    selection, such as its loader) are looked up once per execution.  Without *takes_args* (a
    field that defines no argument) the resolver takes none: no keyword dict per call.
    """
    relations = ctx._auto_relations
    if attname is None:  # graphql-core's default resolver through middleware: the field's name, per call
        memos: dict[Any, dict[Any, Any]] = {}  # per relation

        def resolve_by_field_name(root: Any, info: Any, **args: Any) -> Any:
            rel = relations.get(root.__class__, info.field_name)
            if rel is None:
                return fn(root, info, **args)
            memo = memos.get(rel)
            if memo is None:
                memo = memos[rel] = {}
            return rel.resolve(ctx, root, info, args, spec, fn, memo)

        return resolve_by_field_name
    by_class: dict[type, Any] = {}  # the parents' classes this field met: (their relation or None, its memo)

    def relation(cls: type) -> Any:
        found: tuple[Any, dict[Any, Any]] = (relations.get(cls, attname), {})
        by_class[cls] = found
        return found

    if takes_args:

        def resolve_auto_relation(root: Any, info: Any, **args: Any) -> Any:
            cls = root.__class__
            rel, memo = by_class.get(cls) or relation(cls)
            if rel is None:
                return fn(root, info, **args)
            return rel.resolve(ctx, root, info, args, spec, fn, memo)

        return resolve_auto_relation

    def resolve_auto_relation_without_args(root: Any, info: Any) -> Any:
        cls = root.__class__
        rel, memo = by_class.get(cls) or relation(cls)
        if rel is None:
            return fn(root, info)
        return rel.resolve(ctx, root, info, _NO_ARGS, spec, fn, memo)

    return resolve_auto_relation_without_args

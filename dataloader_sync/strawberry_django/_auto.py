"""AutoRelationsExtension: strawberry-django relation fields batched with no resolver written.

A strawberry-django field with no resolver of its own (``books:
list[BookType]`` on a ``strawberry_django.type``), on a parent that is a
Django model instance whose attribute of that name is a relation, resolves
through that relation's loader (``Author.books``, as
``dataloader_sync.django``'s auto relations): one statement per relation per
level.  The field's queryset rules apply inside the batch — the target
type's ``get_queryset``, permissions, filters and ordering, and
``DjangoOptimizerExtension``'s ``only()``/prefetches for the rows' own
fields — through the field's own ``get_queryset``, called once per field
and arguments per execution.

A connection field on a relation pages in the batch as
``dataloader_sync.strawberry_django.connection`` does: its filters, order,
page and ``totalCount`` applied inside the batch.

A field with a resolver of its own (``@strawberry_django.field`` or
``@strawberry.field`` methods; a property a field reads) runs it as
written; a relation queryset it returns (``self.books.filter(...)``,
sliced or not) is loaded for the whole level, one statement per query
shape, with the optimizer or without (``_returned``).  Any queryset a field
returns (a root's too) is planned for the selection that reads it: the
to-one hops joined (``select_related``), ``FETCH_LEVEL``, and the field
hints of its child fields (``prefetch_related``, ``select_related``,
``annotate``; ``_hints``) unless the optimizer optimized it already; a
relation batch's queryset gets those hints too.

What is left to strawberry-django: a field wrapped in
``dataloader_sync.no_auto_relations``, paginated fields, a connection field
with a resolver, a connection extension of its own or a connection type that pages only
querysets (``DjangoCursorConnection``), and a relation already on the instance (prefetched by the optimizer,
``select_related``): read with no statement, as without the extension.

The to-one relations the child selection reads (strawberry-django fields
with no resolver, whose types have no ``get_queryset`` of their own) are
joined into the batch's statement (``select_related``; ``_fields``).

Guarantees:
- The registry is the context's (``info.context.loaders``,
  ``info.context["loaders"]``); with none, the extension makes one per
  execution and closes it when the execution ends.
- Which fields qualify is decided once per schema field (cached on the
  extension class, without a lock: two threads may both decide, alike).
- The extension alone is the switch: a schema built with no
  ``execution_context_class`` executes synchronously with
  ``dataloader_sync.graphql.DataLoaderExecutionContext`` and asynchronously
  with strawberry's own class (``_execution``); one built with a subclass of
  ``DataLoaderExecutionContext`` keeps it; with another class a synchronous
  execution fails at once, naming the fix.
- Meta fields (``__typename``) are strawberry's, as without the extension.
- Relations evaluated in place (``self.books.count()`` in a resolver, a
  ``@property`` or a ``model_property`` a field reads) are answered for the
  level in a synchronous execution that is not a mutation's
  (``dataloader_sync.django._inplace``, started by ``on_execute``); a root
  field's queryset is listed (outside an event loop) so its rows are a level;
  a relation field left to strawberry-django runs without them.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Callable, Optional

from django.db.models import Model, QuerySet
from graphql import get_named_type, is_composite_type
from strawberry.extensions import SchemaExtension

from .._auto import MARK
from .._core import loop_getter
from .._registry import DataLoaderRegistry
from .._request_registry import close_quietly
from ..django import _inplace
from ..django._auto import AutoRelation, auto_related_loader, relation_of, with_level_mode
from ..django._planned_querysets import planned
from ..django._returned_querysets import listed
from ..graphql._auto_relations import FieldLabels
from ._execution import run_with_ours
from ._fields import DEFINITION, default_resolution, joins, pages_of, relation_field
from ._hints import with_hints
from ._returned import returned, root_value

_get_running_loop = loop_getter()  # asyncio's, through the wall (_core/_compat)

__all__ = ["AutoRelationsExtension"]

def _is_mutation(execution_context: Any) -> bool:
    try:
        return str(getattr(execution_context.operation_type, "value", "")) == "mutation"
    except Exception:  # no document (strawberry raises): nothing to step aside for
        return False


def _left_to_strawberry(graphql_field: Any) -> bool:
    """Whether *graphql_field* is a relation field strawberry-django resolves by itself although auto
    relations know relation fields (``no_auto_relations``, paginated, a cursor connection): its
    querysets run as strawberry-django makes them, with no in-place answers."""
    from strawberry_django.fields.field import StrawberryDjangoField

    field = (graphql_field.extensions or {}).get(DEFINITION)
    return isinstance(field, StrawberryDjangoField) and default_resolution(field) and bool(field.is_relation) \
        and relation_field(graphql_field) is None


def _own_resolver(graphql_field: Any) -> bool:
    """Whether *graphql_field* is a list field with a resolver of the user's (not strawberry's nor
    strawberry-django's: ``node()``, connections): what it returns is not evaluated before the extension
    sees it, so the optimizer can be applied to it afterwards (a single object's queryset is evaluated
    by strawberry-django, ``first()``, inside the field: it keeps the optimizer on)."""
    field = (graphql_field.extensions or {}).get(DEFINITION)
    resolver = getattr(field, "base_resolver", None)
    if resolver is None or default_resolution(field) or not getattr(field, "is_list", False):
        return False
    module = getattr(getattr(resolver, "wrapped_func", None), "__module__", None) or ""
    return not module.startswith(("strawberry.", "strawberry_django."))


def _returns(graphql_field: Any) -> Optional[FieldLabels]:
    """The names of its loaders when *graphql_field* (not a relation field auto relations take) may give
    a queryset the level loads: a composite field, not opted out, neither a connection nor paginated."""
    field = (graphql_field.extensions or {}).get(DEFINITION)
    if field is None or getattr(field, MARK, False) or not is_composite_type(get_named_type(graphql_field.type)):
        return None
    if getattr(field, "is_connection", False) or getattr(field, "is_paginated", False):
        return None
    if getattr(field, "disable_fetch_list_results", None) is False and field.is_list:
        # strawberry-django < 0.92 evaluates a list field's queryset itself, per parent, before the switch
        # sees it: the field is left as it is (the optimizer on, if it is, as without the switch)
        return None
    return FieldLabels(getattr(field, "python_name", None))


def _plan(ctx: Any, info: Any, queryset: Any) -> Any:
    """A queryset a resolver returned, planned for its field's selection: the child fields' hints
    (``_hints``), then the to-one hops joined and ``FETCH_LEVEL`` (``_planned_querysets``)."""
    return planned(ctx, info, with_hints(ctx, info, queryset), joins=joins, level=with_level_mode)


class AutoRelationsExtension(SchemaExtension):
    """strawberry-django's relation fields, batched through their relation's loader (see the module notes).

    ``strawberry.Schema(query=Query, extensions=[AutoRelationsExtension])``,
    with or without ``DjangoOptimizerExtension``; ``execute_sync``, strawberry's
    sync and async views and ``await schema.execute`` alike.  strawberry makes
    one instance per execution; not shared between threads.
    """

    #: id(graphql-core field) -> (that field, its strawberry-django relation field or None, the names of the
    #: loaders of the querysets it returns or None, left to strawberry-django, has a resolver of the user's)
    _fields: dict[int, tuple[Any, Any, Optional[FieldLabels], bool, bool]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._own: Optional[DataLoaderRegistry] = None
        self._querysets: dict[Any, Any] = {}
        self._pages: dict[int, Any] = {}  # id(connection field) -> its page extension
        self.auto_memo: dict[Any, Any] = {}  # per execution: the joins of each selection (join_paths)

    def on_execute(self) -> Iterator[None]:
        """The execution, with a class that waits for loader futures (``_execution``); then the registry
        the extension made for it, if any, is closed."""
        run_with_ours(self.execution_context.schema)
        end = _inplace.start(self, _is_mutation(self.execution_context)) if _get_running_loop() is None else None
        try:
            yield None
        finally:
            if end is not None:
                end()
            own, self._own = self._own, None
            self._querysets.clear()
            self.auto_memo.clear()
            if own is not None:
                close_quietly(own)

    def _registry(self, context: Any) -> DataLoaderRegistry:
        from ..graphql._scope import registry_of

        registry = registry_of(context)
        if registry is None:
            registry = self._own
            if registry is None:
                registry = self._own = DataLoaderRegistry()
        return registry

    def auto_loaders(self) -> DataLoaderRegistry:
        """The registry of this execution's loaders (the context's, else one of the extension's)."""
        return self._registry(self.execution_context.context)

    def resolve(self, _next: Callable[..., Any], root: Any, info: Any, *args: Any, **kwargs: Any) -> Any:
        """The field's value: its relation's loader future, a load of the level for a relation queryset a
        resolver returns, or what strawberry-django gives."""
        graphql_field = info.parent_type.fields.get(info.field_name)
        if graphql_field is None:  # a meta field (__typename): not the type's, resolved as without us
            return _next(root, info, *args, **kwargs)
        known = self._fields.get(id(graphql_field))
        if known is None or known[0] is not graphql_field:
            relation = relation_field(graphql_field)
            known = self._fields[id(graphql_field)] = (
                graphql_field, relation, None if relation is not None else _returns(graphql_field),
                _left_to_strawberry(graphql_field), _own_resolver(graphql_field))
        if not isinstance(root, Model):  # a root's (or a plain object's) queryset: planned for its selection
            if known[2] is None:
                return listed(info, _next(root, info, *args, **kwargs))
            if known[4]:  # the user's resolver: run with the optimizer off, its queryset optimized once
                return listed(info, root_value(self, _next, root, info, args, kwargs, _plan))
            value = _next(root, info, *args, **kwargs)  # strawberry-django's own get_queryset, optimizer and all
            if isinstance(value, QuerySet) and value._result_cache is None:
                value = _plan(self, info, value)
            return listed(info, value)
        field = known[1]
        if field is None:
            if known[3]:
                return _inplace.run_alone(self, _next, root, info, *args, **kwargs)
            if known[2] is not None:
                return returned(self, _next, root, info, args, kwargs, _plan, known[2])
            return _next(root, info, *args, **kwargs)
        auto = relation_of(root.__class__, field.django_name or field.python_name)
        if not isinstance(auto, AutoRelation) or auto.on_instance(root):
            return _next(root, info, *args, **kwargs)
        if field.is_connection:
            return self._connection(field, auto, root, info, kwargs)
        queryset = self._queryset(field, auto, info, kwargs)
        if queryset is None:  # a page of a list: strawberry-django slices it
            return _next(root, info, *args, **kwargs)
        joined = joins(self, info, auto.rel.related_model)
        # a to-one the instance holds by the time the batch runs (read by a resolver beside the field) is
        # taken from it, as strawberry-django reads a held to-one, whatever the field's get_queryset
        return auto_related_loader(self._registry(info.context), auto.descriptor, queryset, joined,
                                   held=True).load(root)

    def _connection(self, field: Any, auto: AutoRelation, root: Any, info: Any, kwargs: dict[str, Any]) -> Any:
        """A connection field's page, from the page family of our connection extension: the field's
        filters, order and page (and ``totalCount``) applied in the batch."""
        pages = self._pages.get(id(field))
        if pages is None:
            pages = self._pages[id(field)] = pages_of(field)
        strawberry_info, arguments = _strawberry_call(field, info, kwargs)
        registry = self._registry(info.context)

        def load(source: Any, _info: Any, **_arguments: Any) -> Any:
            return auto_related_loader(registry, auto.descriptor).load(source)

        return pages.resolve(load, root, strawberry_info, **arguments)

    def _queryset(self, field: Any, auto: AutoRelation, info: Any, kwargs: dict[str, Any]) -> Any:
        """The field's ``get_queryset`` on the related model's rows: once per field and arguments."""
        nodes = info.field_nodes
        key = (id(field), repr(sorted(kwargs.items())), id(nodes[0]), len(nodes))  # the hints: the selection's
        try:
            return self._querysets[key]
        except KeyError:
            pass
        base = auto.rel.related_model._default_manager.all()
        queryset = with_hints(self, info, _field_queryset(field, base, info, kwargs))
        if queryset.query.is_sliced:
            if auto.rel.many:
                queryset = None
            else:  # strawberry-django limits a to-one field's queryset to read one row: the batch reads one each
                queryset = queryset._chain()
                queryset.query.clear_limits()
        self._querysets[key] = queryset
        return queryset


def _strawberry_call(field: Any, info: Any, kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """strawberry's ``Info`` and the field's arguments converted by strawberry (filter and order objects),
    as strawberry-django's own resolution gets them."""
    from strawberry import Info

    strawberry_info = Info(_raw_info=info, _field=field)
    if kwargs:
        from strawberry.schema.schema_converter import get_arguments

        schema = info.schema._strawberry_schema
        _, kwargs = get_arguments(field=field, source=None, info=strawberry_info, kwargs=kwargs,
                                  config=schema.config, scalar_registry=schema.schema_converter.scalar_registry)
        resolver = field.base_resolver
        if resolver is not None:  # the connection's default resolver's own parameters are not arguments
            for parameter in (resolver.info_parameter, resolver.root_parameter, resolver.parent_parameter):
                if parameter is not None:
                    kwargs.pop(parameter.name, None)
    return strawberry_info, kwargs


def _field_queryset(field: Any, base: Any, info: Any, kwargs: dict[str, Any]) -> Any:
    """``field.get_queryset(base, info, **arguments)`` as strawberry-django's own resolution calls it."""
    strawberry_info, arguments = _strawberry_call(field, info, kwargs)
    return field.get_queryset(base, strawberry_info, **arguments)

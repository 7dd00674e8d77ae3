"""Which graphql-core is installed, found by feature rather than by version string.

graphql-core 3.2.0–3.2.9, 3.2.10–3.2.14 and 3.3.x differ in exactly the places
``DataLoaderExecutionContext`` touches:

- base class: ``ExecutionContext`` (3.2, passed as ``execution_context_class=``)
  or ``Executor`` (3.3, passed as ``executor_class=``; 3.3 has no
  ``execution_context_class`` any more);
- ``handle_field_error``: ``(error, return_type)`` up to 3.2.9,
  ``(error, return_type, path)`` from 3.2.10 (errors of nulled positions are
  dropped), ``(raw_error, return_type, field_details_list, path)`` in 3.3
  (it locates the error itself);
- the root fields run in ``execute_operation(operation, root_value)`` (3.2)
  or ``execute_root_grouped_field_set(...)`` (3.3);
- an object's sub-fields run through ``execute_fields(type, value, path,
  collect_subfields(type, nodes))`` (3.2) or ``collect_and_execute_subfields``
  (3.3);
- 3.3 adds a trailing ``position_context`` argument to the completion methods
  (passed through as ``*rest``), and passes ``field_details_list`` where 3.2
  passes ``field_nodes``.

Everything here is decided once, at import, from signatures and attributes —
except one version check: the graphql-core 3.3 prereleases before 3.3.0rc1
changed the executor's internals between releases (3.3.0a7's
``handle_field_error`` takes an ``incremental_data_record``; 3.3.0a12 –
3.3.0rc0 return ``Pending`` records where values are expected) and are
refused at import with :data:`SUPPORTED`, rather than crashing mid-request.
"""
from __future__ import annotations

import inspect
import sys
from typing import Any, Callable

from .._optional import missing_dependency

try:
    import graphql.execution as _execution
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_dependency("dataloader_sync.graphql", exc, "graphql") from exc

import graphql as _graphql
from graphql import GraphQLError, located_error
from graphql.type import is_non_null_type
from graphql.type import scalars as _scalars

__all__ = [
    "IS_EXECUTOR",
    "NOT_GIVEN",
    "SUPPORTED",
    "Base",
    "GraphQLError",
    "adopt_strawberry",
    "execute_subfields",
    "REBUILDS_INFO",
    "first_node",
    "rebuild_info",
    "OWN_FIELDS",
    "PLAN_COERCE",
    "PLAN_FIELD_DEF",
    "PLAN_FIELD_NAME",
    "PLAN_FIELD_NODES",
    "PLAN_LEAF",
    "PLAN_RESOLVE",
    "PLAN_RESPONSE_NAME",
    "PLAN_RETURN_TYPE",
    "FAST_TUPLES",
    "tuple_new",
    "INFO_FIELDS",
    "Info",
    "plan_fields",
    "SERIALIZED_AS_IS",
    "MIN_INT",
    "MAX_INT",
    "handle",
    "invalid_return_type_error",
    "is_non_null_type",
    "unsupported_version",
]

#: The graphql-core versions this integration supports, as users read them.
SUPPORTED = "graphql-core 3.2.0 - 3.2.x, or 3.3.0rc1 and later 3.3.x releases"


def unsupported_version(version_info: Any) -> Any:
    """Why *version_info* (``graphql.version_info``) is refused, or None when supported.

    Args:
        version_info: graphql-core's ``VersionInfo`` (major, minor, micro,
            releaselevel, serial).

    Returns:
        A message naming the installed and the supported versions, or None.
    """
    major, minor, micro = version_info.major, version_info.minor, version_info.micro
    level, serial = version_info.releaselevel, version_info.serial
    prerelease_33 = (major, minor, micro) == (3, 3, 0) and (
        level in ("alpha", "beta") or (level == "candidate" and serial < 1)
    )
    if (major, minor) < (3, 2) or prerelease_33:
        return (
            f"dataloader_sync.graphql does not support graphql-core {_graphql.__version__};"
            f" it supports {SUPPORTED}: pip install 'graphql-core>=3.2,<3.4'"
            " (or 'graphql-core>=3.3.0rc1,<3.4' for 3.3)"
        )
    return None


_REFUSED = unsupported_version(_graphql.version_info)
if _REFUSED is not None:
    raise ImportError(_REFUSED)

#: The class to subclass: ``Executor`` (3.3+) or ``ExecutionContext`` (3.2).
Base: Any = getattr(_execution, "Executor", None) or _execution.ExecutionContext

#: True when the root fields run through ``execute_root_grouped_field_set`` (3.3+).
IS_EXECUTOR = callable(getattr(Base, "execute_root_grouped_field_set", None))

# invalid_return_type_error(return_type, result, field_nodes_or_details) lives
# next to the base class in every version (execute.py in 3.2, executor.py in 3.3).
invalid_return_type_error: Callable[..., GraphQLError] = sys.modules[
    Base.__module__
].invalid_return_type_error

_HANDLE_PARAMS = list(inspect.signature(Base.handle_field_error).parameters)[1:]


def _handle_33(ctx: Any, raw_error: Exception, return_type: Any, nodes: Any, path: Any) -> None:
    # 3.3: handle_field_error locates the error itself (and honours the
    # "disable error propagation" directive).
    ctx.handle_field_error(raw_error, return_type, nodes, path)


def _handle_3210(ctx: Any, raw_error: Exception, return_type: Any, nodes: Any, path: Any) -> None:
    error = located_error(raw_error, nodes, path.as_list())
    ctx.handle_field_error(error, return_type, path)


def _handle_320(ctx: Any, raw_error: Exception, return_type: Any, nodes: Any, path: Any) -> None:
    error = located_error(raw_error, nodes, path.as_list())
    ctx.handle_field_error(error, return_type)


#: ``handle(ctx, raw_error, return_type, field_nodes, path)``: locate the error
#: and handle it exactly as graphql-core does where it catches a field's error:
#: record it and return (nullable position), or raise the located error
#: (non-null position: the caller moves it to the parent).
if len(_HANDLE_PARAMS) >= 4:
    handle = _handle_33
elif "path" in _HANDLE_PARAMS:
    handle = _handle_3210
else:
    handle = _handle_320


if callable(getattr(Base, "collect_and_execute_subfields", None)):

    def execute_subfields(ctx: Any, return_type: Any, nodes: Any, path: Any, result: Any, rest: tuple[Any, ...]) -> Any:
        """Run the sub-selections of an object value (3.3)."""
        return ctx.collect_and_execute_subfields(return_type, nodes, path, result, *rest)

else:

    def execute_subfields(ctx: Any, return_type: Any, nodes: Any, path: Any, result: Any, rest: tuple[Any, ...]) -> Any:
        """Run the sub-selections of an object value (3.2)."""
        return ctx.execute_fields(return_type, result, path, ctx.collect_subfields(return_type, nodes))


_get_field_def: Any = getattr(sys.modules[Base.__module__], "get_field_def", None)
_get_argument_values: Any = getattr(sys.modules[Base.__module__], "get_argument_values", None)

#: True where ``DataLoaderExecutionContext`` runs an object's fields itself
#: (``plan_fields``): graphql-core 3.2, whose ``execute_fields`` /
#: ``execute_field`` are the same in every 3.2.x release but for
#: ``handle_field_error``'s arguments (``handle`` covers them).  3.3 already
#: skips argument coercion for fields without arguments.
OWN_FIELDS = not IS_EXECUTOR and _get_field_def is not None and _get_argument_values is not None

#: graphql-core's resolve info class.
Info: Any = _graphql.GraphQLResolveInfo
#: In every graphql-core 3.2.x, ``GraphQLResolveInfo`` and ``Path`` are named
#: tuples of these fields: ``tuple.__new__(Info, (...))`` builds the same
#: tuple as their Python-level ``__new__``, faster (see FAST_TUPLES).
INFO_FIELDS = ("field_name", "field_nodes", "return_type", "parent_type", "path", "schema", "fragments",
               "root_value", "operation", "variable_values", "context", "is_awaitable")
#: True where resolve infos and paths may be built with ``tuple.__new__`` (3.2).
FAST_TUPLES = (OWN_FIELDS and getattr(Info, "_fields", None) == INFO_FIELDS
               and getattr(_graphql.pyutils.Path, "_fields", None) == ("prev", "key", "typename"))
#: ``tuple_new(Info, (...))``/``tuple_new(Path, (prev, key, typename))``: a resolve info or path built past
#: its class's ``__new__`` (only where ``FAST_TUPLES``; elsewhere the classes are called).
tuple_new = tuple.__new__


#: The slots of a ``plan_fields`` entry, by name, for a reader that takes one slot (the field loop unpacks
#: the whole entry in this order): ``entry[PLAN_RESOLVE]``.
(PLAN_RESPONSE_NAME, PLAN_FIELD_NODES, PLAN_FIELD_DEF, PLAN_RESOLVE, PLAN_RETURN_TYPE, PLAN_COERCE, PLAN_LEAF,
 PLAN_FIELD_NAME) = range(8)


def plan_fields(ctx: Any, parent_type: Any, fields: Any, leaf_types: Any) -> list[Any]:
    """What graphql-core 3.2's ``execute_field`` looks up per field, once per selection.

    Args:
        ctx: the execution context (its schema and ``field_resolver``).
        parent_type: the object type whose fields run.
        fields: ``{response name: field nodes}``, as ``execute_fields`` gets it.
        leaf_types: the classes of a nullable leaf type.

    Returns:
        ``[(response name, field nodes, field def, resolve function, return
        type, argument coercer or None, leaf, field name)]`` in
        the fields' order, without the fields ``get_field_def`` does not know (graphql-core
        leaves them out of the result).  The argument coercer is graphql-core's
        ``get_argument_values``, and None when the field defines no argument:
        it would return ``{}`` whatever the query says.  *leaf* is False but
        for a nullable leaf type; for one whose serializer is graphql-core's
        Int, String, ID or Boolean one (and ``ctx._own_leaf``), the class it
        returns unchanged (``SERIALIZED_AS_IS``); True for any other.
    """
    plan = []
    for response_name, field_nodes in fields.items():
        field_def = _get_field_def(ctx.schema, parent_type, field_nodes[0])
        if not field_def:
            continue
        return_type = field_def.type
        leaf = isinstance(return_type, leaf_types)
        if leaf and ctx._own_leaf:  # the class of the values its serializer returns as they are, if any
            leaf = SERIALIZED_AS_IS(id(return_type.serialize)) or True
        plan.append((response_name, field_nodes, field_def, field_def.resolve or ctx.field_resolver, return_type,
                     _get_argument_values if field_def.args else None, leaf, field_nodes[0].name.value))
    return plan


#: ``SERIALIZED_AS_IS(id(serialize))``: the class whose instances *serialize* returns unchanged, when it is
#: graphql-core 3.2's serializer of Int (an int within 32 bits: ``MIN_INT`` to ``MAX_INT``), String, ID or
#: Boolean; None for any other.  Keyed by id, as a scalar's own serializer may be unhashable (graphql-core's
#: live as long as it does).
SERIALIZED_AS_IS: Callable[[int], Any] = {
    id(fn): cls for fn, cls in ((getattr(_scalars, "serialize_int", None), int),
                                (getattr(_scalars, "serialize_string", None), str),
                                (getattr(_scalars, "serialize_id", None), str),
                                (getattr(_scalars, "serialize_boolean", None), bool)) if fn is not None}.get
MIN_INT, MAX_INT = _graphql.GRAPHQL_MIN_INT, _graphql.GRAPHQL_MAX_INT

_to_nodes: Any = getattr(sys.modules[Base.__module__], "to_nodes", None)

#: True where a waiting field's resolve info can be built again
#: (``rebuild_info``); where not, waiting fields keep their own (a ``Pending``).
REBUILDS_INFO = (callable(getattr(_graphql.GraphQLSchema, "get_field", None)) and _to_nodes is not None
                 if IS_EXECUTOR else _get_field_def is not None)


def first_node(field_nodes: Any) -> Any:
    """The first ``FieldNode`` of what ``complete_value`` gets as field nodes
    (3.3 passes ``FieldDetails``, each with its ``node``)."""
    first = field_nodes[0]
    return getattr(first, "node", first) if IS_EXECUTOR else first


def rebuild_info(ctx: Any, parent_type: Any, field_nodes: Any, path: Any) -> Any:
    """The resolve info graphql-core's ``execute_field`` built for this field (a new, equal one).

    Args:
        ctx: the execution context (its ``build_resolve_info``, maybe strawberry's).
        parent_type: the object type of the field.
        field_nodes: what ``complete_value`` got (3.2: field nodes; 3.3: field details).
        path: the field's path.

    Returns:
        ``ctx.build_resolve_info(field definition, field nodes, parent_type, path)``.
    """
    if IS_EXECUTOR:
        field = ctx.schema.get_field(parent_type, first_node(field_nodes).name.value)
        return ctx.build_resolve_info(field, _to_nodes(field_nodes), parent_type, path)
    return ctx.build_resolve_info(_get_field_def(ctx.schema, parent_type, field_nodes[0]), field_nodes, parent_type,
                                  path)


#: Default of ``operation_extensions``: graphql-core itself never passes it.
NOT_GIVEN: Any = object()


def adopt_strawberry(ctx: Any, operation_extensions: Any) -> None:
    """Do for *ctx* what strawberry's own execution context does with ``operation_extensions``.

    strawberry passes ``operation_extensions`` to the class it is given and,
    on graphql-core 3.3, its ``StrawberryGraphQLCoreExecutionContext`` builds
    resolve infos that carry them (``info.input_extensions``) and plain
    variable values.  That method is borrowed (strawberry is imported by
    then: it is the caller) unless the class overrides ``build_resolve_info``
    itself; nothing is imported here.

    Args:
        ctx: the execution context being built.
        operation_extensions: what strawberry passed (may be None).
    """
    ctx.operation_extensions = operation_extensions
    module = sys.modules.get("strawberry.schema.schema")
    strawberry_cls = getattr(module, "StrawberryGraphQLCoreExecutionContext", None)
    build = getattr(strawberry_cls, "__dict__", {}).get("build_resolve_info")
    if build is not None and type(ctx).build_resolve_info is Base.build_resolve_info:
        ctx.build_resolve_info = build.__get__(ctx, type(ctx))

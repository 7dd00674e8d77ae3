"""graphql_view: a Flask view that runs GraphQL with the request's loaders.

The view reads a GraphQL request (GET query string, POST ``application/json``,
``application/graphql`` or a form), executes it with
``DataLoaderExecutionContext`` and a context holding the request's registry,
and answers JSON.

Guarantees:
- The context passed to resolvers (``info.context``) has the request's
  registry as ``loaders`` (or is what ``context_factory(registry)`` made), so
  the execution dispatches through ``registry.dispatch_all()``.
- Status codes follow graphene-django: 400 for a request that cannot be run
  (no query, bad JSON or variables, a syntax or validation error, variables
  that do not coerce), 405 for a mutation sent by GET, 200 once execution
  started (field errors are in ``errors``, beside ``data``).
- Keys of ``data`` keep the order of the query (no key sorting).
"""
from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from typing import Any, Callable, Optional

import flask

from .._optional import missing_dependency
from .._registry import DataLoaderRegistry
from .._request_registry import RequestFactory, close_quietly
from ._extension import EXTENSION_KEY, DataLoaders, current_request

__all__ = ["GraphQLContext", "graphql_view"]


class GraphQLContext:
    """The default ``info.context`` of ``graphql_view``: the request and its loaders.

    Thread-safe as far as its attributes are: it only holds them.

    Attributes:
        request: the Flask request (the real object, not the proxy).
        loaders: the request's ``DataLoaderRegistry``.
    """

    __slots__ = ("request", "loaders")

    def __init__(self, request: Any, loaders: DataLoaderRegistry) -> None:
        """Raises: TypeError: *loaders* is not a ``DataLoaderRegistry``."""
        if not isinstance(loaders, DataLoaderRegistry):
            raise TypeError(f"loaders must be a DataLoaderRegistry, got {type(loaders).__name__}")
        self.request = request
        self.loaders = loaders

    def __repr__(self) -> str:
        return f"<GraphQLContext {self.request!r} loaders={self.loaders!r}>"


class _HttpError(Exception):
    """A request that cannot be executed: answered with *status* and one error."""

    def __init__(self, status: int, message: str, headers: Optional[dict[str, str]] = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


def _json_response(payload: Mapping[str, Any], status: int, headers: Optional[dict[str, str]] = None) -> flask.Response:
    body = json.dumps(payload, separators=(",", ":"))
    return flask.current_app.response_class(body, status=status, headers=headers, mimetype="application/json")


def _request_data(request: flask.Request) -> Mapping[str, Any]:
    if request.method == "GET":
        return request.args
    mimetype = request.mimetype
    if mimetype == "application/json":
        data = request.get_json(silent=True)
        if not isinstance(data, dict):
            raise _HttpError(400, "POST body must be a JSON object")
        return data
    if mimetype == "application/graphql":
        return {"query": request.get_data(as_text=True)}
    if mimetype in ("application/x-www-form-urlencoded", "multipart/form-data"):
        return request.form
    raise _HttpError(415, f"unsupported content type {mimetype or '(none)'!r}; send application/json")


def _graphql_params(request: flask.Request) -> tuple[str, Optional[dict[str, Any]], Optional[str]]:
    data = _request_data(request)
    query = data.get("query")
    if not isinstance(query, str) or not query.strip():
        raise _HttpError(400, "Must provide query string.")
    variables = data.get("variables")
    if isinstance(variables, str):
        try:
            variables = json.loads(variables) if variables.strip() else None
        except ValueError:
            raise _HttpError(400, "Variables are invalid JSON.") from None
    if variables is not None and not isinstance(variables, dict):
        raise _HttpError(400, "Variables must be a JSON object.")
    operation_name = data.get("operationName") or None
    if operation_name is not None and not isinstance(operation_name, str):
        raise _HttpError(400, "operationName must be a string.")
    return query, variables, operation_name


def graphql_view(
    schema: Any,
    *,
    loaders: Optional[DataLoaders] = None,
    registry_factory: Optional[Callable[..., DataLoaderRegistry]] = None,
    context_factory: Optional[Callable[[DataLoaderRegistry], Any]] = None,
    root_value: Any = None,
    middleware: Any = None,
    name: str = "graphql",
    execution_context_class: Any = None,
) -> Callable[[], flask.Response]:
    """Make a Flask view function that executes GraphQL requests with dataloaders.

    ``app.add_url_rule("/graphql", view_func=graphql_view(schema))`` serves
    GET and POST.  The request's registry comes from, in this order:
    *registry_factory* (a registry made for the execution and closed right
    after it), *loaders*, or the ``DataLoaders`` extension set up on the app
    (closed at request teardown).

    Args:
        schema: a graphene ``Schema`` or a graphql-core ``GraphQLSchema``.
        loaders: the ``DataLoaders`` extension to take the registry from.
        registry_factory: instead of an extension, a callable making a fresh
            registry for each request: called with the request if it takes
            one argument, else with nothing (``DataLoaderRegistry`` itself
            will do).
        context_factory: ``context_factory(registry)`` returns the
            ``context_value``; it should carry the registry as ``loaders``
            (attribute or key) so the execution dispatches through it.
            Default: a ``GraphQLContext(request, registry)``.
        root_value: the root value of every execution.
        middleware: graphql-core/graphene middleware.
        name: the view's endpoint name.
        execution_context_class: a ``DataLoaderExecutionContext`` subclass
            to execute with, such as
            ``dataloader_sync.graphql.AutoRelationsExecutionContext`` (relation
            fields batched with no resolver written); default
            ``DataLoaderExecutionContext``.

    Returns:
        the view function (with ``methods = ["GET", "POST"]``).

    Raises:
        ValueError: both *loaders* and *registry_factory* were given.
        TypeError: *schema* is not a schema, *loaders* not a ``DataLoaders``,
            a factory not callable, *name* not a str, or
            *execution_context_class* not a ``DataLoaderExecutionContext`` subclass.
        ImportError: graphql-core is not installed.
    """
    graphql_schema = _checked_schema(schema, loaders, registry_factory, context_factory, name)
    make = None if registry_factory is None else RequestFactory(registry_factory, "registry_factory")
    from ..graphql import DataLoaderExecutionContext  # graphql-core is there: _checked_schema imported it

    if execution_context_class is None:
        execution_context_class = DataLoaderExecutionContext
    elif not (isinstance(execution_context_class, type)
              and issubclass(execution_context_class, DataLoaderExecutionContext)):
        raise TypeError("execution_context_class must be a DataLoaderExecutionContext subclass "
                        "(dataloader_sync.graphql.AutoRelationsExecutionContext, for one)")

    def view() -> flask.Response:
        # The request itself, not the context-local proxy, goes in the context
        # (resolvers may run on other threads).
        request = current_request()
        registry = _request_registry(loaders, make, request)
        try:
            return _run(graphql_schema, request, registry, context_factory, root_value, middleware,
                        execution_context_class)
        except _HttpError as error:
            return _json_response({"errors": [{"message": str(error)}]}, error.status, error.headers)
        finally:
            if make is not None:  # made for this execution: closed with it
                close_quietly(registry)

    view.__name__ = view.__qualname__ = name
    view.methods = ["GET", "POST"]  # type: ignore[attr-defined]
    return view


def _checked_schema(schema: Any, loaders: Optional[DataLoaders],
                    registry_factory: Optional[Callable[..., DataLoaderRegistry]],
                    context_factory: Optional[Callable[[DataLoaderRegistry], Any]], name: str) -> Any:
    """Check ``graphql_view``'s arguments; return the graphql-core schema (a graphene one's ``graphql_schema``).

    Raises:
        ImportError, ValueError, TypeError: as ``graphql_view``.
    """
    try:
        from graphql import GraphQLSchema
    except ImportError as exc:
        raise missing_dependency("dataloader_sync.flask.graphql_view", exc, "graphql") from exc

    if loaders is not None and registry_factory is not None:
        raise ValueError("give loaders or registry_factory, not both")
    if registry_factory is not None and not callable(registry_factory):
        raise TypeError("registry_factory must be callable")
    if context_factory is not None and not callable(context_factory):
        raise TypeError("context_factory must be callable")
    if loaders is not None and not isinstance(loaders, DataLoaders):
        raise TypeError("loaders must be a DataLoaders extension or None")
    if not isinstance(name, str):
        raise TypeError("name must be a str")
    graphql_schema = getattr(schema, "graphql_schema", schema)
    if not isinstance(graphql_schema, GraphQLSchema):
        raise TypeError(
            f"schema must be a graphene Schema or a graphql-core GraphQLSchema, got {type(schema).__name__}"
        )
    return graphql_schema


def _request_registry(loaders: Optional[DataLoaders], make: Optional[RequestFactory],
                      request: Any) -> DataLoaderRegistry:
    """The registry of this request: a fresh one from *registry_factory*, or the extension's.

    Raises:
        RuntimeError: neither is given and the app has no ``DataLoaders`` extension.
    """
    if make is not None:
        return make(request)
    extension = loaders if loaders is not None else flask.current_app.extensions.get(EXTENSION_KEY)
    if extension is None:
        raise RuntimeError(
            "graphql_view needs a registry: set up DataLoaders(app, factory=...) "
            "or pass loaders= or registry_factory="
        )
    return extension.get_registry()


def _run(graphql_schema: Any, request: flask.Request, registry: DataLoaderRegistry,
         context_factory: Optional[Callable[[DataLoaderRegistry], Any]], root_value: Any,
         middleware: Any, execution_context_class: Any) -> flask.Response:
    """Execute the GraphQL request *request* with *registry*; its JSON response.

    Raises:
        _HttpError: the request cannot be run (answered by the view).
        RuntimeError: the execution returned an awaitable (an async resolver).
    """
    from graphql import GraphQLError, OperationType, execute, get_operation_ast, parse, validate, validate_schema

    query, variables, operation_name = _graphql_params(request)
    schema_errors = validate_schema(graphql_schema)
    if schema_errors:
        return _json_response({"errors": [e.formatted for e in schema_errors]}, 500)
    try:
        document = parse(query)
    except GraphQLError as error:
        return _json_response({"errors": [error.formatted]}, 400)
    operation = get_operation_ast(document, operation_name)
    if request.method == "GET" and operation is not None and operation.operation != OperationType.QUERY:
        raise _HttpError(405, f"Can only perform a {operation.operation.value} operation from a POST request.",
                         {"Allow": "POST"})
    validation_errors = validate(graphql_schema, document)
    if validation_errors:
        return _json_response({"errors": [e.formatted for e in validation_errors]}, 400)
    context = GraphQLContext(request, registry) if context_factory is None else context_factory(registry)
    result = execute(
        graphql_schema,
        document,
        root_value=root_value,
        context_value=context,
        variable_values=variables,
        operation_name=operation_name,
        middleware=middleware,
        execution_context_class=execution_context_class,
    )
    if inspect.isawaitable(result):
        getattr(result, "close", lambda: None)()
        raise RuntimeError("GraphQL execution returned an awaitable; graphql_view runs sync resolvers only")
    errors = result.errors or []
    # Errors without a path were raised before execution started (an
    # unknown operation, variables that do not coerce): a bad request.
    status = 400 if result.data is None and errors and all(e.path is None for e in errors) else 200
    return _json_response(result.formatted, status)

"""A registry nobody closes is collected once its request is gone, and its ticks stop.

DESIGN §10 "Nothing outlives its request unless asked to".  Servers without
a per-request teardown (Ariadne's own WSGI app, a plain ``execute`` in a
view) never close the registry their context makes.  A ticker registry's
tick holds it only weakly and a finalizer cancels the tick; that holds only
if nothing else the tick keeps reaches the registry — in particular the copy
of the request's ``contextvars`` context the tick runs in, which the
execution's own context variables (its levels, its dispatch scope) are part
of.  Each case runs 50 executions, each with its own registry of one kind
that nothing closes, then counts the registries still alive and the ticks
still pending on the test's own executor after ``gc.collect()``.
"""
from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from typing import Any, Callable

import pytest

from dataloader_sync import DataLoader, DataLoaderRegistry, ScheduledDataLoaderRegistry, ScheduledExecutor

graphql = pytest.importorskip("graphql")

from graphql import build_schema, graphql_sync  # noqa: E402

from dataloader_sync.graphql import AutoRelationsExecutionContext, DataLoaderExecutionContext  # noqa: E402

EXECUTIONS = 50
SDL = "type Query { users: [User!]! } type User { id: Int! name: String! best: User! }"
QUERY = "{ users { id name best { name } } }"
ANSWER = {"users": [{"id": i, "name": f"user {i}", "best": {"name": f"user {i + 1}"}} for i in range(3)]}


class User:
    def __init__(self, id: int) -> None:
        self.id = id


def _names(ids: list[int]) -> list[str]:
    return [f"user {i}" for i in ids]


def _users(root: Any, info: Any) -> list[User]:
    return [User(i) for i in range(3)]


def _name(user: User, info: Any) -> Any:
    return info.context["loaders"]["names"].load(user.id)


def _best(user: User, info: Any) -> Any:  # a chain: the tick's work while the execution waits
    return info.context["loaders"]["names"].load(user.id).then(lambda _: User(user.id + 1))


@pytest.fixture
def executor() -> Iterator[ScheduledExecutor]:
    executor = ScheduledExecutor(max_workers=2)
    yield executor
    executor.shutdown(wait=True)


KINDS: dict[str, Callable[[ScheduledExecutor], DataLoaderRegistry]] = {
    "DataLoaderRegistry": lambda executor: DataLoaderRegistry(),
    "ScheduledDataLoaderRegistry": lambda executor: ScheduledDataLoaderRegistry(scheduled_executor=executor),
    "ScheduledDataLoaderRegistry(ticker_mode=True)": lambda executor: ScheduledDataLoaderRegistry(
        scheduled_executor=executor, ticker_mode=True),
}


def _registry(kind: str, executor: ScheduledExecutor) -> DataLoaderRegistry:
    return KINDS[kind](executor).register("names", DataLoader(_names))


def _graphql_core(context_class: Any) -> Callable[[DataLoaderRegistry], Any]:
    schema = build_schema(SDL)
    schema.query_type.fields["users"].resolve = _users
    user = schema.get_type("User")
    user.fields["name"].resolve = _name  # type: ignore[union-attr]
    user.fields["best"].resolve = _best  # type: ignore[union-attr]

    def execute(registry: DataLoaderRegistry) -> Any:
        result = graphql_sync(schema, QUERY, context_value={"loaders": registry},
                              execution_context_class=context_class)
        assert result.errors is None, result.errors
        return result.data

    return execute


def _graphene() -> Callable[[DataLoaderRegistry], Any]:
    graphene = pytest.importorskip("graphene")

    class UserType(graphene.ObjectType):
        class Meta:
            name = "User"

        id = graphene.Int(required=True)
        name = graphene.String(required=True)
        best = graphene.Field(lambda: UserType, required=True)

        def resolve_name(user: User, info: Any) -> Any:
            return _name(user, info)

        def resolve_best(user: User, info: Any) -> Any:
            return _best(user, info)

    class Query(graphene.ObjectType):
        users = graphene.List(graphene.NonNull(UserType), required=True)

        def resolve_users(root: Any, info: Any) -> list[User]:
            return _users(root, info)

    schema = graphene.Schema(query=Query)

    def execute(registry: DataLoaderRegistry) -> Any:
        result = schema.execute(QUERY, context_value={"loaders": registry},
                                execution_context_class=DataLoaderExecutionContext)
        assert result.errors is None, result.errors
        return result.data

    return execute


def _ariadne_wsgi(kind: str, executor: ScheduledExecutor, made: list[Any]) -> Callable[[], Any]:
    """Ariadne's own WSGI app, whose ``context_value`` callable makes a registry that nobody closes."""
    pytest.importorskip("ariadne")
    werkzeug_test = pytest.importorskip("werkzeug.test")
    from ariadne import ObjectType, QueryType, make_executable_schema
    from ariadne.wsgi import GraphQL

    query, user = QueryType(), ObjectType("User")
    query.set_field("users", _users)
    user.set_field("name", _name)
    user.set_field("best", _best)

    def context_value(environ: Any, data: Any = None) -> dict[str, Any]:
        registry = _registry(kind, executor)
        made.append(weakref.ref(registry))
        return {"request": environ, "loaders": registry}

    app = GraphQL(make_executable_schema(SDL, query, user), context_value=context_value,
                  execution_context_class=DataLoaderExecutionContext)
    client = werkzeug_test.Client(app)

    def execute() -> Any:
        response = client.post("/", json={"query": QUERY})
        assert response.status_code == 200, response.get_data(as_text=True)
        body = response.get_json()
        assert "errors" not in body, body
        return body["data"]

    return execute


def _left(refs: list[Any], executor: ScheduledExecutor) -> tuple[int, int]:
    gc.collect()
    return sum(ref() is not None for ref in refs), executor.pending_count


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("stack", ["DataLoaderExecutionContext", "AutoRelationsExecutionContext", "graphene"])
def test_unclosed_registries_of_plain_executions_are_collected_and_their_ticks_stop(
        kind: str, stack: str, executor: ScheduledExecutor) -> None:
    execute = (_graphene() if stack == "graphene" else
               _graphql_core({"DataLoaderExecutionContext": DataLoaderExecutionContext,
                              "AutoRelationsExecutionContext": AutoRelationsExecutionContext}[stack]))
    refs = []
    for _ in range(EXECUTIONS):
        registry = _registry(kind, executor)
        assert execute(registry) == ANSWER
        refs.append(weakref.ref(registry))
        del registry
    assert _left(refs, executor) == (0, 0)


@pytest.mark.parametrize("kind", list(KINDS))
def test_unclosed_registries_of_ariadnes_own_wsgi_app_are_collected_and_their_ticks_stop(
        kind: str, executor: ScheduledExecutor) -> None:
    refs: list[Any] = []
    execute = _ariadne_wsgi(kind, executor, refs)
    for _ in range(EXECUTIONS):
        assert execute() == ANSWER
    assert len(refs) == EXECUTIONS
    assert _left(refs, executor) == (0, 0)

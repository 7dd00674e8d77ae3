"""strawberry with ``DataLoaderExecutionContext``: ``execute_sync`` and strawberry's own views.

Runs on graphql-core 3.2.x (strawberry ≤ 0.327) and 3.3.x (current strawberry,
which passes ``operation_extensions`` and ``is_async_iterable`` to the class it
is given): the class is given to ``strawberry.Schema`` as is, no mixin.  The
views are strawberry's ``flask.views.GraphQLView`` and ``django.views.GraphQLView``
with the ``get_context`` override the docs show, driven by Flask's and
Django's test clients; the Django one reads the example project's models from
SQLite through the ORM.
"""
from __future__ import annotations

import threading
from collections.abc import AsyncGenerator
from typing import Any, Optional

import pytest

strawberry = pytest.importorskip("strawberry")

from dataloader_sync import DataLoader, DataLoaderRegistry, ScheduledDataLoaderRegistry  # noqa: E402
from dataloader_sync.graphql import DataLoaderExecutionContext  # noqa: E402

REFUSED = "DataLoaderExecutionContext executes synchronously"


class Calls:
    """Batch functions that record each call (loader name, keys)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # guards log
        self.log: list[tuple] = []

    def batch(self, name: str, fn):
        def batch_load(keys):
            with self.lock:
                self.log.append((name, list(keys)))
            return [fn(key) for key in keys]

        return batch_load

    def of(self, name: str) -> list[list[Any]]:
        return [keys for loader, keys in self.log if loader == name]


def registry_for(calls: Calls, fail_owner: Optional[int] = None) -> DataLoaderRegistry:
    def owner(key: int) -> Any:
        return ValueError(f"no owner {key}") if key == fail_owner else {"id": key, "name": f"owner {key}"}

    registry = DataLoaderRegistry()
    registry.register("owner", DataLoader(calls.batch("owner", owner), name="owner"))
    registry.register("tags", DataLoader(calls.batch("tags", lambda k: [f"t{k}a", f"t{k}b"]), name="tags"))
    registry.register("score", DataLoader(calls.batch("score", lambda k: k * 10), name="score"))
    return registry


def loaders(info: Any) -> DataLoaderRegistry:
    context = info.context
    return context["loaders"] if isinstance(context, dict) else context.loaders


@strawberry.type
class Owner:
    id: int
    name: str

    @strawberry.field
    def score(self, info: strawberry.Info) -> int:
        return loaders(info)["score"].load(self.id)


@strawberry.type
class Item:
    id: int

    @strawberry.field
    def owner(self, info: strawberry.Info) -> Optional[Owner]:
        return loaders(info)["owner"].load(self.id % 5).then(lambda row: Owner(**row))

    @strawberry.field
    def tags(self, info: strawberry.Info) -> list[str]:
        return loaders(info)["tags"].load(self.id)

    @strawberry.field
    async def slow(self) -> str:
        return "never"


@strawberry.type
class Query:
    @strawberry.field
    def items(self, n: int = 12) -> list[Item]:
        return [Item(id=i) for i in range(n)]

    @strawberry.field
    def extensions(self, info: strawberry.Info) -> str:
        return repr(info.input_extensions)


STATE: dict[int, str] = {}


@strawberry.type
class Mutation:
    @strawberry.mutation
    def rename(self, info: strawberry.Info, id: int, name: str) -> str:
        STATE[id] = name
        return name

    @strawberry.mutation
    def name(self, info: strawberry.Info, id: int) -> str:
        return loaders(info)["name"].load(id)

    @strawberry.mutation
    async def later(self) -> int:
        return 1


class ClearingContext(DataLoaderExecutionContext):
    clear_loaders_after_mutation_fields = True


schema = strawberry.Schema(query=Query, mutation=Mutation, execution_context_class=DataLoaderExecutionContext)
clearing_schema = strawberry.Schema(query=Query, mutation=Mutation, execution_context_class=ClearingContext)
plain_schema = strawberry.Schema(query=Query, mutation=Mutation)


@strawberry.type
class PlainItem:
    id: int

    @strawberry.field
    def tags(self) -> list[str]:
        return [f"t{self.id}a", f"t{self.id}b"]

@strawberry.type
class PlainQuery:
    @strawberry.field
    def items(self, n: int = 12) -> list[PlainItem]:
        return [PlainItem(id=i) for i in range(n)]

    @strawberry.field
    def extensions(self, info: strawberry.Info) -> str:
        return repr(info.input_extensions)


# -- execute_sync ---------------------------------------------------------------------------------------
def test_strawberry_execute_sync_makes_one_batch_per_loader_per_level() -> None:
    calls = Calls()
    result = schema.execute_sync("{ items { id tags owner { name score } } }",
                                 context_value={"loaders": registry_for(calls)})
    assert result.errors is None
    assert len(result.data["items"]) == 12
    assert result.data["items"][7] == {"id": 7, "tags": ["t7a", "t7b"], "owner": {"name": "owner 2", "score": 20}}
    assert calls.of("owner") == [[0, 1, 2, 3, 4]]  # 12 items, 5 distinct owners, one call
    assert calls.of("tags") == [list(range(12))]
    assert calls.of("score") == [[0, 1, 2, 3, 4]]  # the next level: one call


def test_strawberry_per_key_errors_are_field_errors_at_their_paths() -> None:
    calls = Calls()
    result = schema.execute_sync("{ items(n: 7) { id owner { name } } }",
                                 context_value={"loaders": registry_for(calls, fail_owner=3)})
    owners = [item["owner"] for item in result.data["items"]]
    assert owners == [{"name": f"owner {i % 5}"} if i % 5 != 3 else None for i in range(7)]
    assert sorted((e.message, tuple(e.path)) for e in result.errors) == [
        ("no owner 3", ("items", 3, "owner"))]
    assert calls.of("owner") == [[0, 1, 2, 3, 4]]


def test_strawberry_gives_the_same_result_as_with_its_own_execution_context() -> None:
    query = "{ items(n: 6) { id tags } extensions }"
    ours = schema.execute_sync(query, context_value={"loaders": registry_for(Calls())},
                               operation_extensions={"trace": "abc"})

    # info.input_extensions: on graphql-core 3.3 both give the extensions; on
    # 3.2 strawberry's own class gives an error for it too.
    theirs = strawberry.Schema(query=PlainQuery).execute_sync(query, operation_extensions={"trace": "abc"})
    assert (ours.data, [e.message for e in ours.errors or []]) == (
        theirs.data, [e.message for e in theirs.errors or []])


def test_strawberry_serial_mutations_and_the_opt_in_that_clears_loaders_between_them() -> None:
    query = 'mutation { before: name(id: 1) rename(id: 1, name: "new") after: name(id: 1) }'
    for use_schema, after in ((schema, "old"), (clearing_schema, "new")):
        STATE[1] = "old"
        calls = Calls()
        registry = DataLoaderRegistry()
        registry.register("name", DataLoader(calls.batch("name", lambda k: STATE[k]), name="name"))
        result = use_schema.execute_sync(query, context_value={"loaders": registry})
        assert result.errors is None
        assert result.data == {"before": "old", "rename": "new", "after": after}
        assert len(calls.of("name")) == (1 if after == "old" else 2)


def test_strawberry_async_resolvers_and_mutations_are_refused_with_the_clear_message() -> None:
    result = schema.execute_sync("{ items(n: 2) { id slow } }", context_value={"loaders": registry_for(Calls())})
    assert result.data is None  # slow is non-null: the error nulls the list item, then items
    assert [(e.message.split(":")[0], e.path) for e in result.errors] == [(REFUSED, ["items", 0, "slow"])]
    result = schema.execute_sync("mutation { later }", context_value={"loaders": registry_for(Calls())})
    assert [(e.message.split(":")[0], e.path) for e in result.errors] == [(REFUSED, ["later"])]


# -- strawberry's Flask view -------------------------------------------------------------------------------
def test_strawberry_flask_view_with_a_registry_per_request_from_get_context() -> None:
    flask = pytest.importorskip("flask")
    from strawberry.flask.views import GraphQLView

    from dataloader_sync.flask import DataLoaders

    calls = Calls()
    made: list[DataLoaderRegistry] = []

    def make_registry() -> DataLoaderRegistry:
        registry = registry_for(calls)
        made.append(registry)
        return registry

    app = flask.Flask(__name__)
    extension = DataLoaders(app, factory=make_registry)

    class LoaderGraphQLView(GraphQLView):
        def get_context(self, request, response):
            return {**super().get_context(request, response), "loaders": extension.get_registry()}

    app.add_url_rule("/graphql", view_func=LoaderGraphQLView.as_view("graphql", schema=schema))
    client = app.test_client()
    for _ in range(2):
        response = client.post("/graphql", json={"query": "{ items(n: 10) { owner { name score } } }"})
        assert response.status_code == 200, response.data
        body = response.get_json()
        assert "errors" not in body, body
        assert body["data"]["items"][6] == {"owner": {"name": "owner 1", "score": 10}}
    assert len(made) == 2 and made[0] is not made[1]  # one registry per request
    assert all(registry.closed for registry in made)  # closed at teardown
    assert calls.of("owner") == [[0, 1, 2, 3, 4]] * 2  # per request: one batch per level, fresh cache
    assert calls.of("score") == [[0, 1, 2, 3, 4]] * 2


# -- strawberry's Django view ----------------------------------------------------------------------------
def strawberry_django_urls() -> type:
    """The example project's strawberry endpoint (books/strawberry_schema.py), alone."""
    from books import strawberry_schema
    from django.urls import path

    view = strawberry_schema.LoaderGraphQLView.as_view(schema=strawberry_schema.schema)
    return type("urls", (), {"urlpatterns": [path("strawberry", view)]})


def test_strawberry_django_view_with_the_middlewares_registry_one_sql_query_per_level(example_books) -> None:
    from books.loaders import make_registry
    from books.models import Author
    from django.db import connection
    from django.test import Client, override_settings
    from django.test.utils import CaptureQueriesContext

    made: list[ScheduledDataLoaderRegistry] = []

    def factory(request):
        made.append(make_registry(request))
        return made[-1]

    example_books(authors=5, books=3, reviews=1)
    with override_settings(ROOT_URLCONF=strawberry_django_urls(), DATALOADER_SYNC_REGISTRY_FACTORY=factory,
                           MIDDLEWARE=["dataloader_sync.django.DataLoaderMiddleware"]):
        client = Client(enforce_csrf_checks=True)
        with CaptureQueriesContext(connection) as queries:
            response = client.post("/strawberry", {"query": "{ authors { name books { title reviews { rating } } } }"},
                                   content_type="application/json")
        assert response.status_code == 200, response.content
        body = response.json()
        assert "errors" not in body, body
        assert body["data"]["authors"][3] == {"name": "author 3", "books": [
            {"title": f"book 3.{b}", "reviews": [{"rating": 1 + (3 + b) % 5}]} for b in range(3)]}
        sql = [q["sql"] for q in queries.captured_queries]
        assert len(sql) == 3, sql  # authors; all their books; all those books' reviews
        assert len(made) == 1 and made[0].closed

        author_id = Author.objects.get(name="author 1").id
        query = f"{{ author(id: {author_id}) {{ name books {{ author {{ name }} }} }} }}"
        one = client.post("/strawberry", {"query": query},
                          content_type="application/json").json()
        assert one == {"data": {"author": {"name": "author 1", "books": [{"author": {"name": "author 1"}}] * 3}}}


@strawberry.type
class SubscribedUser:
    id: int

    @strawberry.field
    def name(self, info: strawberry.Info) -> str:
        return info.context["names"].load(self.id)


@strawberry.type
class Subscription:
    @strawberry.subscription
    async def users(self, count: int) -> AsyncGenerator[list[SubscribedUser], None]:
        for n in range(1, count + 1):
            yield [SubscribedUser(id=n * 10 + i) for i in range(n)]


@strawberry.type
class HelloQuery:
    hello: str = "hi"


def test_a_strawberry_schema_with_the_execution_context_serves_subscriptions() -> None:
    import asyncio

    from dataloader_sync.graphql import _compat

    if not _compat.IS_EXECUTOR:
        pytest.skip("strawberry on graphql-core 3.2 runs subscriptions without the class it is given")

    calls: list[list[int]] = []
    names = DataLoader(lambda ids: calls.append(list(ids)) or [f"user {i}" for i in ids])
    schema = strawberry.Schema(query=HelloQuery, subscription=Subscription,
                               execution_context_class=DataLoaderExecutionContext)

    async def run() -> list[Any]:
        stream = await schema.subscribe("subscription { users(count: 2) { name } }", context_value={"names": names})
        assert hasattr(stream, "__aiter__"), stream
        return [(result.data, result.errors) async for result in stream]

    results = asyncio.run(asyncio.wait_for(run(), 10))
    assert results == [({"users": [{"name": "user 10"}]}, None),
                       ({"users": [{"name": "user 20"}, {"name": "user 21"}]}, None)]
    assert calls == [[10], [20, 21]]

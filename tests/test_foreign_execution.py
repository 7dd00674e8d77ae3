"""A loader future reaching a synchronous execution that is not ours fails its field naming the fix.

graphql-core's ``graphql_sync``, graphene's ``schema.execute`` and
graphene-django's own ``GraphQLView`` (none given ``DataLoaderExecutionContext``)
complete a resolver's future as if it were the value, or (graphene-django's
view, which keeps graphql-core's ``is_awaitable``) ask whether it is awaitable
with no loop running; the field that gets it fails naming the fix ("use
DataLoaderExecutionContext"): ``is_awaitable`` raises
(``_future.NOT_OUR_EXECUTION``), a list field iterates it, a scalar field shows
it (``_future.USED_AS_VALUE``), and so does a ``String`` or ``ID`` field (its
serializer's ``str()``) and an object field (graphql-core's completion and the
default resolvers ask ``isinstance`` of it): no future is served as data and
no field read off one is silently null.  Anywhere else a future prints its
repr and has its class.
"""
from __future__ import annotations

import importlib.util
from typing import Any

import pytest
from graphql import build_schema, graphql_sync

from dataloader_sync import DataLoader

FIX = "use DataLoaderExecutionContext (execution_context_class=dataloader_sync.graphql.DataLoaderExecutionContext)"


def numbers() -> DataLoader[int, Any]:
    return DataLoader(lambda keys: [{"id": k, "name": f"n{k}"} for k in keys])


def test_plain_graphql_sync_fails_a_list_or_scalar_field_that_gets_a_loader_future() -> None:
    schema = build_schema("type Query { items: [Item!]! count: Int item: Item } type Item { id: Int! }")
    loader = numbers()
    schema.query_type.fields["items"].resolve = lambda root, info: loader.load(1)
    schema.query_type.fields["count"].resolve = lambda root, info: loader.load(2)
    listed = graphql_sync(schema, "{ items { id } }")
    scalar = graphql_sync(schema, "{ count }")
    assert listed.data is None and scalar.data == {"count": None}
    assert [e.path for e in listed.errors + scalar.errors] == [["items"], ["count"]]
    for error in listed.errors + scalar.errors:
        assert FIX in error.message
    assert loader.dispatch_depth == 2  # nothing was dispatched behind the execution's back


def test_graphene_schema_execute_fails_a_list_or_scalar_field_that_gets_a_loader_future() -> None:
    graphene = pytest.importorskip("graphene")
    loader = numbers()

    class Item(graphene.ObjectType):
        id = graphene.Int()

    class Query(graphene.ObjectType):
        items = graphene.List(Item)
        count = graphene.Int()

        def resolve_items(root: Any, info: Any) -> Any:
            return loader.load(1)

        def resolve_count(root: Any, info: Any) -> Any:
            return loader.load(2)

    result = graphene.Schema(query=Query).execute("{ items { id } count }")
    assert result.data == {"items": None, "count": None}
    assert sorted(e.path[0] for e in result.errors) == ["count", "items"]
    for error in result.errors:
        assert FIX in error.message


@pytest.mark.usefixtures("django_example_project")
def test_graphene_djangos_own_view_without_our_class_fails_naming_the_fix(example_books: Any) -> None:
    pytest.importorskip("django")
    if importlib.util.find_spec("graphene_django") is None:
        pytest.skip("graphene_django is not installed")
    from books.schema import schema
    from django.test import Client, override_settings
    from django.urls import path
    from graphene_django.views import GraphQLView

    example_books(authors=2, books=2, reviews=1)
    urls = type("urls", (), {"urlpatterns": [path("graphql", GraphQLView.as_view(schema=schema))]})
    with override_settings(ROOT_URLCONF=urls):
        response = Client().post("/graphql", {"query": "{ authors { name books { title author { name } } } }"},
                                 content_type="application/json")
    body = response.json()
    assert body["errors"], body
    assert all(FIX in error["message"] for error in body["errors"]), body["errors"]
    assert body["errors"][0]["path"] == ["authors", 0, "books"]  # (a non-null list: the first error ends it)


SDL = "type Query { name: String id: ID user: User users: [User] } type User { id: ID name: String }"
QUERY = "{ name id user { id name } }"


def _data_holds_no_future(data: Any) -> bool:
    return "LoaderFuture" not in repr(data)


def _assert_each_field_fails_naming_the_fix(result: Any) -> None:
    assert result.data == {"name": None, "id": None, "user": None}, result.data
    assert sorted(e.path[0] for e in result.errors) == ["id", "name", "user"]
    for error in result.errors:
        assert FIX in error.message, error.message


def test_plain_graphql_sync_fails_string_id_and_object_fields_that_get_a_loader_future() -> None:
    schema = build_schema(SDL)
    loader = numbers()
    for field in ("name", "id", "user"):
        schema.query_type.fields[field].resolve = lambda root, info: loader.load(1)
    result = graphql_sync(schema, QUERY)
    _assert_each_field_fails_naming_the_fix(result)
    assert _data_holds_no_future(result.data)


def test_graphene_schema_execute_fails_string_id_and_object_fields_that_get_a_loader_future() -> None:
    graphene = pytest.importorskip("graphene")
    loader = numbers()

    class User(graphene.ObjectType):
        id = graphene.ID()
        name = graphene.String()

    class Query(graphene.ObjectType):
        name = graphene.String()
        id = graphene.ID()
        user = graphene.Field(User)

        def resolve_name(root: Any, info: Any) -> Any:
            return loader.load(1)

        def resolve_id(root: Any, info: Any) -> Any:
            return loader.load(2)

        def resolve_user(root: Any, info: Any) -> Any:
            return loader.load(3)

    result = graphene.Schema(query=Query).execute(QUERY)
    _assert_each_field_fails_naming_the_fix(result)
    assert _data_holds_no_future(result.data)


def test_ariadnes_graphql_sync_fails_string_id_and_object_fields_that_get_a_loader_future() -> None:
    ariadne = pytest.importorskip("ariadne")
    loader = numbers()
    query = ariadne.QueryType()
    for field in ("name", "id", "user"):
        query.set_field(field, lambda root, info: loader.load(1))
    ok, result = ariadne.graphql_sync(ariadne.make_executable_schema(SDL, query), {"query": QUERY})
    assert result["data"] == {"name": None, "id": None, "user": None}
    assert sorted(e["path"][0] for e in result["errors"]) == ["id", "name", "user"]
    assert all(FIX in e["message"] for e in result["errors"])


def test_the_default_resolvers_fail_on_a_future_given_as_the_parent() -> None:
    # A parent that is a future (a foreign execution completed an object field with it).
    from graphql import default_field_resolver

    graphene = pytest.importorskip("graphene")
    from graphene.types.resolver import dict_or_attr_resolver

    future = numbers().load(1)
    for read in (lambda: default_field_resolver(future, _Info("name")),
                 lambda: dict_or_attr_resolver("name", None, future, None)):
        with pytest.raises(TypeError, match="not its value: use DataLoaderExecutionContext"):
            read()
    del graphene


class _Info:
    def __init__(self, field_name: str) -> None:
        self.field_name = field_name


def test_a_future_outside_graphql_prints_its_repr_and_has_its_class() -> None:
    import logging

    from dataloader_sync import Future

    future = numbers().load(1)
    assert str(future) == repr(future) == f"{future}"
    assert "state=pending" in str(future)
    assert future.__class__ is type(future)
    assert isinstance(future, Future) and not isinstance(future, dict)
    assert logging.Formatter("%(message)s").format(
        logging.LogRecord("x", logging.INFO, __file__, 1, "%s", (future,), None)) == repr(future)
    with pytest.raises(AttributeError):
        _ = future.name  # type: ignore[attr-defined]
